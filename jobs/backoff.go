package jobs

import (
	"math/rand/v2"
	"time"
)

// Backoffer is implemented by a Handler whose kind retries on its own schedule (webhook
// deliveries retry over hours, exports over minutes).
type Backoffer interface {
	Backoff(attempt int) time.Duration
}

// backoffFor is the delay before retrying a kind's failed attempt.
func (e *Engine) backoffFor(kind string, attempt int) time.Duration {
	if b, ok := e.handlers[kind].(Backoffer); ok {
		return b.Backoff(attempt)
	}
	return e.backoff(attempt)
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
