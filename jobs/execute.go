package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"sheetq/store"
)

// execute runs one attempt and records its outcome. It returns, and so frees the
// worker's slot, also when the handler ignores its cancelled context (runHandler).
func (e *Engine) execute(ctx context.Context, x *execution) {
	job, run := x.job, x.run
	log := e.log.With("job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt)
	log.InfoContext(ctx, "job started")
	began := e.cfg.Now()
	if job.Attempt > 1 {
		// An earlier attempt may have left a checkpoint to continue from (rule 30). If it
		// cannot be read the attempt starts from the beginning: slower, never wrong.
		cp, err := e.st.Checkpoint(ctx, job.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			log.WarnContext(ctx, "checkpoint not read; starting from the beginning", "err", err)
		}
		run.Resume = cp
	}

	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	go func() {
		defer close(hbStopped)
		e.heartbeat(ctx, x, hbDone)
	}()

	abandoned, err := e.runHandler(ctx, log, x)
	close(hbDone)
	<-hbStopped

	// Store writes below must outlive a cancelled run context.
	wctx := context.WithoutCancel(ctx)
	cause := context.Cause(ctx)
	if cause == nil {
		cause = ctx.Err()
	}
	var partErr error
	if abandoned {
		// The handler may still write: refuse it, and drop what it wrote (rules 7 and 13).
		run.fence()
	} else {
		partErr = run.closePart()
	}
	switch {
	case errors.Is(cause, errLeaseLost):
		run.removePart()
		// Expected after a pause or when another node took the job: not an error.
		log.InfoContext(wctx, "lease lost; attempt stopped without publishing")
	case errors.Is(cause, errCanceled):
		// Checked before success: a cancelled attempt publishes nothing (rule 7), even
		// if its handler ignored the cancel and returned nil.
		run.removePart()
		if _, err := e.record(wctx, log, "canceled", func() (store.Job, error) {
			return e.fin.finish(store.Finish{ID: job.ID, Attempt: job.Attempt, Outcome: store.Canceled})
		}); err == nil {
			e.notify()
			log.InfoContext(wctx, "job canceled")
		}
	case err == nil && partErr == nil && !abandoned:
		e.succeed(wctx, log, x, began)
	case errors.Is(cause, errShutdown):
		reason := "shutdown"
		if abandoned {
			reason = "handler did not stop after shutdown"
		} else {
			e.saveLastCheckpoint(wctx, x)
		}
		e.requeue(wctx, log, x, reason)
	default:
		run.removePart()
		if !abandoned {
			e.saveLastCheckpoint(wctx, x)
		}
		code, msg, permanent := "", "", false
		switch {
		case errors.Is(cause, errStalled):
			code, msg = "stalled", fmt.Sprintf("no progress for %s", e.cfg.StallAfter)
			if abandoned {
				msg += fmt.Sprintf("; the source did not stop within %s and was abandoned", e.cfg.AbandonAfter)
			}
		case err == nil && diskFull(partErr):
			code, msg = "disk_full", partErr.Error()
		case err == nil:
			code, msg = "io", partErr.Error()
		default:
			code, msg, permanent = classify(err)
		}
		delay := e.backoffFor(job)
		if d := retryAfter(err); d > 0 {
			delay = d
		}
		e.fail(wctx, log, x, store.AttemptError{Code: code, Message: msg, Permanent: permanent}, delay)
	}
}

// fail records a failed attempt.
func (e *Engine) fail(ctx context.Context, log *slog.Logger, x *execution, ae store.AttemptError, retryIn time.Duration) {
	j, err := e.record(ctx, log, "failure", func() (store.Job, error) {
		return e.fin.finish(store.Finish{ID: x.job.ID, Attempt: x.job.Attempt, Outcome: store.Failed, Error: ae, RetryIn: retryIn})
	})
	if err != nil {
		return
	}
	e.notify()
	log.WarnContext(ctx, "job attempt failed", "code", ae.Code, "error", ae.Message, "permanent", ae.Permanent, "status", j.Status)
	if j.Status == store.StatusPending {
		e.Wake()
	}
}

// publishError is a failed rename or directory sync while publishing into the local
// directory (LocalFiles): a file system fault that another try of the same commit does
// not cure.
type publishError struct{ err error }

func (p publishError) Error() string { return p.err.Error() }
func (p publishError) Unwrap() error { return p.err }

func (e *Engine) succeed(ctx context.Context, log *slog.Logger, x *execution, began time.Time) {
	job, run := x.job, x.run
	// The part file has been renamed into exports/ or uploaded, or is of no use any more.
	defer run.removePart()
	rows, _ := run.progress()
	res := store.FileResult{Rows: rows, Warnings: run.Warnings()}
	var publish func() error
	if run.hash != nil {
		res.Size, res.SHA256 = run.hash.size, run.hash.sum()
		res.Name = e.cfg.Files.Key(job.ID, job.Attempt, fileName(e.handlers[job.Kind], job.ID, job.Args))
		// Commit the final row count before publishing: a crash between the publish and
		// the commit leaves a job that recovery completes from its file (rule 5), with
		// the rows of its last stamp. The fenced stamp also renews the lease right
		// before publishing, and tells an attempt that lost it to stop here.
		if rows != x.stampedRows.Load() {
			if _, err := e.st.Heartbeat(ctx, job.ID, job.Attempt, rows, rows); errors.Is(err, store.ErrLeaseLost) {
				log.InfoContext(ctx, "outcome not recorded: the attempt no longer owns the job", "outcome", "success")
				return
			}
			// Another error is the store's; Succeed below meets it again and retries.
		}
		var err error
		publish, err = e.put(ctx, x, res)
		switch {
		case errors.Is(err, errLeaseLost):
			// What was uploaded stays: another node's reaper may have completed the job
			// from it. If none did, no job references it and the janitor removes it.
			log.InfoContext(ctx, "outcome not recorded: the attempt lost the job while publishing", "outcome", "success")
			return
		case err != nil:
			log.ErrorContext(ctx, "publish failed", "key", res.Name, "err", err)
			e.fail(ctx, log, x, store.AttemptError{Code: "io", Message: err.Error()}, e.backoffFor(job))
			return
		}
		// For crash tests: the file is in the file store (uploaded to a bucket; for the
		// local directory, ready to be renamed), SUCCEEDED is not committed.
		faultPoint("after-upload")
	}
	e.cfg.Gate.Await()
	_, err := e.record(ctx, log, "success", func() (store.Job, error) {
		return e.fin.finish(store.Finish{ID: job.ID, Attempt: job.Attempt, Outcome: store.Succeeded, Result: res, Publish: publish})
	})
	var pe publishError
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		// Nothing was published locally: the fence refused before the rename. An upload
		// stays, as above.
		return
	case errors.As(err, &pe):
		log.ErrorContext(ctx, "publish failed", "err", err)
		e.fail(ctx, log, x, store.AttemptError{Code: "io", Message: pe.Error()}, e.backoffFor(job))
		return
	case errors.Is(err, store.ErrUnstorable):
		// The success cannot be recorded; its reason may be (a follow-up the store
		// refuses). If the failure is refused too, the job stays PROCESSING, without
		// this worker, for a reaper.
		e.fail(ctx, log, x, store.AttemptError{Code: "unstorable", Permanent: true,
			Message: "the store refused to record the attempt's success: " + err.Error()}, 0)
		return
	case err != nil:
		// Shutdown while the store refused the commit: the job stays PROCESSING and the
		// next start recovers it, or completes it from its file if it was published.
		return
	}
	faultPoint("after-commit")
	e.notify()
	log.InfoContext(ctx, "job succeeded", "rows", rows, "size", res.Size, "took", e.cfg.Now().Sub(began).Round(time.Millisecond))
}

