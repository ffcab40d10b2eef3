// Package jobs is the engine: a bounded worker pool that claims jobs from the store,
// heartbeats them, retries, recovers orphans, cancels and shuts down without losing work.
package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
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
	// PollInterval is the fallback claim poll when no wake-up arrives (default 1 s).
	PollInterval time.Duration
	// BackoffBase and BackoffMax shape the retry delay: base*2^(attempt-1), capped, with jitter
	// (defaults 2 s and 10 min).
	BackoffBase, BackoffMax time.Duration
	// TmpDir holds part files and ExportsDir published files; both are created if missing.
	TmpDir, ExportsDir string
	// WorkerID names this process in the worker column (default host/pid).
	WorkerID string
	// Now is the clock for staleness, stalls and backoff (default time.Now).
	Now func() time.Time
	// Logger receives the engine's logs (default slog.Default()).
	Logger *slog.Logger
	// OnChange, if set, is called after every state change the engine commits.
	OnChange func(store.Job)
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
}

func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, 2)
	c.Heartbeat = cmp.Or(c.Heartbeat, 5*time.Second)
	c.StaleAfter = cmp.Or(c.StaleAfter, 30*time.Second)
	c.ReapInterval = cmp.Or(c.ReapInterval, max(c.StaleAfter/3, 10*time.Millisecond))
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, 30*time.Second)
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
	return c
}

// validate rejects settings the engine cannot keep its rules with.
func (c Config) validate() error {
	switch {
	case c.TmpDir == "" || c.ExportsDir == "":
		return errors.New("TmpDir and ExportsDir are required")
	case c.Nice < 0 || c.Nice > 19:
		return fmt.Errorf("Nice must be from 0 to 19, not %d", c.Nice)
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1, not %d", c.Workers)
	case c.Heartbeat <= 0 || c.ReapInterval <= 0 || c.PollInterval <= 0 || c.ShutdownGrace < 0 ||
		c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase || c.StallAfter < 0:
		return errors.New("durations must be positive, and backoff max at least backoff base")
	case c.StaleAfter <= c.Heartbeat:
		// Otherwise every running job looks stale between two heartbeats and is recovered
		// (and run again) while it is still running.
		return fmt.Errorf("stale_after (%s) must be longer than the heartbeat interval (%s)", c.StaleAfter, c.Heartbeat)
	}
	return nil
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
	st       *store.Store
	log      *slog.Logger
	handlers map[string]Handler

	wake  chan struct{} // capacity 1: a pending wake-up is enough
	slots chan struct{} // capacity Workers: a worker claims only with a slot

	mu      sync.Mutex
	running map[string]*execution

	stopClaim  chan struct{} // closed by Stop: no more claims
	runCtx     context.Context
	cancelRuns context.CancelCauseFunc // after the grace period: stop running jobs
	loops      sync.WaitGroup          // dispatcher and reaper
	execs      sync.WaitGroup          // running executions
	started    bool
	stopOnce   sync.Once
}

type execution struct {
	job    store.Job
	run    *Run
	cancel context.CancelCauseFunc
}

// New returns an engine over st. Register handlers, then Start it.
func New(st *store.Store, cfg Config) *Engine {
	cfg = cfg.withDefaults()
	return &Engine{
		cfg:       cfg,
		st:        st,
		log:       cfg.Logger,
		handlers:  map[string]Handler{},
		wake:      make(chan struct{}, 1),
		slots:     make(chan struct{}, max(cfg.Workers, 0)), // Start refuses Workers < 1
		running:   map[string]*execution{},
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
	parts, _ := filepath.Glob(filepath.Join(e.cfg.TmpDir, "*.part"))
	for _, p := range parts {
		if err := os.Remove(p); err != nil {
			e.log.WarnContext(ctx, "remove stale part file", "path", p, "err", err)
		}
	}
	if err := e.reap(ctx, time.Time{}); err != nil {
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
// them and puts them back to PENDING without spending an attempt (rule 9).
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
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// A handler that ignores its context cannot hold the process: requeue its job
			// directly. If it ever returns, its fenced updates find nothing to change.
			e.mu.Lock()
			left := make([]*execution, 0, len(e.running))
			for _, x := range e.running {
				left = append(left, x)
			}
			e.mu.Unlock()
			for _, x := range left {
				e.requeue(x, "handler did not stop after shutdown")
			}
		}
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

// Running reports how many jobs this engine is executing now.
func (e *Engine) Running() int { return e.runningCount() }

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
		e.notify(job)
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
		e.mu.Lock()
		x := e.running[id]
		e.mu.Unlock()
		if x != nil && x.job.Attempt == job.Attempt {
			x.cancel(errCanceled)
		}
	}
	e.notify(job)
	// A cancelled PENDING job may have queued a follow-up (its webhook delivery).
	e.Wake()
	return job, nil
}

