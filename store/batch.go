package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"sheetq/internal/groupcommit"
)

// Group commit for Enqueue.
//
// With synchronous=FULL every COMMIT fsyncs the WAL, and one fsync per accepted request
// caps acceptance at the disk's commit rate (about 4,000/s on the benchmark machine,
// before the HTTP server, the workers and the event stream take their share). Enqueues
// that arrive while a commit is in flight therefore wait for it and then go together
// into the next write transaction: one BEGIN IMMEDIATE, one SAVEPOINT per job, one
// COMMIT and one fsync for all of them.
//
// Durability is unchanged (rule 1): a caller gets its result only after the COMMIT that
// contains its row has returned, and with synchronous=FULL a returned COMMIT is on disk.
// A crash before that COMMIT returns loses the whole batch, but none of its callers has
// been answered, so nothing that was acknowledged is lost; a crash after it keeps every
// row in the batch. There is no timer: an Enqueue on an idle store starts its commit at
// once, and batches only form while the disk is busy, so the extra latency is at most
// the one commit it waited for.
//
// A job that is refused (a duplicate id, a reused idempotency key with another body) is
// refused alone and the others still commit, without a SAVEPOINT per job (they were a
// third of the statements a batched job ran): its insert broke a unique index, SQLite
// undoes a statement that breaks a constraint by itself, and the lookup that follows
// writes nothing, so a refused job has left no row behind. A job that fails after
// writing its row (its event insert) rolls the transaction back; it is answered with its
// error and the others go again in a new transaction. Any other error fails the whole
// batch.
// The unique index is checked inside the batch's transaction, so two requests with the
// same key in one batch give one job: the second's insert meets the first's uncommitted
// row, and the second gets existed=true.

// enqueueCall is one waiting Enqueue.
type enqueueCall struct {
	ctx  context.Context
	nj   NewJob
	done chan struct{} // closed once job, existed and err are set

	job     Job
	existed bool
	err     error
}

// batcher commits concurrent Enqueue calls in groups (internal/groupcommit), one write
// transaction each.
type batcher struct {
	q *groupcommit.Queue[enqueueCall]

	// Prepared like the inserts: parsing was a sixth of a batched enqueue's CPU time.
	jobByKey *sql.Stmt

	// Counters for tests and benchmarks: transactions committed (or attempted) and the
	// calls they carried.
	commits, calls atomic.Int64
}

const jobByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ?`

func (b *batcher) prepare(ctx context.Context, w *sql.DB) error {
	var err error
	if b.jobByKey, err = w.PrepareContext(ctx, jobByKeySQL); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	return nil
}

// start makes the queue of s's Enqueues, groups of at most max calls (0: 128).
func (b *batcher) start(s *Store, max int) {
	b.q = groupcommit.New(max, ErrClosed, func(group []*enqueueCall) { b.commit(s, group) })
}

// enqueue queues nj and waits for the commit that holds it. If ctx ends while nj is still
// queued it is dropped and ctx's error returned; once its transaction has started, the
// caller waits for the real outcome (bounded by the busy timeout), so an error never
// hides a committed job.
func (b *batcher) enqueue(ctx context.Context, nj NewJob) (Job, bool, error) {
	c := &enqueueCall{ctx: ctx, nj: nj, done: make(chan struct{})}
	if err := b.q.Do(ctx, c, c.done); err != nil {
		return Job{}, false, err
	}
	return c.job, c.existed, c.err
}

// commit writes batch in one transaction and answers every call after COMMIT returns.
func (b *batcher) commit(s *Store, batch []*enqueueCall) {
	b.calls.Add(int64(len(batch)))
	// The transaction outlives any one caller: a caller that gives up must not roll back
	// the others' rows, so it runs on a context no caller can cancel.
	ctx := context.Background()
	out := make([]bool, len(batch)) // answered already: gave up, or broke an earlier try
	var err error
	for {
		b.commits.Add(1)
		broke := -1
		err = s.tx(ctx, func(tx *sql.Tx) error {
			for i, c := range batch {
				if out[i] {
					continue
				}
				if c.ctx.Err() != nil {
					// Gave up before its turn: skip it rather than commit a job nobody
					// will be told about.
					c.err, out[i] = c.ctx.Err(), true
					continue
				}
				c.job, c.existed, c.err = s.enqueueTx(ctx, tx, c.nj)
				if c.err != nil && !refusedAlone(c.err) {
					if errors.Is(c.err, errAfterInsert) {
						broke = i
					}
					return c.err
				}
			}
			return nil
		})
		if err == nil || broke < 0 {
			break
		}
		// One job failed after writing its row: the whole transaction is rolled back, so
		// that job fails alone and the others go again in a new one.
		out[broke] = true
	}
	for i, c := range batch {
		if err != nil && !out[i] {
			// Nothing was committed: every call in the batch fails, none with a job.
			c.job, c.existed, c.err = Job{}, false, err
		}
		close(c.done)
	}
}

// refusedAlone reports whether err refused one job without writing anything, so that the
// transaction can go on with the others: an insert that breaks a unique index (a
// duplicate id or idempotency key) is undone by SQLite at the statement, and the lookup
// that follows writes nothing.
func refusedAlone(err error) bool {
	var se *sqlite.Error
	return errors.Is(err, ErrIdempotencyMismatch) || errors.Is(err, ErrConflict) ||
		(errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT && !errors.Is(err, errAfterInsert))
}

// BatchStats counts Enqueue's group commits since Open.
type BatchStats struct {
	Commits int64 // write transactions started for Enqueue calls
	Calls   int64 // Enqueue calls those transactions carried
	Waiting int   // calls queued for the next transaction right now
}

// BatchStats reports how Enqueue calls have been grouped into commits.
func (s *Store) BatchStats() BatchStats {
	return BatchStats{Commits: s.batch.commits.Load(), Calls: s.batch.calls.Load(), Waiting: s.batch.q.Waiting()}
}
