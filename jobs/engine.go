// Package jobs is the engine: a bounded worker pool that claims jobs from the store,
// heartbeats them, retries, recovers orphans, cancels and shuts down without losing work.
package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"sheetq/internal/durable"
	"sheetq/store"
)

// Config tunes the engine. Zero fields take the documented defaults, except StallAfter,
// where zero turns the stall guard off.
type Config struct {
	// Workers bounds how many jobs run at once (default 2).
	Workers int
	// Heartbeat is how often a running job stamps heartbeat_at and progress (default 5 s).
	Heartbeat time.Duration
	// StaleAfter is the heartbeat age after which a PROCESSING job is recovered (default 30 s).
	StaleAfter time.Duration
	// ReapInterval is how often the reaper looks for stale jobs (default StaleAfter/3).
	ReapInterval time.Duration
	// StallAfter fails an attempt that heartbeats but reports no progress for this long;
	// 0 turns the guard off.
	StallAfter time.Duration
	// ShutdownGrace is how long Stop lets running jobs finish before stopping them (default 30 s).
	ShutdownGrace time.Duration
	// AbandonAfter is how long a handler that was told to stop (stall guard, cancel
	// request, lost lease, shutdown) may take to return. One that is still running then
	// is abandoned: its output is refused, its attempt ends and its slot is freed, so
	// that a source which ignores cancellation cannot hold a worker (default 10 s).
	AbandonAfter time.Duration
	// PollInterval is the fallback claim poll when no wake-up arrives (default 1 s).
	PollInterval time.Duration
	// BackoffBase and BackoffMax shape the retry delay: base*2^(attempt-1), capped, with jitter
	// (defaults 2 s and 10 min).
	BackoffBase, BackoffMax time.Duration
	// TmpDir holds part files and ExportsDir published files; both are created if missing.
	TmpDir, ExportsDir string
	// WorkerID names this process in the worker column (default host/pid).
	WorkerID string
	// Now is the clock for the stall guard and pauses (default time.Now). Staleness and
	// backoff are durations the store measures with its own clock.
	Now func() time.Time
	// Logger receives the engine's logs (default slog.Default()).
	Logger *slog.Logger
	// OnChange, if set, is called after every change the engine commits (a job
	// accepted, claimed, finished, retried, cancelled, deleted, recovered). It is a
	// wake-up, not a data push: listeners re-read what changed from the store (the
	// event hub and the metrics read job_events after their own cursors). It runs on the
	// engine's goroutines and must not block.
	OnChange func()
	// OnDelete, if set, is called with the id of each job Delete removed: the job's
	// events go with it, so a listener that follows the job learns of it only here.
	OnDelete func(id string)
	// OnProgress, if set, is called when a running job reports progress. It is called
	// from the handler's goroutine on every report: it must be cheap and never block.
	OnProgress func(jobID string, rows, total int64)
	// Nice, from 1 to 19, runs each handler on an OS thread of its own with that nice
	// value (Linux; LowerPrioritySupported), so that accepting requests, serving pages
	// and the rest of the machine go first and exports take the CPU time left over.
	// 0 runs handlers at the process's priority. The process needs spare Ps for this to
	// help: a handler's thread holds its P even while the OS runs others in its place,
	// so the server raises GOMAXPROCS by Workers when it sets Nice.
	Nice int
	// Gate lets request handlers go first: the engine waits on it before claims and
	// successes, and jobs yield to it (Run.Yield). The server shares one with its
	// handlers; nil gives the engine a gate of its own, which nothing else holds.
	Gate *Gate
}

