package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"sheetq/store"
)

// renew stamps a running attempt's heartbeat and progress, fenced on (id, attempt,
// PROCESSING), and acts on the answer: a lost lease or a cancel request cancels the
// execution with that cause. Other errors are returned; they are not a lost lease.
func (e *Engine) renew(ctx context.Context, x *execution) error {
	rows, total := x.run.progress()
	var (
		cancelReq bool
		err       error
	)
	data, ok := x.run.takeCheckpoint()
	if ok {
		cancelReq, err = e.st.SaveCheckpoint(ctx, x.job.ID, x.job.Attempt, rows, total, data)
		switch {
		case errors.Is(err, store.ErrCheckpointTooLarge):
			// The store refuses it and would refuse it again: the lease must not lapse
			// for it. The last checkpoint stored stays the one a next attempt reads.
			e.log.WarnContext(ctx, "checkpoint too large; not saved", "job_id", x.job.ID, "bytes", len(data))
			ok = false
		case err != nil && !errors.Is(err, store.ErrLeaseLost):
			x.run.untakeCheckpoint(data)
		}
	}
	if !ok {
		cancelReq, err = e.st.Heartbeat(ctx, x.job.ID, x.job.Attempt, rows, total)
	}
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
			x.run.wantCheckpoint()
			if x.run.checkpoints.Load() {
				// A handler that keeps checkpoints answers within moments: wait for it
				// (Run.Checkpoint nudges x.beat), so that this one write carries both the
				// lease and the newest checkpoint, which a crash then costs at most about
				// one interval. One that does not answer in half an interval (a writer
				// waiting on its source) is not waited for longer: the lease goes first.
				w := time.NewTimer(e.cfg.Heartbeat / 2)
				select {
				case <-x.beat:
				case <-w.C:
				case <-done:
				case <-ctx.Done():
				}
				w.Stop()
			}
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

// resumed notes on the job's timeline that attempt x continues from a checkpoint with
// rows already written, and tells Config.OnResumed. The note is best effort: the export
// goes on without it.
func (e *Engine) resumed(ctx context.Context, x *execution, rows int64) {
	data, _ := json.Marshal(store.ResumedData{Rows: rows})
	if err := e.st.AppendEvent(context.WithoutCancel(ctx), x.job.ID, store.EventResumed, data); err != nil {
		e.log.WarnContext(ctx, "resumed event not written", "job_id", x.job.ID, "err", err)
	}
	e.log.InfoContext(ctx, "job resumed from its checkpoint", "job_id", x.job.ID, "attempt", x.job.Attempt, "rows", rows)
	if e.cfg.OnResumed != nil {
		e.cfg.OnResumed(x.job.Kind, rows)
	}
}

// saveLastCheckpoint writes the checkpoint a handler made after the last heartbeat,
// when its attempt ends in a way that a later attempt continues (a retryable failure,
// a requeue at shutdown): what it made is not lost with the process.
func (e *Engine) saveLastCheckpoint(ctx context.Context, x *execution) {
	data, ok := x.run.takeCheckpoint()
	if !ok {
		return
	}
	rows, total := x.run.progress()
	if _, err := e.st.SaveCheckpoint(ctx, x.job.ID, x.job.Attempt, rows, total, data); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		e.log.WarnContext(ctx, "last checkpoint not saved", "job_id", x.job.ID, "err", err)
	}
}
