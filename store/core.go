// Package store is the job store's core: the job table's types, states and errors, the
// event cursor, and Store, which holds the rules that do not depend on SQL once, above
// the drivers that speak each database's SQL (Driver; store/sqlite and store/pg).
//
// Store checks and completes what it is given (required fields, defaults, ranges, the
// follow-up hook's jobs, limits) before a driver sees it, groups concurrent Enqueues into
// one commit (batch.go), derives the single-attempt ends from FinishBatch, and wraps
// every driver error with its kind (Fault), so that nothing above it names a driver.
//
// One commit for every write that is due (ARCHITECTURE.md, rule 31): a driver that
// queues its own writes (WriteQueue; store/sqlite) puts enqueues, claims, heartbeats,
// checkpoints and ends in one queue, so that each commit, one fsync, carries every one
// of them that is waiting, whatever its kind, each in a savepoint of its own and answered
// only after that commit. The core then hands it each Enqueue as it comes instead of
// grouping them itself, and the engine each end (QueuesWrites). On PostgreSQL the server
// already shares one log flush among the commits of concurrent connections, and
// Enqueue's group commit (batch.go) and the engine's for ends stay as they were; MySQL's
// driver does not queue its writes yet.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// mutant names one rule of the core to break, and is set only by the mutation tests
// (export_test.go, mutants_test.go), to show that the conformance suite catches a core
// that stops keeping it; "" outside them.
var mutant string

// Config tunes New. The zero value is the production setting.
type Config struct {
	// FollowUps, if set, gives the jobs to create when a job becomes SUCCEEDED, FAILED or
	// CANCELED, in the same transaction (followups.go, rule 19): a job kind's hook, such
	// as the webhook deliveries of jobs/webhook.
	FollowUps FollowUpFunc
	// Unbatched commits every Enqueue alone instead of grouping concurrent ones
	// (batch.go); benchmarks compare the two.
	Unbatched bool
	// MaxBatch bounds how many Enqueues one group commit holds (default 128).
	MaxBatch int
}

// Store is the job store: the core's rules over one Driver. Every method is safe for
// concurrent use.
type Store struct {
	d         Driver
	checker   JobChecker // d, when it checks jobs before they are batched; else nil
	followUps FollowUpFunc
	unbatched bool
	// queued is a driver that queues its own writes (WriteQueue): each Enqueue goes to
	// it as it comes, and the batcher stays idle.
	queued WriteQueue
	batch  batcher
}

// New makes the Store of d, which is open and migrated, and gives d the checked
// follow-up hook. Close closes d.
func New(d Driver, cfg Config) *Store {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 128
	}
	s := &Store{d: d, followUps: cfg.FollowUps, unbatched: cfg.Unbatched}
	s.checker, _ = d.(JobChecker)
	if wq, ok := d.(WriteQueue); ok && wq.QueuesWrites() {
		s.queued = wq
	}
	d.SetFollowUps(s.checkedFollowUps)
	s.batch.start(s, cfg.MaxBatch)
	return s
}

// Driver returns the driver, for the composition root to ask what else it can do
// (the capability interfaces in driver.go).
func (s *Store) Driver() Driver { return s.d }

// Close stops the group commit (it answers the Enqueues it has taken, and none starts
// after this), then closes the driver.
func (s *Store) Close() error {
	s.batch.q.Close()
	return s.d.Close()
}

// QueuesWrites says whether the driver queues its enqueues, claims, heartbeats,
// checkpoints and ends into shared commits (WriteQueue, rule 31), so that the engine
// hands it each end as it comes rather than grouping them first.
func (s *Store) QueuesWrites() bool { return s.queued != nil }

// Now reads the store's clock: the driver's.
func (s *Store) Now() time.Time { return s.d.Now() }

// fault wraps a driver's error with its kind (Driver.Fault), once.
func (s *Store) fault(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range faultKinds {
		if errors.Is(err, k) {
			return err
		}
	}
	if k := s.d.Fault(err); k != nil {
		return &faultError{kind: k, err: err}
	}
	return err
}

// faultError is a driver error with its kind: errors.Is finds both.
type faultError struct{ kind, err error }

func (e *faultError) Error() string   { return e.err.Error() }
func (e *faultError) Unwrap() []error { return []error{e.kind, e.err} }