// Defaults is the zero Config with the documented defaults applied: the command line's
// flags take their defaults from it, so that each default is written once.
func Defaults() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, 2)
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.StaleAfter = cmp.Or(c.StaleAfter, 30*time.Second)
	c.ReapInterval = cmp.Or(c.ReapInterval, max(c.StaleAfter/3, 10*time.Millisecond))
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, 30*time.Second)
	c.AbandonAfter = cmp.Or(c.AbandonAfter, 10*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.BackoffBase = cmp.Or(c.BackoffBase, 2*time.Second)
	c.BackoffMax = cmp.Or(c.BackoffMax, 10*time.Minute)
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s/%d", cmp.Or(host, "localhost"), os.Getpid())
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Gate == nil {
		c.Gate = NewGate(nil, nil)
	}
	return c
}

// Validate rejects settings the engine cannot keep its rules with, after applying the
// defaults. The command line calls it to refuse bad flags before anything starts;
// Start calls it again.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Nice < 0 || c.Nice > 19:
		return fmt.Errorf("nice must be from 0 to 19, not %d", c.Nice)
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1, not %d", c.Workers)
	case c.Heartbeat <= 0 || c.ReapInterval <= 0 || c.PollInterval <= 0 || c.ShutdownGrace < 0 || c.AbandonAfter <= 0 ||
		c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase || c.StallAfter < 0:
		return errors.New("durations must be positive, and backoff max at least backoff base")
	case c.StaleAfter < 2*c.Heartbeat:
		// A heartbeat that comes late (a busy disk, a pause) must not make a running job
		// look stale: otherwise it is recovered, and run again, while it still runs. One
		// missed heartbeat is tolerated (rule 4).
		return fmt.Errorf("stale-after (%s) must be at least twice the heartbeat interval (%s)", c.StaleAfter, c.Heartbeat)
	}
	return nil
}

// validate is Validate plus what only Start needs: the directories.
func (c Config) validate() error {
	if c.TmpDir == "" || c.ExportsDir == "" {
		return errors.New("TmpDir and ExportsDir are required")
	}
	return c.Validate()
}

// Why an execution's context was cancelled; the outcome follows from the cause.
var (
	errLeaseLost = errors.New("lease lost")
	errCanceled  = errors.New("canceled by request")
	errShutdown  = errors.New("server shutting down")
	errStalled   = errors.New("no progress")
)

// Engine runs jobs from a store with a bounded pool of workers.
type Engine struct {
	cfg      Config
	st       Store
	log      *slog.Logger
	handlers map[string]Handler

	wake  chan struct{} // capacity 1: a pending wake-up is enough
	slots chan struct{} // capacity Workers: a worker claims only with a slot

	// claimMu makes a claim and the registration of its execution one step for the
	// reaper, which holds it while it tells our attempts from orphans.
	claimMu sync.Mutex

	mu sync.Mutex
	// running holds the executions that hold a slot, one entry per execution: a job id
	// may have two (an attempt that is recording its outcome, and the next one).
	running map[*execution]struct{}

	// Handlers abandoned because they did not return after being told to stop: how many
	// are still running, and how many there were since Start.
	abandonedAlive, abandonedTotal atomic.Int64

	stopClaim  chan struct{} // closed by Stop: no more claims
	runCtx     context.Context
	cancelRuns context.CancelCauseFunc // after the grace period: stop running jobs
	loops      sync.WaitGroup          // dispatcher and reaper
	execs      sync.WaitGroup          // running executions
	started    bool
	stopOnce   sync.Once
}

// execution is one attempt of a job run by this engine.
type execution struct {
	job    store.Job
	run    *Run
	cancel context.CancelCauseFunc // cancels the attempt's context with the reason it must stop
	// handler is handlerRunning until either the handler returns or the engine abandons
	// it; whichever comes first owns the outcome.
	handler atomic.Int32
	// stampedRows is the row count of the last heartbeat the store took.
	stampedRows atomic.Int64
}

const (
	handlerRunning int32 = iota
	handlerReturned
	handlerAbandoned
)

