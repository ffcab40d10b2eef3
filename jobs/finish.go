package jobs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"sheetq/store"
)

// Group commit for the ends of attempts (ARCHITECTURE.md, rule 28).
//
// An execution that has its outcome hands it to the finisher and waits for the COMMIT
// that holds it; only then does its worker slot come free, so a crash never loses an end
// that was acted on. Ends that arrive while a commit is in flight wait for it and go
// together into the next one (Store.FinishBatch: one transaction, one SAVEPOINT and one
// fence per job). There is no timer: an end on an idle engine commits at once, and
// batches form only while the store is busy, so the wait is at most the one commit in
// flight. The store answers each end on its own: a lost lease or a failed publish is
// that job's answer, and the others commit.

// A store that queues its own writes (store.Store.QueuesWrites: SQLite, rule 31) gets
// each end as it comes instead: its queue groups the ends with every other write that is
// due (enqueues, claims, heartbeats), and a second queue in front of it would only hold
// ends back from the next commit while the last group of ends is answered.

// maxFinishBatch bounds one transaction of ends, so that a thousand ends at once do not
// hold the write lock for one long transaction while an enqueue waits.
const maxFinishBatch = 128

// finishCall is one end waiting for its commit.
type finishCall struct {
	f    store.Finish
	done chan struct{} // closed once res is set
	res  store.Finished
}

// finisher queues ends and commits them in groups. Its committer goroutine runs while
// there is work and exits when the queue is empty, so an idle engine holds none.
type finisher struct {
	st Store
	// direct hands each end to st as it comes (a store that queues its writes).
	direct bool

	mu         sync.Mutex
	queue      []*finishCall
	committing bool
	running    sync.WaitGroup // the committer goroutine, for Stop

	// For tests and stats: transactions and the ends they carried.
	commits, ends atomic.Int64
}

// finish queues f and returns what it came to once the transaction that holds it has
// committed (or failed). Ends are recorded on a context no caller can cancel: one end
// giving up must not roll back the others.
func (fz *finisher) finish(f store.Finish) (store.Job, error) {
	if fz.direct {
		fz.commits.Add(1)
		fz.ends.Add(1)
		res := fz.st.FinishBatch(context.Background(), []store.Finish{f})
		if len(res) == 0 {
			return store.Job{}, errShortBatch
		}
		return res[0].Job, res[0].Err
	}
	c := &finishCall{f: f, done: make(chan struct{})}
	fz.mu.Lock()
	fz.queue = append(fz.queue, c)
	if !fz.committing {
		fz.committing = true
		fz.running.Add(1)
		go fz.run()
	}
	fz.mu.Unlock()
	<-c.done
	return c.res.Job, c.res.Err
}

// run commits batches until the queue is empty.
func (fz *finisher) run() {
	defer fz.running.Done()
	for {
		fz.mu.Lock()
		n := min(len(fz.queue), maxFinishBatch)
		if n == 0 {
			fz.committing = false
			fz.mu.Unlock()
			return
		}
		batch := make([]*finishCall, n)
		copy(batch, fz.queue)
		// Shift rather than reslice so that the backing array does not grow without bound.
		fz.queue = append(fz.queue[:0], fz.queue[n:]...)
		fz.mu.Unlock()

		fs := make([]store.Finish, n)
		for i, c := range batch {
			fs[i] = c.f
		}
		if faultsArmed && n > 1 && fs[1].Outcome == store.Succeeded {
			// For crash tests: the first end of the batch is written (and, for a success,
			// published), the transaction is not yet committed.
			publish := fs[1].Publish
			fs[1].Publish = func() error {
				faultPoint("mid-batch-end")
				if publish != nil {
					return publish()
				}
				return nil
			}
		}
		fz.commits.Add(1)
		fz.ends.Add(int64(n))
		res := fz.st.FinishBatch(context.Background(), fs)
		for i, c := range batch {
			if i < len(res) {
				c.res = res[i]
			} else {
				c.res = store.Finished{Err: errShortBatch}
			}
			close(c.done)
		}
	}
}

// wait waits for the committer to exit; every finish call has returned by then.
func (fz *finisher) wait() { fz.running.Wait() }

// errShortBatch is a store that answered fewer ends than it was given: a bug in that
// store, reported to each end it left out rather than leaving it waiting forever.
var errShortBatch = errors.New("store answered fewer ends than it was given")

// BatchStats counts the engine's claim and end transactions since New (rule 28): how
// many jobs each carried, on average, is the batching at work.
type BatchStats struct {
	ClaimCommits int64 // claim transactions that took at least one job
	Claimed      int64 // jobs they took
	// FinishCommits counts the engine's groups of ends handed to the store; a store that
	// queues its writes gets each end alone, and groups them there (rule 31).
	FinishCommits int64
	Finished      int64 // ends they carried
	FinishWaiting int   // ends queued for the next transaction right now
}

// BatchStats reports how claims and ends have been grouped into transactions.
func (e *Engine) BatchStats() BatchStats {
	e.fin.mu.Lock()
	waiting := len(e.fin.queue)
	e.fin.mu.Unlock()
	return BatchStats{
		ClaimCommits: e.claimCommits.Load(), Claimed: e.claimed.Load(),
		FinishCommits: e.fin.commits.Load(), Finished: e.fin.ends.Load(), FinishWaiting: waiting,
	}
}
