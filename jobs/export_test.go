package jobs

import "context"

// ReapOnce runs one pass of the periodic reaper now, with the engine's clock, so that a
// test decides when the reaper meets a running attempt.
func ReapOnce(ctx context.Context, e *Engine) error {
	return e.reap(ctx, e.cfg.Now().Add(-e.cfg.StaleAfter))
}