func (e *Engine) notify(job store.Job) {
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(job)
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
		awaitForeground() // see Foreground: let the request being accepted commit first
		job, err := e.st.Claim(ctx, e.cfg.WorkerID)
		if err == nil {
			busy = false
			faultPoint("after-claim")
			e.start(job)
			continue
		}
		<-e.slots
		wait := e.cfg.PollInterval
		switch {
		case errors.Is(err, store.ErrNotFound):
			busy = false
			if next, err := e.st.NextRunAt(ctx); err == nil {
				wait = min(wait, max(next.Sub(e.cfg.Now()), time.Millisecond))
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

func (e *Engine) start(job store.Job) {
	ctx, cancel := context.WithCancelCause(e.runCtx)
	x := &execution{
		job:    job,
		run:    newRun(e.cfg.TmpDir, job.ID, job.Kind, job.Args, job.Attempt, job.MaxAttempts),
		cancel: cancel,
	}
	x.run.onProgress = e.cfg.OnProgress
	e.mu.Lock()
	e.running[job.ID] = x
	e.mu.Unlock()
	e.notify(job)
	e.execs.Add(1)
	go func() {
		defer e.execs.Done()
		defer func() {
			e.mu.Lock()
			if e.running[job.ID] == x {
				delete(e.running, job.ID)
			}
			e.mu.Unlock()
			<-e.slots
			e.Wake()
		}()
		e.execute(ctx, x)
	}()
}

// execute runs one attempt and records its outcome.
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

	var err error
	if h, ok := e.handlers[job.Kind]; ok {
		err = e.runHandler(ctx, log, h, run)
	} else {
		err = Permanentf("unknown_kind", "no handler for job kind %q", job.Kind)
	}
	close(hbDone)
	<-hbStopped

	// Store writes below must outlive a cancelled run context.
	wctx := context.WithoutCancel(ctx)
	cause := context.Cause(ctx)
	if cause == nil {
		cause = ctx.Err()
	}
	partErr := run.closePart()
	switch {
	case errors.Is(cause, errLeaseLost):
		run.removePart()
		log.WarnContext(wctx, "lease lost; attempt abandoned without publishing")
	case errors.Is(cause, errCanceled):
		// Checked before success: a cancelled attempt publishes nothing (rule 7), even
		// if its handler ignored the cancel and returned nil.
		run.removePart()
		e.finish(wctx, log, x, func() (store.Job, error) { return e.st.FinishCanceled(wctx, job.ID, job.Attempt) })
		log.InfoContext(wctx, "job canceled")
	case err == nil && partErr == nil:
		e.succeed(wctx, log, x, began)
	case errors.Is(cause, errShutdown):
		e.requeue(x, "shutdown")
	default:
		run.removePart()
		code, msg, permanent := "", "", false
		switch {
		case errors.Is(cause, errStalled):
			code, msg = "stalled", fmt.Sprintf("no progress for %s", e.cfg.StallAfter)
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
		retryAt := e.cfg.Now().Add(delay)
		j, ferr := e.st.Fail(wctx, job.ID, job.Attempt, store.AttemptError{Code: code, Message: msg, Permanent: permanent}, retryAt)
		if ferr != nil {
			log.ErrorContext(wctx, "record failure", "err", ferr)
			return
		}
		e.notify(j)
		log.WarnContext(wctx, "job attempt failed", "code", code, "error", msg, "permanent", permanent, "status", j.Status)
		if j.Status == store.StatusPending {
			e.Wake()
		}
	}
}

func (e *Engine) succeed(ctx context.Context, log *slog.Logger, x *execution, began time.Time) {
	job, run := x.job, x.run
	rows, _ := run.progress()
	res := store.FileResult{Rows: rows, Warnings: run.Warnings()}
	var publish func() error
	if run.hash != nil {
		res.Name, res.Size, res.SHA256 = job.ID+".xlsx", run.hash.size, run.hash.sum()
		final := FilePath(e.cfg.ExportsDir, job.ID)
		publish = func() error {
			faultPoint("after-fsync")
			if err := os.Rename(run.partPath, final); err != nil {
				return err
			}
			if err := durable.SyncDir(e.cfg.ExportsDir); err != nil {
				return err
			}
			faultPoint("after-rename")
			return nil
		}
	}
	awaitForeground()
	j, err := e.st.Succeed(ctx, job.ID, job.Attempt, res, publish)
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		run.removePart()
		log.WarnContext(ctx, "lease lost before publishing; file discarded")
		return
	case err != nil:
		run.removePart()
		log.ErrorContext(ctx, "publish failed", "err", err)
		retryAt := e.cfg.Now().Add(e.backoffFor(job.Kind, job.Attempt))
		if j, ferr := e.st.Fail(ctx, job.ID, job.Attempt, store.AttemptError{Code: "io", Message: err.Error()}, retryAt); ferr == nil {
			e.notify(j)
		}
		return
	}
	faultPoint("after-commit")
	e.notify(j)
	log.InfoContext(ctx, "job succeeded", "rows", rows, "size", res.Size, "took", e.cfg.Now().Sub(began).Round(time.Millisecond))
}

func (e *Engine) finish(ctx context.Context, log *slog.Logger, x *execution, fn func() (store.Job, error)) {
	j, err := fn()
	if err != nil {
		log.ErrorContext(ctx, "record outcome", "err", err)
		return
	}
	e.notify(j)
}

func (e *Engine) requeue(x *execution, reason string) {
	x.run.removePart()
	j, err := e.st.Requeue(context.Background(), x.job.ID, x.job.Attempt, reason)
	if err != nil {
		if !errors.Is(err, store.ErrLeaseLost) {
			e.log.Error("requeue", "job_id", x.job.ID, "err", err)
		}
		return
	}
	e.log.Info("job requeued", "job_id", x.job.ID, "reason", reason)
	e.notify(j)
}

// heartbeat stamps the job every interval, fenced on (id, attempt). A lost lease, a
// cancel request or a stall cancels the execution's context with that cause.
func (e *Engine) heartbeat(ctx context.Context, x *execution, done <-chan struct{}) {
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	lastMoves, lastMoveAt := x.run.progressed.Load(), e.cfg.Now()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rows, total := x.run.progress()
		cancelReq, err := e.st.Heartbeat(ctx, x.job.ID, x.job.Attempt, rows, total)
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			x.cancel(errLeaseLost)
			return
		case err != nil:
			// A failed stamp is not a lost lease; the reaper decides staleness.
			e.log.WarnContext(ctx, "heartbeat failed", "job_id", x.job.ID, "err", err)
		case cancelReq:
			x.cancel(errCanceled)
			return
		}
		now := e.cfg.Now()
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
		if err := e.reap(e.runCtx, e.cfg.Now().Add(-e.cfg.StaleAfter)); err != nil {
			e.log.Error("reap", "err", err)
		}
	}
}

