package store

import (
	"encoding/json"
	"errors"
	"time"
)

// Status is a job's place in the state machine.
type Status string

// Final reports whether no further transition but expiry can happen.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled || s == StatusExpired
}

// Valid reports whether s is one of the known states.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusProcessing, StatusSucceeded, StatusFailed, StatusCanceled, StatusExpired:
		return true
	}
	return false
}

// Event types written to job_events.
const (
	EventAccepted          = "accepted"
	EventStarted           = "started"
	EventSucceeded         = "succeeded"
	EventAttemptFailed     = "attempt_failed" // will be retried
	EventFailed            = "failed"         // final
	EventRecovered         = "recovered"      // heartbeat lost; back to PENDING (or FAILED when out of attempts)
	EventCompletedFromFile = "completed_from_file"
	EventCancelRequested   = "cancel_requested"
	EventCanceled          = "canceled"
	EventRequeued          = "requeued" // shutdown; attempt not spent
	EventResumed           = "resumed"  // an attempt continues from an earlier one's checkpoint (ResumedData)
)

// ErrIdempotencyMismatch is returned when an idempotency key is reused with another body.
var ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")

// ErrFinished is returned when an action needs an unfinished job.
var ErrFinished = errors.New("job already finished")

// Job is one row of the jobs table. Zero times mean "not yet".
type Job struct {
	ID          string
	Kind        string
	Args        json.RawMessage
	Status      Status
	Priority    int
	RunAt       time.Time
	Attempt     int
	MaxAttempts int
	// AttemptBase is the attempts spent before the last manual retry (Retry): the
	// retry backoff counts from it, so a run asked for by hand starts fresh, while
	// Attempt keeps growing for the fences (rule 4).
	AttemptBase     int
	Worker          string
	CreatedAt       time.Time
	StartedAt       time.Time
	HeartbeatAt     time.Time
	FinishedAt      time.Time
	ProgressRows    int64
	ProgressTotal   int64 // -1 when unknown
	CancelRequested bool
	ErrorCode       string
	ErrorMessage    string
	FileName        string
	FileSize        int64
	FileSHA256      string
	IdempotencyKey  string
	RequestHash     string
	// Warnings are what a successful attempt wants the user to know.
	Warnings []string
	// CreatedBy names the access token that created the job ("" when none).
	CreatedBy string
	// NotifyURL is NewJob.NotifyURL: opaque to the store, read by a follow-up hook.
	NotifyURL string
	// ParentID is the job whose end created this one (a FollowUp); "" for others.
	ParentID string
	// Queue is the lane the job runs in: only a claim for this queue takes it.
	Queue string
	// Seq is the job's place in insertion order (its rowid): List's order and cursor.
	Seq int64
}

// Event is one row of the append-only job_events log.
type Event struct {
	ID      int64
	JobID   string
	At      time.Time
	Type    string
	Status  Status
	Attempt int
	Data    json.RawMessage // nil when the event carries no details
}

// NewJob is what Enqueue needs to create a job.
type NewJob struct {
	ID          string // required; opaque and unguessable, chosen by the caller
	Kind        string
	Args        json.RawMessage
	Priority    int       // lower runs first
	RunAt       time.Time // zero: now
	MaxAttempts int       // zero: DefaultMaxAttempts
	// IdempotencyKey, when set, makes the insert happen at most once per key (rule 11);
	// RequestHash is compared to tell a replay from a reused key.
	IdempotencyKey string
	RequestHash    string
	// NotifyURL is an address the job's kind may notify when it ends (a webhook URL):
	// the store keeps it for the follow-up hook (Options.FollowUps) and never reads it.
	NotifyURL string
	// CreatedBy names the access token that asked for the job; "" stores NULL.
	CreatedBy string
	// Queue is the lane the job runs in; "" is DefaultQueue.
	Queue string
	// Audit, when set, is an entry of the audit log written in the transaction that
	// inserts the job, with Job set to its ID, so that the job exists if and only if its
	// entry does (issue 39: an export request is recorded, or refused). A request
	// answered with the job an idempotency key already has writes no entry. At is the
	// store's clock.
	Audit *AuditEntry
}

// DefaultQueue is the queue of a job or follow-up that names none: the exports lane.
const DefaultQueue = "exports"

// FileResult describes a published file.
type FileResult struct {
	Name     string
	Size     int64
	SHA256   string
	Rows     int64
	Warnings []string
}

// AttemptError is the outcome of a failed attempt.
type AttemptError struct {
	Code      string
	Message   string
	Permanent bool
}

// ListOptions filters List.
type ListOptions struct {
	Status Status // empty: any
	Kind   string // empty: any
	// Report keeps jobs whose args name this report ($.report); empty: any.
	Report string
	// CreatedBy keeps the jobs created by this token or person (NewJob.CreatedBy);
	// empty: anyone's.
	CreatedBy string
	Limit     int // default 50, at most 1000
	// Before lists the jobs inserted before the one whose Seq it is: the cursor; 0 starts
	// at the newest.
	Before int64
}

// The job states (ARCHITECTURE.md, "State machine").
const (
	StatusPending    Status = "PENDING"
	StatusProcessing Status = "PROCESSING"
	StatusSucceeded  Status = "SUCCEEDED"
	StatusFailed     Status = "FAILED"
	StatusCanceled   Status = "CANCELED"
	StatusExpired    Status = "EXPIRED"
)