// checkNewJob refuses what no driver may be given: a job without an id, a kind or
// arguments, and numbers that every database's integer columns cannot hold.
func checkNewJob(nj NewJob) error {
	if mutant == "no-job-checks" {
		return nil
	}
	if nj.ID == "" || nj.Kind == "" || len(nj.Args) == 0 {
		return errors.New("enqueue: id, kind and args are required")
	}
	if nj.Priority < math.MinInt32 || nj.Priority > math.MaxInt32 || nj.MaxAttempts > math.MaxInt32 {
		return fmt.Errorf("enqueue: priority %d or max attempts %d out of range", nj.Priority, nj.MaxAttempts)
	}
	return nil
}

// withDefaults fills what nj leaves to the store: the attempt budget and the queue.
// RunAt stays zero for the driver to read its own clock (rule 18).
func withDefaults(nj NewJob) NewJob {
	if mutant == "no-job-defaults" {
		return nj
	}
	if nj.MaxAttempts <= 0 {
		nj.MaxAttempts = DefaultMaxAttempts
	}
	if nj.Queue == "" {
		nj.Queue = DefaultQueue
	}
	return nj
}

// Enqueue inserts a PENDING job and its "accepted" event and returns it once committed.
// With an idempotency key that already has a job, it returns that job and existed=true,
// or ErrIdempotencyMismatch (with the existing job) when the request hash differs.
// Concurrent calls share one commit (batch.go); each call still returns only after the
// commit that holds its row.
func (s *Store) Enqueue(ctx context.Context, nj NewJob) (job Job, existed bool, err error) {
	if err := checkNewJob(nj); err != nil {
		return Job{}, false, err
	}
	if nj.Audit != nil {
		e := *nj.Audit
		e.Seq, e.At, e.Job = 0, time.Time{}, nj.ID
		if err := checkAudit(e); err != nil {
			return Job{}, false, err
		}
		nj.Audit = &e
	}
	nj = withDefaults(nj)
	if s.checker != nil {
		if err := s.checker.CheckJob(nj); err != nil {
			return Job{}, false, err
		}
	}
	if s.unbatched || s.queued != nil {
		// The driver commits it alone, or queues it beside its other writes (WriteQueue).
		var rs []Enqueued
		if rs, err = s.d.EnqueueBatch(ctx, []NewJob{nj}); err == nil {
			job, existed, err = rs[0].Job, rs[0].Existed, rs[0].Err
		}
	} else {
		job, existed, err = s.batch.enqueue(ctx, nj)
	}
	if errors.Is(err, ErrIdempotencyMismatch) {
		return job, true, err
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("enqueue: %w", s.fault(err))
	}
	return job, existed, nil
}

// ClaimBatch takes up to limit runnable jobs of queue for worker (rules 2, 3): a queue
// and a limit of at least one are required.
func (s *Store) ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]Job, error) {
	if err := checkClaim(queue, limit); err != nil {
		return nil, err
	}
	js, err := s.d.ClaimBatch(ctx, worker, queue, limit)
	return js, s.fault(err)
}

// checkClaim refuses a claim without a queue or of fewer than one job.
func checkClaim(queue string, limit int) error {
	switch {
	case mutant == "no-claim-checks":
		return nil
	case queue == "":
		return errors.New("claim: a queue is required")
	case limit < 1:
		return fmt.Errorf("claim: limit %d, want at least 1", limit)
	}
	return nil
}

// Claim takes the next runnable job of queue for worker, or ErrNotFound.
func (s *Store) Claim(ctx context.Context, worker, queue string) (Job, error) {
	js, err := s.ClaimBatch(ctx, worker, queue, 1)
	if err != nil {
		return Job{}, err
	}
	if len(js) == 0 {
		return Job{}, ErrNotFound
	}
	return js[0], nil
}

// ClaimBatchNext is ClaimBatch that also answers how long until queue's next PENDING
// job is due (pending false: none is left), in the claim's round trip when the driver
// can (ClaimNexter), else by asking NextRunIn when the claim left slots free.
func (s *Store) ClaimBatchNext(ctx context.Context, worker, queue string, limit int) (claimed []Job, next time.Duration, pending bool, err error) {
	if err := checkClaim(queue, limit); err != nil {
		return nil, 0, false, err
	}
	if cn, ok := s.d.(ClaimNexter); ok {
		claimed, next, pending, err = cn.ClaimBatchNext(ctx, worker, queue, limit)
		return claimed, next, pending, s.fault(err)
	}
	if claimed, err = s.ClaimBatch(ctx, worker, queue, limit); err != nil || len(claimed) == limit {
		return claimed, 0, len(claimed) == limit, err
	}
	// A failed read leaves pending false: the dispatcher then waits its poll interval.
	if next, err = s.d.NextRunIn(ctx, queue); err == nil {
		return claimed, next, true, nil
	}
	return claimed, 0, false, nil
}

