package store

import (
	"encoding/json"
	"time"
)

// The data the store writes on the events it appends, one type per shape (docs/api.md,
// "Live events"). Readers decode an event's Data into the type its Type names (Event.Decode);
// events a job kind appends (AppendEvent) carry the kind's own types.

// StartedData is the data of a started event.
type StartedData struct {
	Worker string `json:"worker"` // the worker that claimed the attempt
}

// FileData is the data of a succeeded or completed_from_file event: the published file.
type FileData struct {
	File     string   `json:"file"`
	Size     int64    `json:"size"`
	SHA256   string   `json:"sha256"`
	Rows     int64    `json:"rows"`
	Warnings []string `json:"warnings,omitempty"`
}

// FailureData is the data of an attempt_failed, failed or canceled event that ends an
// attempt with an error (Fail).
type FailureData struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Permanent bool   `json:"permanent"`
	// RetryAt is when the next attempt runs; attempt_failed only.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// LostData is the data of a recovered, failed or canceled event written when a stale
// attempt is taken back (Recover): Code is "lost".
type LostData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ReasonData is the data of a requeued event, of a canceled event that ends a stopped
// attempt, and of a cancel_requested event the store writes by itself.
type ReasonData struct {
	Reason string `json:"reason"`
}

// ResumedData is the data of a resumed event: the rows the attempt kept from the
// checkpoint it continues from.
type ResumedData struct {
	Rows int64 `json:"rows"`
}

// RetriedData is the data of a retried event.
type RetriedData struct {
	From        Status `json:"from"`         // the state the job was retried from
	MaxAttempts int    `json:"max_attempts"` // the new attempt budget, attempts so far included
}

// Decode unmarshals the event's data into v (one of the *Data types, or a kind's type
// for a kind's event); an event without data leaves v as it is.
func (e Event) Decode(v any) error {
	if len(e.Data) == 0 {
		return nil
	}
	return json.Unmarshal(e.Data, v)
}

// FileDataOf is the data of the event that publishes res (succeeded, completed_from_file):
// every driver writes the same payload.
func FileDataOf(res FileResult) FileData {
	return FileData{File: res.Name, Size: res.Size, SHA256: res.SHA256, Rows: res.Rows, Warnings: res.Warnings}
}
