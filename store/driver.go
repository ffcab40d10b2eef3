package store

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"
)

// Driver is one database's SQL for the job table, at the level of operations: each
// method is one transaction (or one read) that a driver writes in its own dialect,
// with its errors mapped to the core's (Fault). The rules that do not depend on SQL
// are the core's and run before a driver is asked (Store): required fields and
// defaults, the ranges every database can hold, the follow-up hook's checks, limits,
// and the group commit of Enqueue. store/sqlite and store/pg are the drivers;
// ARCHITECTURE.md, "Job store drivers", lists the files a new one writes.
//
// Every time a driver stamps or compares is its own clock's (Now): SQLite's is the
// process's, a shared database's is the database server's, so that nodes whose clocks
// differ agree on what is stale (rule 18).
type Driver interface {
	// Now reads the driver's clock, the one its rows are stamped with.
	Now() time.Time
	// Ping checks that the database answers a read (liveness).
	Ping(ctx context.Context) error
	// ProbeWrite writes and removes nothing of value, to tell readiness whether writes
	// work (a full disk, a read-only database, a primary that went away).
	ProbeWrite(ctx context.Context) error
	// Fault maps a driver error to the core's kind of it: ErrBusy, ErrUnavailable,
	// ErrDiskFull, ErrReadOnly, ErrCorrupt or ErrIO, or nil for any other error. The
	// core wraps every error a driver returns with its kind, so that callers (the API's
	// problem answers, the engine's busy back-off) tell faults apart without knowing
	// the driver.
	Fault(err error) error
	// SetFollowUps gives the driver the hook it calls inside the transaction that makes
	// a job final, once, before any other call (New does it). The hook is the core's:
	// it has already checked the kind's follow-ups and filled their defaults, and
	// returns none for a state that has none.
	SetFollowUps(fn FollowUpFunc)
	// Close releases the database; nothing is called after it.
	Close() error

	// EnqueueBatch inserts njs, already checked and with their defaults filled (Queue,
	// MaxAttempts; RunAt zero means the driver's now), each PENDING with its "accepted"
	// event, in as few transactions as it can, and answers each in order: its job, or the
	// job its idempotency key already has (existed; ErrIdempotencyMismatch when the
	// request hash differs, rule 11), or ErrConflict for an id in use, or the error that
	// refused it alone. A job is answered only once the transaction holding it has
	// committed. An error from the whole call commits nothing, and fails every call.
	EnqueueBatch(ctx context.Context, njs []NewJob) ([]Enqueued, error)
	// ClaimBatch takes up to limit runnable PENDING jobs of queue, best priority then
	// oldest first, each PROCESSING with attempt+1 for worker (rules 2, 3).
	ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]Job, error)
	// NextRunIn is how long until the earliest run_at of queue's PENDING jobs by the
	// driver's clock, or ErrNotFound when there is none.
	NextRunIn(ctx context.Context, queue string) (time.Duration, error)
	// Heartbeat stamps a running attempt's heartbeat and progress, fenced (rule 3).
	Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error)
	// SaveCheckpoint is Heartbeat that also replaces the job's checkpoint with data, in
	// the same fenced write (rule 30).
	SaveCheckpoint(ctx context.Context, id string, attempt int, rows, total int64, data []byte) (cancelRequested bool, err error)
	// Checkpoint reads the job's checkpoint: nil when it has none, ErrNotFound when there
	// is no such job.
	Checkpoint(ctx context.Context, id string) ([]byte, error)
	// FinishBatch ends running attempts, fenced, each in order with its event and
	// follow-ups in the same transaction as its end (rules 3, 10, 19).
	FinishBatch(ctx context.Context, fs []Finish) []Finished
	// CompleteFromFile ends an orphaned attempt SUCCEEDED from its published file (rule 5).
	CompleteFromFile(ctx context.Context, id string, attempt int, res FileResult) (Job, error)
	// Recover takes back an attempt whose heartbeat was lost (rule 6).
	Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (Job, error)
	// Stale lists PROCESSING jobs whose heartbeat is older than staleAfter (all of them
	// when staleAfter <= 0), oldest heartbeat first.
	Stale(ctx context.Context, staleAfter time.Duration) ([]Job, error)

	// Cancel, Retry (budget > 0), Expire and Delete are the control actions (rules 7-9, 21).
	Cancel(ctx context.Context, id string) (Job, error)
	Retry(ctx context.Context, id string, budget int) (Job, error)
	Expire(ctx context.Context, id string) (Job, error)
	Delete(ctx context.Context, id string) (Job, error)
	// AppendEvent notes an event on a job's timeline, skipping a job that is gone.
	AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error

	// Reads. Limits arrive normalised (List's 1-1000, the event reads' 1-1000).
	Get(ctx context.Context, id string) (Job, error)
	List(ctx context.Context, o ListOptions) ([]Job, error)
	Counts(ctx context.Context) (map[Status]int, error)
	JobsByID(ctx context.Context, ids []string) (map[string]Job, error)
	Unfinished(ctx context.Context) ([]Job, error)
	FinishedOlderThan(ctx context.Context, statuses []Status, age time.Duration, limit int) ([]Job, error)
	PendingHead(ctx context.Context, queue, kind string, limit int) ([]Job, error)
	PendingByQueue(ctx context.Context) (map[string]int, error)
	QueueStats(ctx context.Context, now, lateBefore time.Time, kinds ...string) (map[string]KindStats, error)
	StalledJobs(ctx context.Context, kind string, lateBefore, quietBefore time.Time, limit int) ([]StalledJob, int, error)
	Throughput(ctx context.Context, kind string, now time.Time, width time.Duration, n int) ([]ThroughputBucket, error)
	Durations(ctx context.Context, kind string, since time.Time) (DurationStats, error)

	// The event log (rule 10). Cursors are the driver's, built with MakeCursor, so that
	// the core can order them (CompareCursors) without knowing their parts.
	Events(ctx context.Context, jobID string) ([]Event, error)
	EventsAfter(ctx context.Context, afterID int64, limit int) ([]Event, error)
	EventsSince(ctx context.Context, cursor string, limit int) ([]CursorEvent, string, error)
	JobEventsSince(ctx context.Context, jobID, cursor string, limit int) ([]CursorEvent, string, error)
	TransitionsSince(ctx context.Context, cursor string, limit int) ([]Transition, string, error)
	EventHead(ctx context.Context) (string, error)
	EventsKept(ctx context.Context, cursor string) (bool, error)

	// Schedules (rule 29): written already checked (CheckSchedule).
	CreateSchedule(ctx context.Context, sc Schedule) (Schedule, error)
	GetSchedule(ctx context.Context, id string) (Schedule, error)
	ListSchedules(ctx context.Context) ([]Schedule, error)
	UpdateSchedule(ctx context.Context, sc Schedule) (Schedule, error)
	EditSchedule(ctx context.Context, id string, edit func(Schedule) (Schedule, error)) (Schedule, error)
	MoveSchedule(ctx context.Context, id string, from, next time.Time) (moved bool, err error)
	DeleteSchedule(ctx context.Context, id string) error
	DueSchedules(ctx context.Context, limit int) ([]Schedule, error)
	FireSchedule(ctx context.Context, f Firing) (job Job, fired bool, err error)
	ScheduleFirings(ctx context.Context, id string, limit int) ([]Job, error)

	// The audit log and the people seen (issue 39; audit.go), written already checked.
	// AppendAudit stores e (At zero: the driver's now) and returns it with its Seq, which
	// only grows; AuditLog answers newest first (Seq descending) with the filter's limit
	// normalised (1-1000); PruneAudit removes up to limit entries stamped before before,
	// oldest first, and is harmless when nodes run it at once.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	AuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
	// SavePerson replaces the person name's identity, stamped seen by the driver's now;
	// Person reads it back, or ErrNotFound.
	SavePerson(ctx context.Context, name string, who json.RawMessage) error
	Person(ctx context.Context, name string) (who json.RawMessage, seen time.Time, err error)
}

