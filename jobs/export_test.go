package jobs

import "context"

// ReapOnce runs one pass of the periodic reaper now, so that a test decides when the
// reaper meets a running attempt. Staleness is measured by the store's clock.
func ReapOnce(ctx context.Context, e *Engine) error {
	return e.reap(ctx, e.cfg.StaleAfter)
}
