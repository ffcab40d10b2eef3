package jobs

import (
	"math/rand/v2"
	"time"

	"sheetq/store"
)

// Backoffer is implemented by a Handler whose kind retries on its own schedule (webhook
// deliveries retry over hours, exports over minutes).
type Backoffer interface {
	Backoff(attempt int) time.Duration
}

// backoffFor is the delay before retrying job's failed attempt, on its kind's schedule.
// It counts the attempts since the last manual retry (store.Job.AttemptBase): a run asked
// for by hand starts fresh, and does not wait as if it were the fifth try.
func (e *Engine) backoffFor(job store.Job) time.Duration {
	n := max(job.Attempt-job.AttemptBase, 1)
	if b, ok := e.handlers[job.Kind].(Backoffer); ok {
		return b.Backoff(n)
	}
	return e.backoff(n)
}

// backoff is base*2^(attempt-1) capped at max, with equal jitter so that many failed
// jobs do not retry in lockstep.
func (e *Engine) backoff(attempt int) time.Duration {
	d := e.cfg.BackoffBase
	for i := 1; i < attempt && d < e.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, e.cfg.BackoffMax)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}