// put hands the attempt's part file to the file store (Files.Put) while it keeps the
// lease: the handler's heartbeat has stopped, and an upload that outlasts StaleAfter
// would otherwise let a reaper take the job back and run it again. It stamps the
// heartbeat, fenced, every Heartbeat; a lost lease cancels the upload and is returned as
// errLeaseLost, also when the upload finished first.
func (e *Engine) put(ctx context.Context, x *execution, res store.FileResult) (func() error, error) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(e.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			_, err := e.st.Heartbeat(pctx, x.job.ID, x.job.Attempt, res.Rows, res.Rows)
			if errors.Is(err, store.ErrLeaseLost) {
				cancel(errLeaseLost)
				return
			}
			if err != nil && pctx.Err() == nil {
				e.log.WarnContext(ctx, "heartbeat failed while publishing", "job_id", x.job.ID, "err", err)
			}
		}
	}()
	publish, err := e.cfg.Files.Put(pctx, res.Name, x.run.partPath, res.Size, res.SHA256)
	close(done)
	<-stopped
	if errors.Is(context.Cause(pctx), errLeaseLost) {
		return nil, errLeaseLost
	}
	return publish, err
}

// Bounds of the delay between tries to record an attempt's outcome.
const (
	recordRetryMin = 100 * time.Millisecond
	recordRetryMax = 5 * time.Second
)

