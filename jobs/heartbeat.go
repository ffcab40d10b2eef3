package jobs

import (
	"context"
	"errors"
	"time"

	"sheetq/store"
)

// renew stamps a running attempt's heartbeat and progress, fenced on (id, attempt,
// PROCESSING), and acts on the answer: a lost lease or a cancel request cancels the
// execution with that cause. Other errors are returned; they are not a lost lease.
func (e *Engine) renew(ctx context.Context, x *execution) error {
	rows, total := x.run.progress()
	cancelReq, err := e.st.Heartbeat(ctx, x.job.ID, x.job.Attempt, rows, total)
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		x.cancel(errLeaseLost)
		return nil
	case err != nil:
		return err
	case cancelReq:
		x.cancel(errCanceled)
	}
	x.stampedRows.Store(rows)
	return nil
}

// heartbeat renews the lease every interval (renew), and at once when CheckCancel asks. A
// lost lease, a cancel request or a stall cancels the execution's context with that cause.
func (e *Engine) heartbeat(ctx context.Context, x *execution, done <-chan struct{}) {
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	lastMoves, lastMoveAt := x.run.progressed.Load(), e.cfg.Now()
	lastBeat := lastMoveAt
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		case <-x.beat:
		}
		if err := e.renew(ctx, x); err != nil {
			// A failed stamp is not a lost lease: this process's own reaper never takes
			// back an attempt it runs (reap), and the next stamp may work.
			e.log.WarnContext(ctx, "heartbeat failed", "job_id", x.job.ID, "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		now := e.cfg.Now()
		if now.Sub(lastBeat) > e.cfg.StaleAfter {
			// Longer than a lease lasts since the last beat: this process was paused (or
			// starved), and its handler no more ran than this loop did. A pause is not a
			// stall: the stall clock starts again.
			lastMoveAt = now
		}
		lastBeat = now
		if moves := x.run.progressed.Load(); moves != lastMoves {
			lastMoves, lastMoveAt = moves, now
		} else if e.cfg.StallAfter > 0 && now.Sub(lastMoveAt) >= e.cfg.StallAfter {
			x.cancel(errStalled)
			return
		}
	}
}
