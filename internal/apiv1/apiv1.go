// Package apiv1 holds the JSON shapes of HTTP API v1 that more than one part shares: the
// server's answers, the webhook payload's data and the API client read the same types,
// so a field cannot drift between them (docs/api.md, "HTTP API (v1)" and "Webhooks").
//
// It imports nothing of the project: the client uses it without the store or the engine.
package apiv1

import (
	"strconv"
	"time"
)

// Job is an export job as the API shows it (GET /api/v1/exports/{id}) and as a webhook's
// data carries it. Times are UTC; a null time has not happened yet.
type Job struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Report    string `json:"report"`
	CreatedBy string `json:"created_by,omitempty"`
	// Queue is the lane the export runs in ("exports", or its report's -- queue:).
	Queue  string         `json:"queue,omitempty"`
	Params map[string]any `json:"params"`
	// Format is the file's format, "xlsx" or "csv"; BOM is set for a csv file that
	// starts with a UTF-8 byte order mark; CSVFormulas is "keep" for a csv file whose
	// text fields were written as the source held them, formulas included, and absent
	// when they were neutralised (and for xlsx).
	Format      string     `json:"format"`
	BOM         bool       `json:"bom,omitempty"`
	CSVFormulas string     `json:"csv_formulas,omitempty"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"max_attempts"`
	Progress    Progress   `json:"progress"`
	CreatedAt   *time.Time `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	HeartbeatAt *time.Time `json:"heartbeat_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// NextAttemptAt is when a PENDING job that already ran will run again.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Error is the last attempt's error; a retrying job keeps it, a SUCCEEDED one has none.
	Error *Error `json:"error,omitempty"`
	// DownloadURL is where a SUCCEEDED job's file is served; none when the file is only
	// handed out encrypted (EncryptRequired).
	DownloadURL string `json:"download_url,omitempty"`
	// EncryptRequired says that the report requires its files encrypted ("-- encrypt:
	// required"): POST /api/v1/exports/{id}/file with a password serves it.
	EncryptRequired bool `json:"encrypt_required,omitempty"`
	// File describes a SUCCEEDED job's file.
	File     *File    `json:"file,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// CancelRequested is set while a running job has been asked to stop.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// ScheduleID and ScheduledFor name the schedule whose firing made the export, and
	// the time it fired for (issue 20); absent on an export asked for by hand.
	ScheduleID   string     `json:"schedule_id,omitempty"`
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
}

// Progress is how far a job got: rows written and, when known, the total.
type Progress struct {
	Rows      int64  `json:"rows"`
	TotalRows *int64 `json:"total_rows,omitempty"`
}

// Error is why an attempt failed: a stable code and a message for people.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// File is a finished export's file: the name a browser saves it as, its size and sha256.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FilePath is the path of GET /api/v1/exports/{id}/file, which serves a job's file; a
// webhook prefixes it with the server's public URL.
func FilePath(id string) string { return "/api/v1/exports/" + id + "/file" }

// Finished tells whether the job is in a final state: SUCCEEDED, FAILED, CANCELED or
// EXPIRED.
func (j Job) Finished() bool {
	switch j.Status {
	case "SUCCEEDED", "FAILED", "CANCELED", "EXPIRED":
		return true
	}
	return false
}

// Rows is the progress as "rows" or, once the total is known, "rows/total".
func (j Job) Rows() string {
	if j.Progress.TotalRows != nil {
		return strconv.FormatInt(j.Progress.Rows, 10) + "/" + strconv.FormatInt(*j.Progress.TotalRows, 10)
	}
	return strconv.FormatInt(j.Progress.Rows, 10)
}

// Problem is an RFC 9457 problem detail (application/problem+json), the body of every
// API error, with a stable machine-readable code (docs/api.md, "HTTP API (v1)").
type Problem struct {
	// Type is a relative URI per code ("/problems/<code>").
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Param names the offending parameter of a validation error.
	Param string `json:"param,omitempty"`
	// Field names the offending field of a request other than an export's (a
	// schedule's "cron", "timezone", "deliver" or "params.NAME").
	Field string `json:"field,omitempty"`
	// Job is the existing job's id, where the problem is about one.
	Job string `json:"job,omitempty"`
	// Errors are every wrong field of an invalid_schedule problem, Field and Param
	// being its first's.
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one wrong field of a request: "cron", "timezone", "report", "format",
// "deliver" (Index naming the target, from 0, unless the list as a whole is wrong) or
// "params.NAME" (Param naming the parameter).
type FieldError struct {
	Field  string `json:"field"`
	Param  string `json:"param,omitempty"`
	Index  *int   `json:"index,omitempty"`
	Detail string `json:"detail"`
}

// Schedule is a scheduled export as API v1 shows it (issue 20; openapi.json,
// "schedule"): the server writes it, the client reads it.
type Schedule struct {
	ID     string         `json:"id"`
	Report string         `json:"report"`
	Params map[string]any `json:"params"`
	Format string         `json:"format"`
	BOM    bool           `json:"bom,omitempty"`
	Cron   string         `json:"cron"`
	// TimeZone is the IANA zone the cron expression is read in.
	TimeZone string   `json:"timezone"`
	Deliver  []Target `json:"deliver"`
	// Owner names the token that created it, or sheetq.toml for one the config file
	// declares.
	Owner  string `json:"owner,omitempty"`
	Paused bool   `json:"paused"`
	// NextRunAt is nil while paused; LastFiredFor is nil until the first firing.
	NextRunAt    *time.Time `json:"next_run_at"`
	LastFiredFor *time.Time `json:"last_fired_for"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	// NextRuns are the next five firings with their parameters resolved; empty while
	// paused.
	NextRuns []ScheduledRun `json:"next_runs"`
}

// Target is where a schedule's file goes: {"type":"email","to":[...]},
// {"type":"webhook","url":...} or {"type":"folder","path":...}.
//
// An email or folder target may carry "password": where the password that encrypts its
// file is (env:SHEETQ_PASSWORD_<NAME> or file:PATH), never the password itself; shown,
// so that a client that writes a schedule's targets back keeps its encryption.
type Target struct {
	Type     string   `json:"type"`
	To       []string `json:"to,omitempty"`
	URL      string   `json:"url,omitempty"`
	Path     string   `json:"path,omitempty"`
	Password string   `json:"password,omitempty"`
}

// ScheduledRun is one coming firing of a schedule, with the parameters it will run with.
type ScheduledRun struct {
	At     time.Time      `json:"at"`
	Params map[string]any `json:"params"`
}
