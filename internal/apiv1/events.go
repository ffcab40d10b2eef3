package apiv1

import (
	"encoding/json"
	"time"
)

// StateEvent is the data of a stored event on GET /api/v1/events (its SSE event type is
// the event's type, its SSE id the event's id): the event as stored, and the job as it
// is when the event is sent, nil when the job was deleted meanwhile.
type StateEvent struct {
	Job   *Job  `json:"job"`
	Event Event `json:"event"`
}

// Event is one entry of a job's timeline (job_events), as the stream shows it.
type Event struct {
	ID      int64     `json:"id"`
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// Data is the event type's own payload, as its writer stored it (docs/api.md, "Live events").
	Data json.RawMessage `json:"data,omitempty"`
}

// ProgressEvent is the data of an SSE "progress" event: a running job's latest figures.
// It has no SSE id and is never replayed.
type ProgressEvent struct {
	ID        string `json:"id"`
	Rows      int64  `json:"rows"`
	TotalRows *int64 `json:"total_rows,omitempty"`
}

// Snapshot is the data of an SSE "snapshot" event, sent instead of a replay whose events
// were pruned: the current state of the jobs followed.
type Snapshot struct {
	Jobs []Job `json:"jobs"`
}

// Deleted is the data of an SSE "deleted" event: the job is gone with its timeline.
type Deleted struct {
	ID string `json:"id"`
}
