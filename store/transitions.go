package store

// The state machine's checks and choices that do not depend on SQL (ARCHITECTURE.md,
// "State machine"). A driver makes each on the job as it reads it inside the operation's
// transaction (locked where the database needs it), so that each is written once, here,
// and every driver refuses and chooses alike.

// CancelStep is what Cancel does to a job, by the state it was read in.
type CancelStep int

const (
	// CancelNothing: a cancel was requested already; nothing is written.
	CancelNothing CancelStep = iota
	// CancelNow: a PENDING job becomes CANCELED at once, with its event and follow-ups.
	CancelNow
	// CancelRequest: a PROCESSING job gets cancel_requested and a "cancel_requested"
	// event; its worker sees it through its engine or its next heartbeat (rule 8).
	CancelRequest
)

// CancelStepOf is what Cancel does to j, or ErrFinished for a job that already ended.
func CancelStepOf(j Job) (CancelStep, error) {
	switch {
	case j.Status == StatusPending:
		return CancelNow, nil
	case j.Status == StatusProcessing && j.CancelRequested:
		return CancelNothing, nil
	case j.Status == StatusProcessing:
		return CancelRequest, nil
	case mutant == "cancel-of-any-state":
		return CancelNow, nil
	}
	return CancelNothing, ErrFinished
}

// CheckRetry refuses to retry a job that is neither FAILED nor CANCELED (rule 20).
func CheckRetry(j Job) error {
	if j.Status == StatusFailed || j.Status == StatusCanceled || mutant == "retry-of-any-state" {
		return nil
	}
	return ErrNotRetryable
}

// CheckExpire refuses to expire a job that has not SUCCEEDED (rule 22).
func CheckExpire(j Job) error {
	if j.Status == StatusSucceeded || mutant == "expire-of-any-state" {
		return nil
	}
	return ErrNotSucceeded
}

// CheckDelete refuses to delete a job that has not finished (rule 21).
func CheckDelete(j Job) error {
	if j.Status.Final() || mutant == "delete-of-unfinished" {
		return nil
	}
	return ErrNotFinished
}

// RecoveredEvent is the event of a recovered attempt's job by the state it went to
// (rule 6): "recovered" back to PENDING, "failed" out of attempts, "canceled" when a
// cancel was requested.
func RecoveredEvent(s Status) string {
	switch s {
	case StatusFailed:
		return EventFailed
	case StatusCanceled:
		return EventCanceled
	}
	return EventRecovered
}
