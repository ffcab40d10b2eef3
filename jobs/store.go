package jobs

import (
	"context"
	"encoding/json"
	"time"

	"sheetq/store"
)

// Store is what the engine and the janitor need of the job table: its operations, not
// SQL. *store.Store (SQLite) is the first implementation; another one must pass the
// conformance suite, store/storetest/conformance, which states each rule below through
// this interface (ARCHITECTURE.md, "State machine").
//
// The engine passes durations ("retry in 4 s", "stale after 30 s"), never readings of
// its own clock: the store measures them with its clock, which may be the database's.
// Every method that changes a job appends its event in the same transaction (rule 10).
//
// Follow-ups (rule 19): a store is made with an optional hook (store.FollowUpFunc;
// store.Config.FollowUps) that a job kind supplies, such as jobs/webhook's
// Announcer. Every method that makes a job SUCCEEDED, FAILED or CANCELED calls it with
// the job as committed and, in the same transaction, inserts the jobs it returns
// (store.FollowUp: PENDING in the queue it names, linked to the job as their parent,
// each with its "accepted" event, plus the event the hook asks for on the parent's
// timeline); an error from the hook commits nothing. Delete stops a job's follow-ups with it.
// A fenced method (it takes an attempt) changes nothing and returns store.ErrLeaseLost
// unless the job is PROCESSING with that attempt (rule 3).
type Store interface {
	// Enqueue durably inserts a PENDING job, in the queue NewJob.Queue names
	// ("": store.DefaultQueue), with its "accepted" event (rule 1). A known
	// idempotency key returns its job with existed=true, or store.ErrIdempotencyMismatch
	// (and the job) when the request hash differs (rule 11); an id in use is
	// store.ErrConflict.
	Enqueue(ctx context.Context, nj store.NewJob) (job store.Job, existed bool, err error)
	// ClaimBatch takes up to limit runnable PENDING jobs of queue (store.Job.Queue) by
	// priority, run_at, then insertion order, in one transaction: each becomes PROCESSING
	// with attempt+1, its worker and heartbeat stamped and its "started" event appended
	// (rule 2). It never takes a job of another queue (rule 27), and returns the jobs in
	// claim order: none is an empty slice, not an error (rule 28).
	ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]store.Job, error)
	// Heartbeat (fenced) stamps the heartbeat and progress (total < 0: unknown) and
	// reports whether a cancel was requested (rule 4).
	Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error)
	// SaveCheckpoint (fenced) is Heartbeat that also replaces the job's checkpoint, which
	// outlives the attempt until a success or a cancel clears it (rule 30).
	SaveCheckpoint(ctx context.Context, id string, attempt int, rows, total int64, data []byte) (cancelRequested bool, err error)
	// Checkpoint reads the job's checkpoint; nil when it has none.
	Checkpoint(ctx context.Context, id string) ([]byte, error)
	// AppendEvent notes an event on a job's timeline (a resumed attempt's "resumed").
	AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error
	// FinishBatch records the ends of running attempts (succeeded and published,
	// failed, cancelled, requeued; store.Finish) in one transaction, each fenced on its
	// own: a Finish whose attempt no longer owns its job is answered store.ErrLeaseLost,
	// and its Publish never runs (rule 3). Each Finish is what the method of its outcome
	// does alone (store.Store's Succeed, Fail, FinishCanceled, Requeue; rules 6-9): a
	// succeeded attempt's Publish runs at most once per Finish, inside a transaction after
	// its fence matched (on PostgreSQL that transaction may be an earlier round of the
	// batch, rolled back for another end's sake), and its error commits nothing of that job. One Finish that fails never keeps another
	// from committing (how a store isolates them is its own: SQLite uses a SAVEPOINT per
	// Finish; ARCHITECTURE.md, "Ready for a second store"); when the transaction fails as
	// a whole, every Finish gets its error and nothing is committed. Each result is
	// returned only after COMMIT (rule 28).
	FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished
	// CompleteFromFile (fenced) makes an orphan whose file was published SUCCEEDED (rule 5).
	CompleteFromFile(ctx context.Context, id string, attempt int, res store.FileResult) (store.Job, error)
	// Recover (fenced) takes back a stale attempt, which counts as spent: PENDING to run
	// retryIn from now, FAILED out of attempts, or CANCELED (rule 5).
	Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (store.Job, error)
	// Cancel makes a PENDING job CANCELED and sets cancel_requested on a PROCESSING one;
	// a finished job is store.ErrFinished (rule 8).
	Cancel(ctx context.Context, id string) (store.Job, error)
	// Retry puts a FAILED or CANCELED job back to PENDING to run now with a fresh budget
	// (0: store.DefaultMaxAttempts); another state is store.ErrNotRetryable (rule 20).
	Retry(ctx context.Context, id string, budget int) (store.Job, error)
	// Stale lists PROCESSING jobs whose heartbeat is older than staleAfter, oldest first;
	// staleAfter <= 0 lists every PROCESSING job (the start-up sweep, rule 5).
	Stale(ctx context.Context, staleAfter time.Duration) ([]store.Job, error)
	// NextRunIn is how long until the earliest run_at of a PENDING job of queue (<= 0:
	// now), or store.ErrNotFound when it has none. Jobs of other queues do not count: a
	// full lane's due job must not wake a lane that cannot take it.
	NextRunIn(ctx context.Context, queue string) (time.Duration, error)
	// FinishedOlderThan lists up to limit jobs in one of statuses that finished more than
	// age ago, oldest first (rule 22).
	FinishedOlderThan(ctx context.Context, statuses []store.Status, age time.Duration, limit int) ([]store.Job, error)
	// Expire makes a SUCCEEDED job EXPIRED; another state is store.ErrNotSucceeded.
	Expire(ctx context.Context, id string) (store.Job, error)
	// Delete removes a final job and its events, deletes its waiting follow-ups (with
	// their events) and sets cancel_requested on running ones; store.ErrNotFinished for a
	// job that is not final (rule 21).
	Delete(ctx context.Context, id string) (store.Job, error)
}

// ClaimNexter is a Store that can answer, with a claim, what NextRunIn would answer right
// after it: how long until the earliest run_at of a PENDING job of the queue (pending
// false: none is left). A store whose reads cost a round trip (store/pg) implements it,
// so that a dispatcher whose claim left slots free learns how long it may sleep from the
// claim's own round trip instead of a second one; the dispatcher asks NextRunIn of any
// other store.
type ClaimNexter interface {
	ClaimBatchNext(ctx context.Context, worker, queue string, limit int) (claimed []store.Job, next time.Duration, pending bool, err error)
}
