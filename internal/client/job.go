package client

import (
	"fmt"
	"time"
)

// Job is an export as the API returns it (README.md, "API"), the fields the client
// reads.
type Job struct {
	ID          string         `json:"id"`
	Status      string         `json:"status"`
	Report      string         `json:"report"`
	Params      map[string]any `json:"params"`
	Attempt     int            `json:"attempt"`
	MaxAttempts int            `json:"max_attempts"`
	Progress    struct {
		Rows      int64  `json:"rows"`
		TotalRows *int64 `json:"total_rows"`
	} `json:"progress"`
	CreatedAt  *time.Time `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	DownloadURL     string `json:"download_url"`
	CancelRequested bool   `json:"cancel_requested"`
	File            *struct {
		Name   string `json:"name"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"file"`
}

// Finished tells whether the job is in a final state.
func (j *Job) Finished() bool {
	switch j.Status {
	case "SUCCEEDED", "FAILED", "CANCELED", "EXPIRED":
		return true
	}
	return false
}

// Rows is the progress as "rows" or "rows/total".
func (j *Job) Rows() string {
	if j.Progress.TotalRows != nil {
		return fmt.Sprintf("%d/%d", j.Progress.Rows, *j.Progress.TotalRows)
	}
	return fmt.Sprint(j.Progress.Rows)
}