// New returns an engine over st. Register handlers, then Start it.
func New(st Store, cfg Config) *Engine {
	cfg = cfg.withDefaults()
	return &Engine{
		cfg:       cfg,
		st:        st,
		log:       cfg.Logger,
		handlers:  map[string]Handler{},
		wake:      make(chan struct{}, 1),
		slots:     make(chan struct{}, max(cfg.Workers, 0)), // Start refuses Workers < 1
		running:   map[*execution]struct{}{},
		stopClaim: make(chan struct{}),
	}
}

// Register adds a job kind. It must be called before Start.
func (e *Engine) Register(kind string, h Handler) {
	if e.started {
		panic("jobs: Register after Start")
	}
	e.handlers[kind] = h
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// Start recovers orphans left by a previous process, then starts claiming. The caller
// must own the data directory (rule 5): every PROCESSING row is then an orphan.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.cfg.validate(); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	for _, dir := range []string{e.cfg.TmpDir, e.cfg.ExportsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("start engine: %w", err)
		}
	}
	// No execution exists yet, so every part file is debris from a dead process.
	parts, _ := filepath.Glob(filepath.Join(e.cfg.TmpDir, PartGlob))
	for _, p := range parts {
		if err := os.Remove(p); err != nil {
			e.log.WarnContext(ctx, "remove stale part file", "path", p, "err", err)
		}
	}
	if err := e.reap(ctx, 0); err != nil {
		return fmt.Errorf("start engine: recover orphans: %w", err)
	}
	e.runCtx, e.cancelRuns = context.WithCancelCause(context.WithoutCancel(ctx))
	e.started = true
	e.loops.Add(2)
	go e.dispatch()
	go e.reaper()
	return nil
}

// Stop stops claiming, lets running jobs finish within the grace period, then stops
// them and puts them back to PENDING without spending an attempt (rule 9). A handler
// that ignores the stop is abandoned after AbandonAfter (see execute), so Stop returns
// within ShutdownGrace + AbandonAfter plus the time to record the outcomes.
func (e *Engine) Stop() {
	if !e.started {
		return
	}
	e.stopOnce.Do(func() {
		close(e.stopClaim)
		e.loops.Wait()
		done := make(chan struct{})
		go func() { e.execs.Wait(); close(done) }()
		select {
		case <-done:
			e.cancelRuns(errShutdown) // nothing runs any more; releases the context
			return
		case <-time.After(e.cfg.ShutdownGrace):
		}
		e.log.Info("shutdown grace over; stopping running jobs", "running", e.runningCount())
		e.cancelRuns(errShutdown)
		<-done
	})
}

// StopNow is Stop without waiting out the grace period (a second Ctrl-C): running jobs
// are stopped at once and put back to PENDING without spending an attempt. It may be
// called while Stop waits, and cuts that wait short.
func (e *Engine) StopNow() {
	if !e.started {
		return
	}
	e.cancelRuns(errShutdown)
	e.Stop()
}

func (e *Engine) runningCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running)
}

// Running reports how many jobs this engine is executing now: the worker slots taken.
// An abandoned handler no longer takes one.
func (e *Engine) Running() int { return e.runningCount() }

// Abandoned reports how many abandoned handlers are still running (alive), and how many
// handlers were abandoned since Start (total). See Config.AbandonAfter.
func (e *Engine) Abandoned() (alive, total int64) {
	return e.abandonedAlive.Load(), e.abandonedTotal.Load()
}

// find returns this engine's execution of the job's attempt, or nil.
func (e *Engine) find(id string, attempt int) *execution {
	e.mu.Lock()
	defer e.mu.Unlock()
	for x := range e.running {
		if x.job.ID == id && x.job.Attempt == attempt {
			return x
		}
	}
	return nil
}

// Enqueue stores a new job (durably, before returning) and wakes the pool.
func (e *Engine) Enqueue(ctx context.Context, nj store.NewJob) (store.Job, bool, error) {
	if _, ok := e.handlers[nj.Kind]; !ok {
		return store.Job{}, false, fmt.Errorf("enqueue: unknown job kind %q", nj.Kind)
	}
	if nj.ID == "" {
		nj.ID = NewID()
	}
	job, existed, err := e.st.Enqueue(ctx, nj)
	if err == nil && !existed {
		e.notify()
		e.Wake()
	}
	return job, existed, err
}

