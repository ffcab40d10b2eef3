// Package jobs is the engine: a bounded worker pool that claims jobs from the store,
// heartbeats them, retries, recovers orphans, cancels and shuts down without losing work.
package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sheetq/store"
)

// Config tunes the engine. Zero fields take the documented defaults, except StallAfter,
// where zero turns the stall guard off.
type Config struct {
	// Workers is the size of the exports lane (store.DefaultQueue): how many of its jobs
	// run at once (default 2).
	Workers int
	// Queues are the other lanes: for each queue name, how many of its jobs run at once.
	// Every lane has slots of its own and claims only its own queue's jobs, so no lane
	// waits for another (ARCHITECTURE.md, rule 27). Enqueue refuses a job whose queue
	// has no lane. The exports lane is Workers: naming store.DefaultQueue here is an error.
	Queues map[string]int
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
	// Files is where attempts publish their files (OpenFiles); nil is ExportsDir
	// (LocalFiles), the single-node install.
	Files Files
	// WorkerID names this process in the worker column (default host/pid).
	WorkerID string
	// Shared says other processes run jobs from the same store (several nodes on
	// PostgreSQL). Then a PROCESSING job at start may be another node's live attempt,
	// so the start-up sweep takes back only attempts whose heartbeat is already stale,
	// as the reaper does later, instead of every one (ARCHITECTURE.md, rule 5).
	Shared bool
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
	// OnResumed, if set, is called when an attempt continues from an earlier attempt's
	// checkpoint with rows already written (Run.Resumed): the metrics count resumes and
	// the rows they saved.
	OnResumed func(kind string, rows int64)
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
	c.Files = filesOr(c.Files, c.ExportsDir)
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
	case c.Queues[store.DefaultQueue] != 0:
		return fmt.Errorf("queue %q is the exports lane: set its size with Workers", store.DefaultQueue)
	case c.Heartbeat <= 0 || c.ReapInterval <= 0 || c.PollInterval <= 0 || c.ShutdownGrace < 0 || c.AbandonAfter <= 0 ||
		c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase || c.StallAfter < 0:
		return errors.New("durations must be positive, and backoff max at least backoff base")
	case c.StaleAfter < 2*c.Heartbeat:
		// A heartbeat that comes late (a busy disk, a pause) must not make a running job
		// look stale: otherwise it is recovered, and run again, while it still runs. One
		// missed heartbeat is tolerated (rule 4).
		return fmt.Errorf("stale-after (%s) must be at least twice the heartbeat interval (%s)", c.StaleAfter, c.Heartbeat)
	}
	for name, n := range c.Queues {
		if name == "" || n < 1 {
			return fmt.Errorf("queue %q: a lane needs a name and at least 1 worker, not %d", name, n)
		}
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

	// lanes are the queues this engine claims from, the exports lane first, then by
	// name; laneOf finds one by queue name. Each has a dispatcher of its own.
	lanes  []*lane
	laneOf map[string]*lane
	// claimsBusy is set once a claim found the database locked by another connection
	// and said so, until a claim works again: one log line for every lane, not one per
	// poll and lane.
	claimsBusy atomic.Bool
	// claimCommits and claimed count claim transactions that took jobs, and the jobs.
	claimCommits, claimed atomic.Int64

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
	fin        finisher                // group-commits the ends of attempts (finish.go)
	started    bool
	stopOnce   sync.Once
}

// lane is one queue's share of the engine: its slots and its dispatcher's wake-up.
type lane struct {
	queue   string
	workers int
	wake    chan struct{} // capacity 1: a pending wake-up is enough
	slots   chan struct{} // capacity workers: the lane claims only with a slot
}

// execution is one attempt of a job run by this engine.
type execution struct {
	job    store.Job
	lane   *lane // whose slot the execution holds
	run    *Run
	cancel context.CancelCauseFunc // cancels the attempt's context with the reason it must stop
	// handler is handlerRunning until either the handler returns or the engine abandons
	// it; whichever comes first owns the outcome.
	handler atomic.Int32
	// stampedRows is the row count of the last heartbeat the store took.
	stampedRows atomic.Int64
	// beat asks the heartbeat to renew now (CheckCancel); capacity 1.
	beat chan struct{}
}

const (
	handlerRunning int32 = iota
	handlerReturned
	handlerAbandoned
)

