package store

import (
	"context"
	"sync/atomic"

	"sheetq/internal/groupcommit"
)

// Group commit for Enqueue (ARCHITECTURE.md, rule 17), on every driver that does not
// queue its writes itself (WriteQueue, rule 31: SQLite's queue groups enqueues with the
// claims, heartbeats and ends that wait, and Enqueue hands it each call as it comes).
//
// Every commit that makes an accepted job durable costs the database a flush (an fsync
// of SQLite's WAL, a WAL flush of PostgreSQL's), and one flush per accepted request
// caps acceptance at the disk's commit rate. Enqueues that arrive while a commit is in
// flight therefore wait for it and go together to the driver's next EnqueueBatch,
// which writes them in one transaction (or one statement) with one flush.
//
// Durability is unchanged (rule 1): a caller gets its result only after the commit
// that holds its row has returned. A crash before that loses the whole group, but none
// of its callers has been answered. There is no timer: an Enqueue on an idle store
// commits at once, and groups form only while the database is busy, so the extra
// latency is at most the one commit it waited for.
//
// A caller that gives up while its call still waits is dropped, never written; once its
// group is taken it waits for the real outcome, so an error never hides a committed job.
// The driver's batch runs on a context no caller can cancel (a caller that gives up
// must not roll back the others' rows), and that cannot be canceled at all: a
// cancelable context costs database/sql a goroutine per transaction and the SQLite
// driver one per statement. A driver whose statements can hang (a server that stops
// answering) bounds them itself (store/pg's batchTimeout).

// enqueueCall is one waiting Enqueue.
type enqueueCall struct {
	ctx  context.Context
	nj   NewJob
	done chan struct{} // closed once answered

	res Enqueued
}

// batcher commits concurrent Enqueue calls in groups (internal/groupcommit).
type batcher struct {
	q *groupcommit.Queue[enqueueCall]

	// Counters for tests and benchmarks: the driver batches run and the calls they took.
	commits, calls atomic.Int64
}

// start makes the queue of s's Enqueues, groups of at most max calls.
func (b *batcher) start(s *Store, max int) {
	b.q = groupcommit.New(max, ErrClosed, func(group []*enqueueCall) { b.commit(s, group) })
}

// enqueue queues nj and waits for the commit that holds it.
func (b *batcher) enqueue(ctx context.Context, nj NewJob) (Job, bool, error) {
	c := &enqueueCall{ctx: ctx, nj: nj, done: make(chan struct{})}
	if err := b.q.Do(ctx, c, c.done); err != nil {
		return Job{}, false, err
	}
	return c.res.Job, c.res.Existed, c.res.Err
}

// commit hands the calls still wanted to the driver in one EnqueueBatch and answers
// every call of group once it returns.
func (b *batcher) commit(s *Store, group []*enqueueCall) {
	b.calls.Add(int64(len(group)))
	defer func() {
		for _, c := range group {
			close(c.done)
		}
	}()
	var njs []NewJob
	var taken []*enqueueCall
	for _, c := range group {
		if err := c.ctx.Err(); err != nil {
			// Gave up before its turn: skip it rather than commit a job nobody will be
			// told about.
			c.res.Err = err
			continue
		}
		njs = append(njs, c.nj)
		taken = append(taken, c)
	}
	if len(njs) == 0 {
		return
	}
	b.commits.Add(1)
	rs, err := s.d.EnqueueBatch(context.Background(), njs)
	for i, c := range taken {
		if err != nil {
			// Nothing was committed: every call fails, none with a job.
			c.res = Enqueued{Err: err}
			continue
		}
		c.res = rs[i]
	}
}

// BatchStats counts Enqueue's group commits since New.
type BatchStats struct {
	Commits int64 // driver batches run for Enqueue calls
	Calls   int64 // Enqueue calls those batches carried
	Waiting int   // calls queued for the next batch right now
}

// BatchStats reports how Enqueue calls have been grouped into commits.
func (s *Store) BatchStats() BatchStats {
	if s.queued != nil {
		return s.queued.EnqueueStats()
	}
	return BatchStats{Commits: s.batch.commits.Load(), Calls: s.batch.calls.Load(), Waiting: s.batch.q.Waiting()}
}