// Wake makes the dispatcher look for work now instead of at its next poll.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Cancel cancels a job: a PENDING one at once, a running one within a heartbeat (at once
// when it runs in this process).
func (e *Engine) Cancel(ctx context.Context, id string) (store.Job, error) {
	job, err := e.st.Cancel(ctx, id)
	if err != nil {
		return job, err
	}
	if job.Status == store.StatusProcessing {
		if x := e.find(id, job.Attempt); x != nil {
			x.cancel(errCanceled)
		}
	}
	e.notify()
	// A cancelled PENDING job may have queued a follow-up (its webhook delivery).
	e.Wake()
	return job, nil
}

// Retry puts a FAILED or CANCELED job back in the queue to run now with a fresh budget
// of budget attempts (0: store.DefaultMaxAttempts). It returns store.ErrNotFound, or
// store.ErrNotRetryable with the job as it is.
func (e *Engine) Retry(ctx context.Context, id string, budget int) (store.Job, error) {
	job, err := e.st.Retry(ctx, id, budget)
	if err != nil {
		return job, err
	}
	e.notify()
	e.Wake()
	return job, nil
}

// Delete removes a finished job, its events and then its file (rule 21), and tells
// OnDelete. It returns store.ErrNotFound, or store.ErrNotFinished with the job for one
// that is still PENDING or PROCESSING. The file goes after the row, so a crash in
// between leaves an orphan file (sheetq doctor lists it), never a row without its file;
// a file that cannot be removed is logged, and the job is deleted all the same.
func (e *Engine) Delete(ctx context.Context, id string) (store.Job, error) {
	job, err := e.st.Delete(ctx, id)
	if err != nil {
		return job, err
	}
	if e.cfg.OnDelete != nil {
		e.cfg.OnDelete(job.ID)
	}
	// Deleting asks a running webhook delivery of the job to stop: that is a change too.
	e.notify()
	if path := FilePath(e.cfg.ExportsDir, job.FileName); path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.log.WarnContext(ctx, "remove file of deleted job", "job_id", job.ID, "err", err)
		}
	}
	return job, nil
}

// notify calls OnChange.
func (e *Engine) notify() {
	if e.cfg.OnChange != nil {
		e.cfg.OnChange()
	}
}

