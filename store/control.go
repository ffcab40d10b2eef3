package store

import "errors"

// Event types written by the control actions.
const (
	EventRetried = "retried" // FAILED or CANCELED back to PENDING on request
	EventExpired = "expired" // retention removed the file of a SUCCEEDED job
)

// ErrNotRetryable is returned by Retry for a job that is neither FAILED nor CANCELED.
var ErrNotRetryable = errors.New("job is neither failed nor canceled")

// ErrNotFinished is returned by Delete for a job that is still PENDING or PROCESSING.
var ErrNotFinished = errors.New("job not finished")

// ErrNotSucceeded is returned by Expire for a job that is not SUCCEEDED.
var ErrNotSucceeded = errors.New("job has not succeeded")

// DefaultMaxAttempts is the attempt budget of a job, or of a retry, that names none.
const DefaultMaxAttempts = 3
