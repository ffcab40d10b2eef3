package app

import (
	"encoding/json"
	"strings"
	"time"

	"sheetq/jobs/export"
	"sheetq/store"
)

// jobJSON is a job as the API shows it (ARCHITECTURE.md, "Public contracts": README,
// "HTTP API (v1)").
type jobJSON struct {
	ID            string         `json:"id"`
	Status        store.Status   `json:"status"`
	Report        string         `json:"report"`
	CreatedBy     string         `json:"created_by,omitempty"`
	Params        map[string]any `json:"params"`
	Attempt       int            `json:"attempt"`
	MaxAttempts   int            `json:"max_attempts"`
	Progress      progressJSON   `json:"progress"`
	CreatedAt     *time.Time     `json:"created_at"`
	StartedAt     *time.Time     `json:"started_at"`
	HeartbeatAt   *time.Time     `json:"heartbeat_at"`
	FinishedAt    *time.Time     `json:"finished_at"`
	NextAttemptAt *time.Time     `json:"next_attempt_at,omitempty"`
	Error         *errorJSON     `json:"error,omitempty"`
	DownloadURL   string         `json:"download_url,omitempty"`
	File          *fileJSON      `json:"file,omitempty"`
	Warnings      []string       `json:"warnings,omitempty"`

	// CancelRequested is set while a running job has been asked to stop.
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

type progressJSON struct {
	Rows      int64  `json:"rows"`
	TotalRows *int64 `json:"total_rows,omitempty"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type fileJSON struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func toJobJSON(j store.Job) jobJSON {
	var args export.Args
	_ = json.Unmarshal(j.Args, &args)
	out := jobJSON{
		ID: j.ID, Status: j.Status, Report: args.Report, CreatedBy: j.CreatedBy, Params: args.Params,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Progress:  progressJSON{Rows: j.ProgressRows},
		CreatedAt: timePtr(j.CreatedAt), StartedAt: timePtr(j.StartedAt),
		HeartbeatAt: timePtr(j.HeartbeatAt), FinishedAt: timePtr(j.FinishedAt),
	}
	if out.Params == nil {
		out.Params = map[string]any{}
	}
	if j.ProgressTotal >= 0 {
		total := j.ProgressTotal
		out.Progress.TotalRows = &total
	}
	if j.Status == store.StatusPending && j.Attempt > 0 {
		out.NextAttemptAt = timePtr(j.RunAt)
	}
	// A retrying job keeps its last error visible, so a client can say why it waits.
	if j.ErrorCode != "" && j.Status != store.StatusSucceeded {
		out.Error = &errorJSON{Code: j.ErrorCode, Message: j.ErrorMessage}
	}
	out.Warnings = j.Warnings
	out.CancelRequested = j.CancelRequested && j.Status == store.StatusProcessing
	if j.Status == store.StatusSucceeded && j.FileName != "" {
		out.DownloadURL = "/api/v1/exports/" + j.ID + "/file"
		out.File = &fileJSON{Name: downloadName(args.Report, j), Size: j.FileSize, SHA256: j.FileSHA256}
	}
	return out
}

// downloadName is the name a browser saves the file as: <report>-<YYYY-MM-DD>-<short id>.xlsx.
func downloadName(report string, j store.Job) string {
	day := j.FinishedAt
	if day.IsZero() {
		day = j.CreatedAt
	}
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, report)
	if safe == "" {
		safe = "export"
	}
	short := j.ID
	if len(short) > 8 {
		short = short[:8]
	}
	return safe + "-" + day.UTC().Format("2006-01-02") + "-" + short + ".xlsx"
}
