package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"sheetq/store"
)

// reaper recovers stale jobs periodically.
func (e *Engine) reaper() {
	defer e.loops.Done()
	t := time.NewTicker(e.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stopClaim:
			return
		case <-t.C:
		}
		if err := e.reap(e.runCtx, e.cfg.StaleAfter); err != nil {
			e.log.Error("reap", "err", err)
		}
	}
}

// reap recovers PROCESSING jobs whose heartbeat is older than staleAfter by the store's
// clock (all of them when staleAfter is zero). A job whose file is already published (in
// the file store, under its attempt's key) is completed from it (rule 5), not run again.
// Only a store that cannot list them fails the pass: a job the store will not take back
// is logged and left for the next pass, so that no one job stops the others, nor a
// node's start (issue 36).
func (e *Engine) reap(ctx context.Context, staleAfter time.Duration) error {
	e.claimMu.Lock()
	stale, err := e.st.Stale(ctx, staleAfter)
	own := make([]*execution, len(stale))
	for i, j := range stale {
		own[i] = e.find(j.ID, j.Attempt)
	}
	e.claimMu.Unlock()
	if err != nil {
		return err
	}
	for i, j := range stale {
		log := e.log.With("job_id", j.ID, "attempt", j.Attempt)
		if x := own[i]; x != nil {
			// This process runs the attempt: its heartbeat is late because the process was
			// paused (SIGSTOP, a frozen VM, a closed laptop) or the store refused stamps,
			// not because its worker died. Never take a job back from a live worker of
			// our own: renew its lease instead. The renewal is fenced like any heartbeat,
			// so if another node took the job meanwhile, the worker learns it and stops.
			if err := e.renew(ctx, x); err != nil {
				log.WarnContext(ctx, "renew a late lease of this process", "err", err)
			} else {
				log.InfoContext(ctx, "late lease renewed: this process still runs the attempt", "last_heartbeat", j.HeartbeatAt)
			}
			continue
		}
		if err := e.recoverOrphan(ctx, log, j); err != nil {
			log.ErrorContext(ctx, "orphan left for the next pass: the store did not take it back", "err", err)
		}
	}
	if len(stale) > 0 {
		e.Wake()
	}
	return nil
}

// recoverOrphan takes back one stale attempt that no execution of this engine holds:
// completed from its published file, or recovered (rule 5). A fence that no longer
// matches is no error: another node took the job first.
func (e *Engine) recoverOrphan(ctx context.Context, log *slog.Logger, j store.Job) error {
	key := e.cfg.Files.Key(j.ID, j.Attempt, fileName(e.handlers[j.Kind], j.ID, j.Args))
	fi, ferr := e.cfg.Files.Stat(ctx, key)
	if ferr == nil {
		done, err := e.st.CompleteFromFile(ctx, j.ID, j.Attempt, store.FileResult{
			Name: key, Size: fi.Size, SHA256: fi.SHA256, Rows: j.ProgressRows})
		switch {
		case err == nil:
			log.InfoContext(ctx, "orphan completed from its published file", "key", key)
			e.ended(done, true)
			e.notify()
			return nil
		case errors.Is(err, store.ErrLeaseLost):
			return nil
		case !errors.Is(err, store.ErrUnstorable):
			return err
		}
		// The store will never take this success (store.ErrUnstorable): the file is of
		// no use, and recovering the attempt may still end the job.
		log.WarnContext(ctx, "orphan's published file cannot be recorded; recovering it instead", "key", key, "err", err)
	} else if !notPublished(ferr) {
		// The bucket did not answer: the file may be there. Running the job again
		// would be safe (the next attempt has a key of its own) but wasted; the next
		// pass asks again.
		log.WarnContext(ctx, "orphan left for the next pass: cannot tell whether its file was published", "key", key, "err", ferr)
		return nil
	}
	last := "never"
	if !j.HeartbeatAt.IsZero() {
		last = j.HeartbeatAt.Format(time.RFC3339)
	}
	reason := fmt.Sprintf("heartbeat lost (worker %s, last heartbeat %s)", j.Worker, last)
	rec, err := e.st.Recover(ctx, j.ID, j.Attempt, reason, 0)
	if errors.Is(err, store.ErrLeaseLost) {
		return nil
	}
	if err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(e.cfg.TmpDir, PartName(j.ID, j.Attempt)))
	if rec.Status.Final() {
		e.ended(rec, true) // out of attempts: nothing will resume it
	}
	log.WarnContext(ctx, "orphan recovered", "status", rec.Status, "reason", reason)
	e.notify()
	return nil
}