// dispatch claims jobs while slots are free, sleeping until a wake-up, the next run_at
// of a delayed job, or the poll interval.
func (e *Engine) dispatch() {
	defer e.loops.Done()
	ctx := e.runCtx
	busy := false // said once that claims wait for a busy database, until they work again
	for {
		select {
		case e.slots <- struct{}{}:
		case <-e.stopClaim:
			return
		}
		select {
		case <-e.stopClaim:
			<-e.slots
			return
		default:
		}
		e.cfg.Gate.Await() // see Gate.Foreground: let the request being accepted commit first
		// A claim and the registration of its execution are one step for the reaper
		// (claimMu): a pause between the two must not make our own attempt look like
		// an orphan.
		e.claimMu.Lock()
		job, err := e.st.Claim(ctx, e.cfg.WorkerID)
		var (
			x    *execution
			xctx context.Context
		)
		if err == nil {
			x, xctx = e.register(job)
		}
		e.claimMu.Unlock()
		if err == nil {
			busy = false
			faultPoint("after-claim")
			e.start(xctx, x)
			continue
		}
		<-e.slots
		wait := e.cfg.PollInterval
		switch {
		case errors.Is(err, store.ErrNotFound):
			busy = false
			if next, err := e.st.NextRunIn(ctx); err == nil {
				wait = min(wait, max(next, time.Millisecond))
			}
		case store.IsBusy(err):
			// Another connection (a backup, an sqlite3 shell) holds the lock: not an
			// error of ours, and worth one line, not one per poll.
			if !busy {
				e.log.WarnContext(ctx, "claims wait: the database is busy (another connection holds its lock)", "err", err)
				busy = true
			}
		default:
			e.log.ErrorContext(ctx, "claim failed", "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-e.wake:
		case <-t.C:
		case <-e.stopClaim:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// register records a claimed attempt as this engine's execution, holding the slot the
// dispatcher took for it, and returns it with its context.
func (e *Engine) register(job store.Job) (*execution, context.Context) {
	ctx, cancel := context.WithCancelCause(e.runCtx)
	x := &execution{
		job:    job,
		run:    newRun(e.cfg.TmpDir, job.ID, job.Kind, job.Args, job.Attempt, job.MaxAttempts),
		cancel: cancel,
	}
	x.run.onProgress = e.cfg.OnProgress
	x.run.gate = e.cfg.Gate
	e.mu.Lock()
	e.running[x] = struct{}{}
	e.mu.Unlock()
	return x, ctx
}

// start runs a registered execution; when it ends, its slot is freed.
func (e *Engine) start(ctx context.Context, x *execution) {
	e.notify()
	e.execs.Add(1)
	go func() {
		defer e.execs.Done()
		defer func() {
			e.mu.Lock()
			delete(e.running, x)
			e.mu.Unlock()
			<-e.slots
			e.Wake()
		}()
		e.execute(ctx, x)
	}()
}

// execute runs one attempt and records its outcome. It returns, and so frees the
// worker's slot, also when the handler ignores its cancelled context (runHandler).
func (e *Engine) execute(ctx context.Context, x *execution) {
	job, run := x.job, x.run
	log := e.log.With("job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt)
	log.InfoContext(ctx, "job started")
	began := e.cfg.Now()

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
			return e.st.FinishCanceled(wctx, job.ID, job.Attempt)
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
		}
		e.requeue(wctx, log, x, reason)
	default:
		run.removePart()
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
		delay := e.backoffFor(job.Kind, job.Attempt)
		if d := retryAfter(err); d > 0 {
			delay = d
		}
		e.fail(wctx, log, x, store.AttemptError{Code: code, Message: msg, Permanent: permanent}, delay)
	}
}

// fail records a failed attempt.
func (e *Engine) fail(ctx context.Context, log *slog.Logger, x *execution, ae store.AttemptError, retryIn time.Duration) {
	j, err := e.record(ctx, log, "failure", func() (store.Job, error) {
		return e.st.Fail(ctx, x.job.ID, x.job.Attempt, ae, retryIn)
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

// publishError is a failed rename or directory sync while publishing: a file system
// fault that another try of the same commit does not cure.
type publishError struct{ err error }

func (p publishError) Error() string { return p.err.Error() }
func (p publishError) Unwrap() error { return p.err }

func (e *Engine) succeed(ctx context.Context, log *slog.Logger, x *execution, began time.Time) {
	job, run := x.job, x.run
	rows, _ := run.progress()
	res := store.FileResult{Rows: rows, Warnings: run.Warnings()}
	var publish func() error
	if run.hash != nil {
		res.Name, res.Size, res.SHA256 = fileName(e.handlers[job.Kind], job.ID), run.hash.size, run.hash.sum()
		final := FilePath(e.cfg.ExportsDir, res.Name)
		// A commit can fail after the rename (a full disk): the next try finds the file
		// already in place and commits it. The transaction holds the fence throughout.
		renamed := false
		publish = func() error {
			if !renamed {
				faultPoint("after-fsync")
				if err := os.Rename(run.partPath, final); err != nil {
					return publishError{err}
				}
				renamed = true
			}
			if err := durable.SyncDir(e.cfg.ExportsDir); err != nil {
				return publishError{err}
			}
			faultPoint("after-rename")
			return nil
		}
		// Commit the final row count before the rename: a crash between the rename and
		// the commit leaves a job that recovery completes from its file (rule 5), with
		// the rows of its last stamp. The fenced stamp also renews the lease right
		// before publishing, and tells an attempt that lost it to stop here.
		if rows != x.stampedRows.Load() {
			if _, err := e.st.Heartbeat(ctx, job.ID, job.Attempt, rows, rows); errors.Is(err, store.ErrLeaseLost) {
				run.removePart()
				log.InfoContext(ctx, "outcome not recorded: the attempt no longer owns the job", "outcome", "success")
				return
			}
			// Another error is the store's; Succeed below meets it again and retries.
		}
	}
	e.cfg.Gate.Await()
	_, err := e.record(ctx, log, "success", func() (store.Job, error) {
		return e.st.Succeed(ctx, job.ID, job.Attempt, res, publish)
	})
	var pe publishError
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		run.removePart() // nothing was published: the fence refused before the rename
		return
	case errors.As(err, &pe):
		run.removePart()
		log.ErrorContext(ctx, "publish failed", "err", err)
		e.fail(ctx, log, x, store.AttemptError{Code: "io", Message: pe.Error()}, e.backoffFor(job.Kind, job.Attempt))
		return
	case err != nil:
		// Shutdown while the store refused the commit: the job stays PROCESSING and the
		// next start recovers it, or completes it from its file if the rename happened.
		run.removePart()
		return
	}
	faultPoint("after-commit")
	e.notify()
	log.InfoContext(ctx, "job succeeded", "rows", rows, "size", res.Size, "took", e.cfg.Now().Sub(began).Round(time.Millisecond))
}

// Bounds of the delay between tries to record an attempt's outcome.
const (
	recordRetryMin = 100 * time.Millisecond
	recordRetryMax = 5 * time.Second
)

// record runs fn, a fenced store write that ends an attempt, until it commits, the
// attempt turns out to have lost its lease (store.ErrLeaseLost, returned as is), or the
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
			return j, nil
		case errors.Is(err, store.ErrLeaseLost):
			// Expected after a pause, or when another node took the job: the fence did
			// its work, nothing is wrong here.
			log.InfoContext(ctx, "outcome not recorded: the attempt no longer owns the job", "outcome", what)
			return j, err
		case errors.As(err, &pe):
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
		return e.st.Requeue(ctx, x.job.ID, x.job.Attempt, reason)
	})
	if err != nil {
		return
	}
	log.InfoContext(ctx, "job requeued", "reason", reason)
	e.notify()
}

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

// heartbeat renews the lease every interval (renew). A lost lease, a cancel request or
// a stall cancels the execution's context with that cause.
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
// clock (all of them when staleAfter is zero). A job whose file is already published is
// completed from it (rule 5).
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
		name := fileName(e.handlers[j.Kind], j.ID)
		if size, sum, herr := HashFile(FilePath(e.cfg.ExportsDir, name)); herr == nil {
			_, err := e.st.CompleteFromFile(ctx, j.ID, j.Attempt, store.FileResult{
				Name: name, Size: size, SHA256: sum, Rows: j.ProgressRows})
			if err == nil {
				log.InfoContext(ctx, "orphan completed from its published file")
				e.notify()
			} else if !errors.Is(err, store.ErrLeaseLost) {
				return err
			}
			continue
		}
		last := "never"
		if !j.HeartbeatAt.IsZero() {
			last = j.HeartbeatAt.Format(time.RFC3339)
		}
		reason := fmt.Sprintf("heartbeat lost (worker %s, last heartbeat %s)", j.Worker, last)
		rec, err := e.st.Recover(ctx, j.ID, j.Attempt, reason, 0)
		if errors.Is(err, store.ErrLeaseLost) {
			continue
		}
		if err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(e.cfg.TmpDir, PartName(j.ID, j.Attempt)))
		log.WarnContext(ctx, "orphan recovered", "status", rec.Status, "reason", reason)
		e.notify()
	}
	if len(stale) > 0 {
		e.Wake()
	}
	return nil
}

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