// FinishBatch ends running attempts, each fenced by its id and attempt (rule 3), in
// order; each answer is the job as committed or the error that kept it from ending.
func (s *Store) FinishBatch(ctx context.Context, fs []Finish) []Finished {
	out := s.d.FinishBatch(ctx, fs)
	for i := range out {
		out[i].Err = s.fault(out[i].Err)
	}
	return out
}

// finishOne is FinishBatch of one Finish.
func (s *Store) finishOne(ctx context.Context, f Finish) (Job, error) {
	r := s.FinishBatch(ctx, []Finish{f})[0]
	return r.Job, r.Err
}

// Succeed ends a running attempt SUCCEEDED with its file. publish (the rename of the
// part file into place, or nil) runs inside the write transaction after the fence has
// matched, so a lost lease never publishes, and nothing can recover or re-claim the job
// between the check and the rename; if publish fails nothing is committed. A crash after
// publish and before the commit leaves a PROCESSING row with its file in place, which
// recovery completes from the file (rule 5).
func (s *Store) Succeed(ctx context.Context, id string, attempt int, res FileResult, publish func() error) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Succeeded, Result: res, Publish: publish})
}

// Fail records a failed attempt. A permanent error, or an attempt that used the last of
// its budget, makes the job FAILED; otherwise it goes back to PENDING to run retryIn
// from now by the store's clock (a duration, never a time of the caller's clock, so that
// a driver may keep time by its database). A job whose cancel was requested while it ran
// becomes CANCELED instead of running again.
func (s *Store) Fail(ctx context.Context, id string, attempt int, e AttemptError, retryIn time.Duration) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Failed, Error: e, RetryIn: retryIn})
}

// Requeue puts a running attempt back to PENDING without spending it, for shutdown
// (rule 9): the next claim reuses the attempt number, which is safe because the
// execution that held it has stopped. A job whose cancel was requested becomes CANCELED
// instead (its attempt stays spent).
func (s *Store) Requeue(ctx context.Context, id string, attempt int, reason string) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Requeued, Reason: reason})
}

// FinishCanceled ends a running attempt whose cancel was requested CANCELED.
func (s *Store) FinishCanceled(ctx context.Context, id string, attempt int) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Canceled})
}

// Retry puts a FAILED or CANCELED job back to PENDING with a fresh budget of attempts
// (zero or less: DefaultMaxAttempts); the attempt counter, the fencing token, goes on
// (rule 4). It returns ErrNotFound, or ErrNotRetryable with the job as it is.
func (s *Store) Retry(ctx context.Context, id string, budget int) (Job, error) {
	if budget <= 0 && mutant != "no-retry-budget" {
		budget = DefaultMaxAttempts
	}
	j, err := s.d.Retry(ctx, id, budget)
	return j, s.fault(err)
}

// List returns jobs newest first, in insertion order; the limit is 50 by default and
// at most 1000.
func (s *Store) List(ctx context.Context, o ListOptions) ([]Job, error) {
	if o.Limit <= 0 && mutant != "no-read-limits" {
		o.Limit = 50
	}
	o.Limit = min(o.Limit, 1000)
	js, err := s.d.List(ctx, o)
	return js, s.fault(err)
}

// eventLimit is the page size of the event reads: 1000 by default, at most 10,000.
func eventLimit(limit int) int {
	if limit <= 0 && mutant != "no-read-limits" {
		return 1000
	}
	return min(limit, 10_000)
}

// EventsAfter returns up to limit events with an id greater than afterID, in id order.
func (s *Store) EventsAfter(ctx context.Context, afterID int64, limit int) ([]Event, error) {
	evs, err := s.d.EventsAfter(ctx, afterID, eventLimit(limit))
	return evs, s.fault(err)
}

// EventsSince returns up to limit events after cursor, in order, each with its own
// cursor, and the cursor after the last one. "" is the start; a cursor this store did
// not hand out is ErrBadCursor.
func (s *Store) EventsSince(ctx context.Context, cursor string, limit int) ([]CursorEvent, string, error) {
	evs, next, err := s.d.EventsSince(ctx, cursor, eventLimit(limit))
	return evs, next, s.fault(err)
}