// Enqueued is one answer of EnqueueBatch.
type Enqueued struct {
	Job     Job
	Existed bool
	Err     error
}

// The capabilities a driver may have beyond the operations. The composition root asks
// for them with a type assertion on Store.Driver(), never by the driver's type.
type (
	// JobChecker refuses a job the driver's database could not keep (PostgreSQL: a NUL
	// character), before it joins a group commit, on the caller's goroutine: one such job
	// would otherwise fail its group's statement, and a check on the committer's
	// goroutine would hold every group behind it.
	JobChecker interface {
		CheckJob(nj NewJob) error
	}
	// ClaimNexter answers, with a claim, what NextRunIn would answer right after it, in
	// the claim's own round trip (a driver whose reads cost a round trip has it).
	ClaimNexter interface {
		ClaimBatchNext(ctx context.Context, worker, queue string, limit int) (claimed []Job, next time.Duration, pending bool, err error)
	}
	// Shared is a driver whose database other nodes may use at the same time: a
	// PROCESSING job at start may be another node's, not an orphan.
	Shared interface{ Shared() bool }
	// Listener tells this node of other nodes' changes as they commit (PostgreSQL's
	// LISTEN); without it a node learns of them by polling.
	Listener interface {
		Listen(ctx context.Context, log *slog.Logger, cb ListenCallbacks) (stop func(), err error)
	}
	// Announcer tells other nodes' listeners that this node wrote events.
	Announcer interface{ AnnounceEvents() }
	// WriteHealth is a driver that remembers why its writes fail (a full disk), for
	// readiness, and is told of the faults requests met.
	WriteHealth interface {
		WriteHealth() error
		NoteError(err error)
	}
	// WriteObserver times each write transaction (one writer to time).
	WriteObserver interface {
		ObserveWrites(observe func(time.Duration))
	}
	// StartChecker is a driver that checks its database at open, within a time budget,
	// and can check the rest in the background: CheckedAtStart says whether the check at
	// open covered everything, with what to log of it (nil: nothing was checked);
	// FinishCheck does the rest.
	StartChecker interface {
		CheckedAtStart() (complete bool, logAttrs []any)
		FinishCheck(ctx context.Context) error
	}
	// Backuper copies its database to a file while it is in use.
	Backuper interface {
		Backup(ctx context.Context, path string) error
	}
	// WriteQueue is a driver whose enqueues, claims, heartbeats, checkpoints and ends
	// wait in one queue of its own, so that each commit carries every such write that is
	// due (ARCHITECTURE.md, rule 31; store/sqlite). While QueuesWrites is true the core
	// hands it each Enqueue as it comes (EnqueueBatch of one) instead of grouping them
	// first, the engine hands it each end (Store.QueuesWrites), and EnqueueStats is
	// Store.BatchStats.
	WriteQueue interface {
		QueuesWrites() bool
		EnqueueStats() BatchStats
	}
)

// crashPoint is where a crash test may kill the process inside a driver's transaction
// (SetCrashPoint); it does nothing otherwise.
var crashPoint = func(string) {}

// SetCrashPoint sets what CrashPoint calls: the engine's fault points of a build with
// -tags faultpoints (jobs/fault_on.go), set once before any store is opened.
func SetCrashPoint(fn func(name string)) { crashPoint = fn }

// CrashPoint is a named point inside a driver's transaction where a crash test may kill
// the process (such as "mid-batch-end"). It does nothing unless SetCrashPoint armed it.
func CrashPoint(name string) { crashPoint(name) }

// ListenCallbacks are what a Listener calls: Ready when another node made a job
// runnable in queue ("" for any), Cancel when a cancel was requested for job id, Events
// when other nodes wrote events.
type ListenCallbacks struct {
	Ready  func(queue string)
	Cancel func(id string)
	Events func()
}
