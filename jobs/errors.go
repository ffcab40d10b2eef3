package jobs

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Error is a job failure with a stable code, kept per attempt in the job's events.
type Error struct {
	// Code is a short machine-readable reason, such as "bad_params" or "upstream".
	Code string
	// Permanent errors fail the job at once; others are retried with backoff.
	Permanent bool
	// Err is the underlying cause.
	Err error
	// RetryAfter, when positive, is how long to wait before the next attempt instead of
	// the engine's backoff (an upstream's Retry-After).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Code
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Permanent marks err as a failure that no retry can fix (bad report, bad parameters).
func Permanent(code string, err error) error {
	return &Error{Code: code, Permanent: true, Err: err}
}

// Retryable marks err as a passing failure (upstream error, I/O) worth another attempt.
func Retryable(code string, err error) error {
	return &Error{Code: code, Err: err}
}

// RetryableAfter is Retryable with the delay the upstream asked for.
func RetryableAfter(code string, err error, after time.Duration) error {
	return &Error{Code: code, Err: err, RetryAfter: after}
}

// Permanentf is Permanent with a formatted message.
func Permanentf(code, format string, args ...any) error {
	return Permanent(code, fmt.Errorf(format, args...))
}

// classify turns any handler error into a code, a message and whether it is permanent.
// An unmarked error is retryable: most unknown failures are I/O or an upstream hiccup.
func classify(err error) (code, msg string, permanent bool) {
	var je *Error
	switch {
	case errors.As(err, &je) && diskFull(err):
		return "disk_full", err.Error(), je.Permanent
	case je != nil:
		return je.Code, err.Error(), je.Permanent
	case diskFull(err):
		return "disk_full", err.Error(), false
	}
	return "error", err.Error(), false
}

// diskFull reports whether err comes from a full disk (or quota), whichever layer
// wrapped it: that deserves its own code, so a user sees what to fix.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// retryAfter returns the delay an error asks for, or 0.
func retryAfter(err error) time.Duration {
	var je *Error
	if errors.As(err, &je) {
		return je.RetryAfter
	}
	return 0
}