// JobEventsSince is EventsSince for the events of one job.
func (s *Store) JobEventsSince(ctx context.Context, jobID, cursor string, limit int) ([]CursorEvent, string, error) {
	evs, next, err := s.d.JobEventsSince(ctx, jobID, cursor, eventLimit(limit))
	return evs, next, s.fault(err)
}

// TransitionsSince returns up to limit state changes after cursor (500 by default, at
// most 10,000), for the metrics.
func (s *Store) TransitionsSince(ctx context.Context, cursor string, limit int) ([]Transition, string, error) {
	if limit <= 0 {
		limit = 500
	}
	ts, next, err := s.d.TransitionsSince(ctx, cursor, min(limit, 10_000))
	return ts, next, s.fault(err)
}

// CreateSchedule stores a new schedule, checked (CheckSchedule); ErrConflict for an id
// in use.
func (s *Store) CreateSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	if err := checkSchedule(sc); err != nil {
		return Schedule{}, err
	}
	sc, err := s.d.CreateSchedule(ctx, sc)
	return sc, s.fault(err)
}

// UpdateSchedule replaces a schedule, checked; ErrNotFound when it is gone.
func (s *Store) UpdateSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	if err := checkSchedule(sc); err != nil {
		return Schedule{}, err
	}
	sc, err := s.d.UpdateSchedule(ctx, sc)
	return sc, s.fault(err)
}

// EditSchedule reads schedule id, applies edit and writes the result in one
// transaction (compare-and-set): a concurrent change is never lost. The edited
// schedule is checked like an update.
func (s *Store) EditSchedule(ctx context.Context, id string, edit func(Schedule) (Schedule, error)) (Schedule, error) {
	sc, err := s.d.EditSchedule(ctx, id, func(sc Schedule) (Schedule, error) {
		n, err := edit(sc)
		if err != nil {
			return n, err
		}
		return n, checkSchedule(n)
	})
	return sc, s.fault(err)
}

// FireSchedule enqueues a due schedule's export and moves the schedule to its next
// firing in one transaction, once per (schedule, time) on every node (rule 29).
func (s *Store) FireSchedule(ctx context.Context, f Firing) (Job, bool, error) {
	if err := checkNewJob(f.Job); err != nil {
		return Job{}, false, err
	}
	f.Job = withDefaults(f.Job)
	j, fired, err := s.d.FireSchedule(ctx, f)
	return j, fired, s.fault(err)
}

// ScheduleFirings lists a schedule's exports, newest first (FiringsLimit).
func (s *Store) ScheduleFirings(ctx context.Context, id string, limit int) ([]Job, error) {
	js, err := s.d.ScheduleFirings(ctx, id, FiringsLimit(limit))
	return js, s.fault(err)
}

// checkSchedule is CheckSchedule, which the mutation tests can switch off.
func checkSchedule(sc Schedule) error {
	if mutant == "no-schedule-checks" {
		return nil
	}
	return CheckSchedule(sc)
}

// checkedFollowUps is the hook drivers call inside the transaction that makes job
// final (Driver.SetFollowUps): the kind's hook (Config.FollowUps), asked only for the
// ends a follow-up hears of, its jobs checked like an Enqueue's and completed with the
// defaults, so that a driver inserts them as they are.
func (s *Store) checkedFollowUps(job Job) ([]FollowUp, error) {
	if s.followUps == nil {
		return nil, nil
	}
	switch {
	case mutant == "follow-ups-of-any-state":
	case job.Status == StatusSucceeded, job.Status == StatusFailed, job.Status == StatusCanceled:
	default:
		return nil, nil
	}
	fus, err := s.followUps(job)
	if mutant == "no-follow-up-checks" {
		return fus, err
	}
	if err != nil {
		return nil, fmt.Errorf("follow-ups of %s: %w", job.ID, err)
	}
	for i := range fus {
		f := &fus[i]
		if f.ID == "" || f.Kind == "" || len(f.Args) == 0 {
			return nil, fmt.Errorf("follow-up of %s: id, kind and args are required", job.ID)
		}
		if f.Priority < math.MinInt32 || f.Priority > math.MaxInt32 || f.MaxAttempts > math.MaxInt32 {
			return nil, fmt.Errorf("follow-up of %s: priority %d or max attempts %d out of range", job.ID, f.Priority, f.MaxAttempts)
		}
		if f.MaxAttempts <= 0 {
			f.MaxAttempts = DefaultMaxAttempts
		}
		if f.Queue == "" {
			f.Queue = DefaultQueue
		}
		f.RunIn = max(f.RunIn, 0)
	}
	return fus, nil
}