// New returns an engine over st. Register handlers, then Start it.
func New(st Store, cfg Config) *Engine {
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:       cfg,
		st:        st,
		log:       cfg.Logger,
		handlers:  map[string]Handler{},
		laneOf:    map[string]*lane{},
		running:   map[*execution]struct{}{},
		stopClaim: make(chan struct{}),
	}
	e.fin.st = st
	if q, ok := st.(interface{ QueuesWrites() bool }); ok && q.QueuesWrites() {
		e.fin.direct = true // the store's queue groups ends with its other writes (rule 31)
	}
	names := slices.Sorted(maps.Keys(cfg.Queues))
	workers := map[string]int{store.DefaultQueue: cfg.Workers}
	for _, name := range names {
		if name != store.DefaultQueue { // Start refuses it
			workers[name] = cfg.Queues[name]
		}
	}
	for _, name := range append([]string{store.DefaultQueue}, names...) {
		if _, dup := e.laneOf[name]; dup {
			continue
		}
		n := workers[name]
		l := &lane{queue: name, workers: n, wake: make(chan struct{}, 1),
			slots: make(chan struct{}, max(n, 0))} // Start refuses a lane without workers
		e.lanes = append(e.lanes, l)
		e.laneOf[name] = l
	}
	return e
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
	sweep := time.Duration(0) // one process owns the store: every PROCESSING job is an orphan
	if e.cfg.Shared {
		sweep = e.cfg.StaleAfter
	}
	if err := e.reap(ctx, sweep); err != nil {
		return fmt.Errorf("start engine: recover orphans: %w", err)
	}
	e.runCtx, e.cancelRuns = context.WithCancelCause(context.WithoutCancel(ctx))
	e.started = true
	e.loops.Add(1 + len(e.lanes))
	for _, l := range e.lanes {
		go e.dispatch(l)
	}
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
			e.fin.wait()
			return
		case <-time.After(e.cfg.ShutdownGrace):
		}
		e.log.Info("shutdown grace over; stopping running jobs", "running", e.runningCount())
		e.cancelRuns(errShutdown)
		<-done
		e.fin.wait()
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

// Lane is one queue's lane as Lanes reports it.
type Lane struct {
	// Queue is the queue's name.
	Queue string
	// Workers is how many of its jobs may run at once.
	Workers int
	// Busy is how many of them run now (an abandoned handler no longer counts).
	Busy int
}

// Lanes reports every lane, the exports lane first, then by name.
func (e *Engine) Lanes() []Lane {
	e.mu.Lock()
	busy := map[*lane]int{}
	for x := range e.running {
		busy[x.lane]++
	}
	e.mu.Unlock()
	out := make([]Lane, len(e.lanes))
	for i, l := range e.lanes {
		out[i] = Lane{Queue: l.queue, Workers: l.workers, Busy: busy[l]}
	}
	return out
}

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

// ErrNoLane is returned by Enqueue for a job whose queue has no lane: nothing would
// ever claim it.
var ErrNoLane = errors.New("no lane runs this queue")

// Enqueue stores a new job (durably, before returning) and wakes its lane.
func (e *Engine) Enqueue(ctx context.Context, nj store.NewJob) (store.Job, bool, error) {
	if _, ok := e.handlers[nj.Kind]; !ok {
		return store.Job{}, false, fmt.Errorf("enqueue: unknown job kind %q", nj.Kind)
	}
	nj.Queue = cmp.Or(nj.Queue, store.DefaultQueue)
	l := e.laneOf[nj.Queue]
	if l == nil {
		return store.Job{}, false, fmt.Errorf("enqueue: queue %q: %w", nj.Queue, ErrNoLane)
	}
	if nj.ID == "" {
		nj.ID = NewID()
	}
	job, existed, err := e.st.Enqueue(ctx, nj)
	if err == nil && !existed {
		e.notify()
		l.wakeUp()
	}
	return job, existed, err
}

// Stored tells the engine that a job of queue was stored by a path other than Enqueue
// (a schedule's firing, store.FireSchedule): like Enqueue, it calls OnChange and wakes
// the queue's lane, so that the job starts now and its event reaches the streams.
func (e *Engine) Stored(queue string) {
	e.notify()
	e.WakeQueue(cmp.Or(queue, store.DefaultQueue))
}

// Wake makes every lane's dispatcher look for work now instead of at its next poll.
func (e *Engine) Wake() {
	for _, l := range e.lanes {
		l.wakeUp()
	}
}

// WakeQueue makes the dispatcher of queue's lane look for work now: another node made a
// job of queue PENDING (a store's notification; store/pg's Listener). "" wakes every
// lane, and a queue without a lane here is not this engine's. It never blocks.
func (e *Engine) WakeQueue(queue string) {
	if queue == "" {
		e.Wake()
		return
	}
	if l := e.laneOf[queue]; l != nil {
		l.wakeUp()
	}
}

// CheckCancel makes the running attempts of job id renew their heartbeat now instead of
// at the next tick: another node asked to cancel it (a store's notification), and the
// heartbeat's fenced answer says whether this attempt must stop (rule 4), so a stale or
// stray notification cancels nothing. "" checks every running attempt. It never blocks.
func (e *Engine) CheckCancel(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for x := range e.running {
		if id == "" || x.job.ID == id {
			select {
			case x.beat <- struct{}{}:
			default: // a check is pending already
			}
		}
	}
}

// wakeUp makes the lane's dispatcher look for work now.
func (l *lane) wakeUp() {
	select {
	case l.wake <- struct{}{}:
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
// between leaves an orphan file (sheetq doctor lists it; the janitor removes an orphan
// object from a bucket), never a row without its file;
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
	if job.FileName != "" {
		// The row is gone: a client that hangs up now must not leave its file behind.
		if _, err := e.cfg.Files.Delete(context.WithoutCancel(ctx), job.FileName); err != nil {
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
