package store

import (
	"fmt"
	"time"
)

// Outcome is how a running attempt ends, in a Finish.
type Outcome int

// The outcomes a Finish records; each is what the method of the same name does alone.
const (
	// Succeeded: Succeed (Result, Publish).
	Succeeded Outcome = iota + 1
	// Failed: Fail (Error, RetryIn).
	Failed
	// Canceled: FinishCanceled.
	Canceled
	// Requeued: Requeue (Reason).
	Requeued
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeed"
	case Failed:
		return "fail"
	case Canceled:
		return "finish canceled"
	case Requeued:
		return "requeue"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Finish is the end of one running attempt, fenced by ID and Attempt (rule 3).
type Finish struct {
	ID      string
	Attempt int
	Outcome Outcome

	// Result and Publish, for Succeeded: Publish (may be nil) runs inside the
	// transaction once the fence has matched, and its error commits nothing of this job.
	Result  FileResult
	Publish func() error
	// Error and RetryIn, for Failed.
	Error   AttemptError
	RetryIn time.Duration
	// Reason, for Requeued.
	Reason string
}

// Finished is what one Finish came to: the job as committed, or the error that kept
// this Finish (and only it) from committing.
type Finished struct {
	Job Job
	Err error
}
