package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
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
// Each job runs inside its own SAVEPOINT, so a job that fails (a duplicate id, a reused
// idempotency key with another body) is rolled back alone and the others still commit.
// The idempotency lookup runs inside the batch's transaction, so two requests with the
// same key in one batch give one job: the second sees the first's uncommitted row and
// gets existed=true.

// enqueueCall is one waiting Enqueue.
type enqueueCall struct {
	ctx  context.Context
	nj   NewJob
	done chan struct{} // closed once job, existed and err are set

	job     Job
	existed bool
	err     error
}

// batcher queues Enqueue calls and commits them in groups. A committer goroutine runs
// while there is work and exits when the queue is empty, so an idle store holds none.
type batcher struct {
	max int // most calls in one transaction

	mu         sync.Mutex
	queue      []*enqueueCall
	committing bool // a committer goroutine is running

	// Prepared like the inserts: parsing was a sixth of a batched enqueue's CPU time.
	jobByKey, savepoint, rollbackTo, release *sql.Stmt

	// Counters for tests and benchmarks: transactions committed (or attempted) and the
	// calls they carried.
	commits, calls atomic.Int64
}

const jobByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ?`

func (b *batcher) prepare(ctx context.Context, w *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&b.jobByKey, jobByKeySQL},
		// One name serves every job: each savepoint is released before the next opens.
		{&b.savepoint, `SAVEPOINT enqueue`},
		{&b.rollbackTo, `ROLLBACK TO enqueue`},
		{&b.release, `RELEASE enqueue`},
	} {
		var err error
		if *p.stmt, err = w.PrepareContext(ctx, p.sql); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// enqueue queues nj and waits for the commit that holds it. If ctx ends while nj is still
// queued it is dropped and ctx's error returned; once its transaction has started, the
// caller waits for the real outcome (bounded by the busy timeout), so an error never
// hides a committed job.
func (b *batcher) enqueue(ctx context.Context, s *Store, nj NewJob) (Job, bool, error) {
	c := &enqueueCall{ctx: ctx, nj: nj, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if !b.committing {
		b.committing = true
		go b.run(s)
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.job, c.existed, c.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	for i, q := range b.queue {
		if q == c {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.mu.Unlock()
			return Job{}, false, ctx.Err()
		}
	}
	b.mu.Unlock()
	<-c.done // already taken into a transaction
	return c.job, c.existed, c.err
}

// run commits batches until the queue is empty.
func (b *batcher) run(s *Store) {
	limit := b.max
	if limit <= 0 {
		limit = 128
	}
	for {
		b.mu.Lock()
		n := min(len(b.queue), limit)
		if n == 0 {
			b.committing = false
			b.mu.Unlock()
			return
		}
		batch := make([]*enqueueCall, n)
		copy(batch, b.queue)
		// Shift rather than reslice so the backing array does not grow without bound.
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()
		b.commit(s, batch)
	}
}

// commit writes batch in one transaction and answers every call after COMMIT returns.
func (b *batcher) commit(s *Store, batch []*enqueueCall) {
	b.commits.Add(1)
	b.calls.Add(int64(len(batch)))
	// The transaction outlives any one caller: a caller that gives up must not roll back
	// the others' rows, so it runs on a context no caller can cancel.
	ctx := context.Background()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for _, c := range batch {
			if c.ctx.Err() != nil {
				// Gave up before its turn: skip it rather than commit a job nobody
				// will be told about.
				c.err = c.ctx.Err()
				continue
			}
			if _, err := tx.StmtContext(ctx, b.savepoint).ExecContext(ctx); err != nil {
				return err
			}
			c.job, c.existed, c.err = s.enqueueTx(ctx, tx, c.nj)
			if c.err != nil {
				// Undo this job's writes only; the savepoint stays open until RELEASE.
				if _, err := tx.StmtContext(ctx, b.rollbackTo).ExecContext(ctx); err != nil {
					return err
				}
			}
			if _, err := tx.StmtContext(ctx, b.release).ExecContext(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	for _, c := range batch {
		if err != nil {
			// Nothing was committed: every call in the batch fails, none with a job.
			c.job, c.existed, c.err = Job{}, false, err
		}
		close(c.done)
	}
}

// BatchStats counts Enqueue's group commits since Open.
type BatchStats struct {
	Commits int64 // write transactions started for Enqueue calls
	Calls   int64 // Enqueue calls those transactions carried
	Waiting int   // calls queued for the next transaction right now
}

// BatchStats reports how Enqueue calls have been grouped into commits.
func (s *Store) BatchStats() BatchStats {
	s.batch.mu.Lock()
	waiting := len(s.batch.queue)
	s.batch.mu.Unlock()
	return BatchStats{Commits: s.batch.commits.Load(), Calls: s.batch.calls.Load(), Waiting: waiting}
}
