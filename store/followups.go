package store

import (
	"encoding/json"
	"time"
)

// FollowUp is a job that another job's end creates: a store given Options.FollowUps
// inserts it, PENDING with its "accepted" event, in the transaction that makes the
// other job (its parent) final, so that a crash cannot lose it (rule 19). The store
// does not read Kind, Args or the event data: the hook's kind owns them.
type FollowUp struct {
	// ID is the new job's id, chosen by the hook (NewID) so its events can name it.
	ID   string
	Kind string
	Args json.RawMessage
	// Priority orders claims like NewJob.Priority: lower runs first.
	Priority int
	// Queue is the lane the follow-up runs in, like NewJob.Queue; "" is DefaultQueue.
	Queue string
	// MaxAttempts is the attempt budget; zero or less means DefaultMaxAttempts.
	MaxAttempts int
	// RunIn delays the first attempt, measured by the store's clock; zero runs it now.
	RunIn time.Duration
	// AcceptedData is the data of the new job's "accepted" event; empty: none.
	AcceptedData json.RawMessage
	// ParentEvent, when set, is an event appended to the parent's timeline with
	// ParentData, so that a reader of the parent learns of the follow-up.
	ParentEvent string
	ParentData  json.RawMessage
}

// FollowUpFunc returns the follow-up jobs of job, which has just become SUCCEEDED,
// FAILED or CANCELED (EXPIRED is not an end a follow-up hears of). The store calls it
// inside the write transaction of that transition, with the job as it is committed, so
// it must be quick and must not call the store.
type FollowUpFunc func(job Job) ([]FollowUp, error)