// reap recovers PROCESSING jobs whose heartbeat is older than before (all of them when
// before is zero). A job whose file is already published is completed from it (rule 5).
func (e *Engine) reap(ctx context.Context, before time.Time) error {
	stale, err := e.st.Running(ctx, before)
	if err != nil {
		return err
	}
	for _, j := range stale {
		log := e.log.With("job_id", j.ID, "attempt", j.Attempt)
		// If this process still runs the attempt, stop it now rather than at its next
		// heartbeat; its fenced writes would fail anyway.
		e.mu.Lock()
		if x := e.running[j.ID]; x != nil && x.job.Attempt == j.Attempt {
			x.cancel(errLeaseLost)
		}
		e.mu.Unlock()
		final := FilePath(e.cfg.ExportsDir, j.ID)
		if size, sum, herr := hashFile(final); herr == nil {
			done, err := e.st.CompleteFromFile(ctx, j.ID, j.Attempt, store.FileResult{
				Name: j.ID + ".xlsx", Size: size, SHA256: sum, Rows: j.ProgressRows})
			if err == nil {
				log.InfoContext(ctx, "orphan completed from its published file")
				e.notify(done)
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
		rec, err := e.st.Recover(ctx, j.ID, j.Attempt, reason, e.cfg.Now())
		if errors.Is(err, store.ErrLeaseLost) {
			continue
		}
		if err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(e.cfg.TmpDir, PartName(j.ID, j.Attempt)))
		log.WarnContext(ctx, "orphan recovered", "status", rec.Status, "reason", reason)
		e.notify(rec)
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

// runHandler runs h for one attempt: on a thread of lowered priority when Config.Nice
// is set, else on the calling goroutine.
func (e *Engine) runHandler(ctx context.Context, log *slog.Logger, h Handler, run *Run) error {
	if e.cfg.Nice == 0 || !LowerPrioritySupported {
		return safeRun(ctx, log, h, run)
	}
	handlersLowered.Store(true)
	done := make(chan error, 1)
	go func() {
		if err := lowerPriority(e.cfg.Nice); err != nil {
			log.DebugContext(ctx, "job runs at normal priority", "err", err)
		}
		done <- safeRun(ctx, log, h, run)
	}()
	return <-done
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