// record runs fn, a fenced store write that ends an attempt, until it commits, the
// attempt turns out to have lost its lease (store.ErrLeaseLost, returned as is), the
// store refuses the end for good (store.ErrUnstorable, returned as is), or the
// engine shuts down. A store that cannot write for a while (a full disk, a lock held by
// another process) must not leave the job PROCESSING until a reaper notices: the
// outcome is known, so it is kept and written as soon as the store takes it. Each try
// is fenced, so a try after the lease was lost changes nothing. A publishError is not
// the store's and is returned at once.
func (e *Engine) record(ctx context.Context, log *slog.Logger, what string, fn func() (store.Job, error)) (store.Job, error) {
	delay := recordRetryMin
	for tries := 1; ; tries++ {
		j, err := fn()
		var pe publishError
		switch {
		case err == nil:
			if tries > 1 {
				log.InfoContext(ctx, "outcome recorded after the store refused it", "outcome", what, "tries", tries)
			}
			if j.Status.Final() {
				e.ended(j, false)
			}
			return j, nil
		case errors.Is(err, store.ErrLeaseLost):
			// Expected after a pause, or when another node took the job: the fence did
			// its work, nothing is wrong here.
			log.InfoContext(ctx, "outcome not recorded: the attempt no longer owns the job", "outcome", what)
			return j, err
		case errors.As(err, &pe):
			return j, err
		case errors.Is(err, store.ErrUnstorable):
			// The store refuses a value of this end and would refuse it every time (on
			// PostgreSQL, a job whose args an earlier version stored with a NUL: issue
			// 36). Retrying would hold the worker's slot for good; the caller decides
			// what is left to try, and a job left PROCESSING goes to a reaper (rule 5).
			log.ErrorContext(ctx, "the store refuses the outcome and would refuse it again; not retrying it",
				"outcome", what, "err", err)
			return j, err
		case e.runCtx.Err() != nil:
			log.ErrorContext(ctx, "cannot record the outcome before shutdown; the next start recovers the job",
				"outcome", what, "tries", tries, "err", err)
			return j, err
		case tries == 1:
			log.ErrorContext(ctx, "cannot record the outcome; retrying until the store takes it",
				"outcome", what, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-e.runCtx.Done():
			t.Stop()
		}
		delay = min(2*delay, recordRetryMax)
	}
}

// requeue puts a stopped attempt's job back to PENDING without spending the attempt.
func (e *Engine) requeue(ctx context.Context, log *slog.Logger, x *execution, reason string) {
	x.run.removePart()
	_, err := e.record(ctx, log, "requeue", func() (store.Job, error) {
		return e.fin.finish(store.Finish{ID: x.job.ID, Attempt: x.job.Attempt, Outcome: store.Requeued, Reason: reason})
	})
	if err != nil {
		return
	}
	log.InfoContext(ctx, "job requeued", "reason", reason)
	e.notify()
}

// runHandler runs the attempt's handler on a goroutine of its own (on a thread of
// lowered priority when Config.Nice is set) and returns its error. Once ctx is done, the
// handler has AbandonAfter to return; if it has not by then (a source blocked in a read
// that ignores cancellation), runHandler abandons it and returns the context's cause
// with abandoned set: the caller fences the attempt's output and ends the attempt, and
// the worker slot is free again. The goroutine runs on until the handler returns; its
// result is then dropped.
func (e *Engine) runHandler(ctx context.Context, log *slog.Logger, x *execution) (abandoned bool, err error) {
	h, ok := e.handlers[x.job.Kind]
	if !ok {
		return false, Permanentf("unknown_kind", "no handler for job kind %q", x.job.Kind)
	}
	done := make(chan error, 1)
	go func() {
		if e.cfg.Nice != 0 && LowerPrioritySupported {
			e.cfg.Gate.lowerHandlers()
			if err := lowerPriority(e.cfg.Nice); err != nil {
				log.DebugContext(ctx, "job runs at normal priority", "err", err)
			}
		}
		err := safeRun(ctx, log, h, x.run)
		done <- err
		if !x.handler.CompareAndSwap(handlerRunning, handlerReturned) {
			e.abandonedAlive.Add(-1)
			log.InfoContext(ctx, "abandoned handler returned at last; its result is dropped", "err", err)
		}
	}()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
	}
	t := time.NewTimer(e.cfg.AbandonAfter)
	defer t.Stop()
	select {
	case err := <-done:
		return false, err
	case <-t.C:
	}
	// Counted before the swap, so that the handler returning right now never takes the
	// gauge below zero.
	e.abandonedAlive.Add(1)
	if !x.handler.CompareAndSwap(handlerRunning, handlerAbandoned) {
		e.abandonedAlive.Add(-1)
		return false, <-done
	}
	e.abandonedTotal.Add(1)
	cause := context.Cause(ctx)
	log.WarnContext(ctx, "handler did not stop; abandoned, and its slot freed", "cause", cause, "waited", e.cfg.AbandonAfter)
	return true, cause
}

// safeRun runs the handler, turning a panic into a retryable failed attempt. The stack
// goes to the log only: the job's error is shown to API clients.
func safeRun(ctx context.Context, log *slog.Logger, h Handler, run *Run) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.ErrorContext(ctx, "job handler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = Retryable("panic", fmt.Errorf("handler panicked: %v", p))
		}
	}()
	return h.Run(ctx, run)
}

// ended tells j's handler, if it keeps something between attempts, that j has ended.
func (e *Engine) ended(j store.Job, orphan bool) {
	if en, ok := e.handlers[j.Kind].(Ender); ok { // handlers do not change after Start
		en.Ended(j, orphan)
	}
}
