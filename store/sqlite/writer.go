package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"

	"sheetq/internal/groupcommit"
	"sheetq/store"
)

// One commit for every write that is due (ARCHITECTURE.md, rule 31).
//
// With synchronous=FULL every COMMIT is an fsync, and the disk allows a few thousand of
// them a second. Enqueues, claims, heartbeats, checkpoints and ends therefore wait in
// one queue, the writer's, and a commit carries every write that was waiting when it
// began, whatever its kind, and those that came while its statements ran (commitGroup):
// a claim or an end rides the next enqueue's fsync instead of paying its own. There is no timer: a write on an idle store commits at once (its
// caller leads the group, internal/groupcommit), and groups form only while a commit is
// in flight.
//
// Each write keeps what it was alone:
//   - its fence and its SQL are the same statements, in the order the writes arrived;
//   - it is isolated by a SAVEPOINT of its own (a run of enqueues that arrived together
//     shares one, since a refused enqueue writes nothing, enqueueRun): one write's
//     failure is rolled back to its savepoint and answered alone, and the others commit;
//   - nobody is answered before the COMMIT that holds their write has returned, and a
//     failed COMMIT (or a transaction SQLite rolled back as a whole, which the next
//     ROLLBACK TO finds) answers every write of it with that error;
//   - a caller that gives up while its write still waits is dropped, never written; once
//     its group is taken it waits for the real outcome. The transaction runs on a
//     context no caller can cancel.
// Other writes (control actions, recovery, schedules) keep their own transactions on
// the same single writer connection.

// writeOp is one write waiting in the writer's queue: a batch of enqueues (enq), or
// steps (a claim, a heartbeat, each end of a FinishBatch) that each run in a savepoint.
type writeOp struct {
	ctx  context.Context
	done chan struct{} // closed once answered

	enq    []store.NewJob
	enqOut []store.Enqueued

	steps   []func(ctx context.Context, tx *sql.Tx, w *txState) error
	stepErr []error

	err error // the whole op's: a failed transaction, or enqueues failed as a whole
}

// txState is what the steps of one transaction share.
type txState struct {
	published int // ends that succeeded (and published) so far in this transaction
}

// writer is the store's write queue and its counters.
type writer struct {
	q *groupcommit.Queue[writeOp]

	// commits: transactions the queue ran; ops: the writes they carried. enqCommits,
	// enqCalls: those that carried enqueues, and the jobs (store.BatchStats).
	commits, ops, enqCommits, enqCalls atomic.Int64
	// enqQueued, enqTaken, enqDropped count enqueue writes into and out of the queue, for
	// the number waiting.
	enqQueued, enqTaken, enqDropped atomic.Int64
}

// startWriter makes the queue; groups hold at most max writes.
func (s *Store) startWriter(max int) {
	s.wq = &writer{}
	s.wq.q = groupcommit.New(max, store.ErrClosed, s.commitGroup)
}

// write runs op: alone in a transaction of its own when the store has no queue
// (Options.Unbatched), else in the next commit of the queue. It returns once op is
// answered.
func (s *Store) write(ctx context.Context, op *writeOp) {
	op.ctx = ctx
	op.stepErr = make([]error, len(op.steps))
	if len(op.enq) > 0 {
		op.enqOut = make([]store.Enqueued, len(op.enq))
	}
	if s.wq == nil {
		s.commitAlone(ctx, op)
		return
	}
	op.done = make(chan struct{})
	if len(op.enq) > 0 {
		s.wq.enqQueued.Add(1)
	}
	if err := s.wq.q.Do(ctx, op, op.done); err != nil {
		// Refused after Close, or dropped while it waited: never taken, never written.
		if len(op.enq) > 0 {
			s.wq.enqDropped.Add(1)
		}
		op.err = err
	}
}

// writeStep writes step (a heartbeat, a checkpoint) through the writer and returns its
// answer.
func (s *Store) writeStep(ctx context.Context, step func(ctx context.Context, tx *sql.Tx, w *txState) error) error {
	op := &writeOp{steps: []func(context.Context, *sql.Tx, *txState) error{step}}
	s.write(ctx, op)
	return op.result(0)
}

// result is step i's answer: the op's own error first (a transaction that failed, a
// queue that refused it), else the step's.
func (op *writeOp) result(i int) error {
	if op.err != nil {
		return op.err
	}
	return op.stepErr[i]
}

// commitAlone runs op in a transaction of its own, as every write did before the queue:
// enqueues go through enqueueAlone, and the steps (the ends of one FinishBatch) share
// one transaction, each in a savepoint when there are several (rule 28).
func (s *Store) commitAlone(ctx context.Context, op *writeOp) {
	if len(op.enq) > 0 {
		op.enqOut, op.err = s.enqueueAlone(ctx, op.enq)
		return
	}
	var w txState
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if len(op.steps) == 1 {
			op.stepErr[0] = op.steps[0](ctx, tx, &w)
			return op.stepErr[0]
		}
		for k, step := range op.steps {
			if err := s.savepointed(ctx, tx, &op.stepErr[k], func() error { return step(ctx, tx, &w) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Nothing was committed: every step gets the transaction's error, but one that
		// failed on its own keeps its own (alone, the two are the same).
		for k := range op.stepErr {
			if op.stepErr[k] == nil || len(op.steps) == 1 {
				op.stepErr[k] = err
			}
		}
	}
}

// commitGroup writes a group of the queue's writes in one transaction and answers each.
// Before its COMMIT it takes the writes that came while its statements ran (More), and
// runs them too, until none is waiting or the group is full: a claim woken by the last
// commit, or an end, then makes this commit's fsync instead of the next one.
func (s *Store) commitGroup(group []*writeOp) {
	all := group
	defer func() {
		for _, op := range all {
			close(op.done)
		}
	}()
	var taken []*writeOp
	counted := false // the transaction is counted among those that carried enqueues
	// admit answers the writes whose callers gave up before their turn (never written)
	// and returns the others, counted.
	admit := func(ops []*writeOp) []*writeOp {
		var out []*writeOp
		enqueues := 0
		for _, op := range ops {
			if len(op.enq) > 0 {
				s.wq.enqTaken.Add(1)
			}
			if err := op.ctx.Err(); err != nil {
				op.err = err
				continue
			}
			out = append(out, op)
			enqueues += len(op.enq)
		}
		s.wq.ops.Add(int64(len(out)))
		if enqueues > 0 {
			if !counted {
				s.wq.enqCommits.Add(1)
				counted = true
			}
			s.wq.enqCalls.Add(int64(enqueues))
		}
		taken = append(taken, out...)
		return out
	}
	batch := admit(group)
	if len(batch) == 0 {
		return
	}
	s.wq.commits.Add(1)
	// A first write of one job or one step runs without a savepoint: the transaction
	// holds nothing else yet, and its failure rolls back nothing of another's (the
	// writes taken after it each have their own).
	var bare *writeOp
	if len(batch) == 1 && len(batch[0].enq)+len(batch[0].steps) == 1 {
		bare = batch[0]
	}
	ctx := context.Background()
	var w txState
	max := s.wq.q.Max()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for len(batch) > 0 {
			if err := s.runOps(ctx, tx, batch, bare, &w); err != nil {
				return err
			}
			bare = nil
			if len(all) >= max {
				break
			}
			more := s.wq.q.More(max - len(all))
			all = append(all, more...)
			batch = admit(more)
		}
		return nil
	})
	if err == nil {
		return
	}
	// Nothing of the transaction was committed: every write gets its error, except those
	// that failed on their own already (a bare write's own error is the transaction's,
	// which is the one named with its fault).
	for _, op := range taken {
		for k := range op.stepErr {
			if op.stepErr[k] == nil || op == bare {
				op.stepErr[k] = err
			}
		}
		if len(op.enq) > 0 {
			op.err = err
		}
	}
}

// runOps runs ops inside tx in order, each step in a savepoint of its own and each run
// of enqueues in one (enqueueRun); bare, when it is ops' only write, runs without one and
// its failure fails the transaction.
func (s *Store) runOps(ctx context.Context, tx *sql.Tx, ops []*writeOp, bare *writeOp, w *txState) error {
	for i := 0; i < len(ops); {
		if len(ops[i].enq) > 0 {
			j := i + 1
			for j < len(ops) && len(ops[j].enq) > 0 {
				j++
			}
			if err := s.enqueueRun(ctx, tx, ops[i:j], ops[i] == bare); err != nil {
				return err
			}
			i = j
			continue
		}
		op := ops[i]
		for k, step := range op.steps {
			if op == bare {
				op.stepErr[k] = step(ctx, tx, w)
				if op.stepErr[k] != nil {
					return op.stepErr[k]
				}
				continue
			}
			if err := s.savepointed(ctx, tx, &op.stepErr[k], func() error { return step(ctx, tx, w) }); err != nil {
				return err
			}
		}
		i++
	}
	return nil
}

// savepointed runs fn inside a savepoint: when fn fails, what it wrote is rolled back,
// and its error goes to *errp, not to the transaction. An error of the savepoint's own
// statements (a transaction SQLite rolled back as a whole on a full disk: ROLLBACK TO
// finds no savepoint) is returned, and fails the transaction.
func (s *Store) savepointed(ctx context.Context, tx *sql.Tx, errp *error, fn func() error) error {
	if _, err := tx.StmtContext(ctx, s.stmts.savepoint).ExecContext(ctx); err != nil {
		return err
	}
	if err := fn(); err != nil {
		*errp = withFault(err)
		s.health.note(err)
		if _, err := tx.StmtContext(ctx, s.stmts.rollbackTo).ExecContext(ctx); err != nil {
			return err
		}
	}
	_, err := tx.StmtContext(ctx, s.stmts.release).ExecContext(ctx)
	return err
}

// enqueueRun writes the enqueues of ops, which came one after another, inside tx. They
// share one savepoint rather than one each (savepoints were a third of the statements
// an enqueue ran): a job that is refused (a duplicate id, a reused idempotency key) has
// written nothing (refusedAlone) and the others go on; a job that fails after writing
// its row rolls the run back to its savepoint, is answered with its error, and the
// others are written again. Any other error fails the run's writes as a whole (each
// op's err) and leaves the rest of the transaction alone. alone (the transaction holds
// one enqueue and nothing else) needs no savepoint: an error is returned and rolls the
// transaction back.
func (s *Store) enqueueRun(ctx context.Context, tx *sql.Tx, ops []*writeOp, alone bool) error {
	type at struct{ op, i int }
	broken := map[at]bool{}
	for {
		if !alone {
			if _, err := tx.StmtContext(ctx, s.stmts.savepoint).ExecContext(ctx); err != nil {
				return err
			}
		}
		var failed error
		var broke at
		brokeSet := false
	run:
		for o, op := range ops {
			for i, nj := range op.enq {
				if broken[at{o, i}] {
					continue
				}
				r := &op.enqOut[i]
				r.Job, r.Existed, r.Err = s.enqueueTx(ctx, tx, nj)
				if r.Err != nil && !refusedAlone(r.Err) {
					failed = r.Err
					if errors.Is(r.Err, errAfterInsert) {
						broke, brokeSet = at{o, i}, true
					}
					break run
				}
			}
		}
		if failed == nil {
			if alone {
				return nil
			}
			_, err := tx.StmtContext(ctx, s.stmts.release).ExecContext(ctx)
			return err
		}
		if alone {
			return failed
		}
		s.health.note(failed)
		if _, err := tx.StmtContext(ctx, s.stmts.rollbackTo).ExecContext(ctx); err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.stmts.release).ExecContext(ctx); err != nil {
			return err
		}
		if !brokeSet {
			// Not one job's fault: every enqueue of the run fails, none written.
			for _, op := range ops {
				op.err = withFault(failed)
			}
			return nil
		}
		// That job fails alone; the others of the run, rolled back with it, go again.
		broken[broke] = true
		ops[broke.op].enqOut[broke.i] = store.Enqueued{Err: withFault(failed)}
		for o, op := range ops {
			for i := range op.enqOut {
				if !broken[at{o, i}] {
					op.enqOut[i] = store.Enqueued{}
				}
			}
		}
	}
}

// WriteStats counts the write queue's transactions and the writes they carried.
type WriteStats struct {
	Commits int64 // transactions of the queue
	Writes  int64 // writes they carried: enqueue calls, claims, heartbeats, checkpoints, end batches
	Waiting int   // writes queued for the next commit right now
}

// WriteStats reports how the writer's queue has grouped writes into commits; zero
// without a queue (Options.Unbatched).
func (s *Store) WriteStats() WriteStats {
	if s.wq == nil {
		return WriteStats{}
	}
	return WriteStats{Commits: s.wq.commits.Load(), Writes: s.wq.ops.Load(), Waiting: s.wq.q.Waiting()}
}

// QueuesWrites says whether enqueues, claims, heartbeats, checkpoints and ends share
// the writer's queue (store.WriteQueue): false with Options.Unbatched.
func (s *Store) QueuesWrites() bool { return s.wq != nil }

// EnqueueStats is store.BatchStats for the Enqueues that went through the writer's queue.
func (s *Store) EnqueueStats() store.BatchStats {
	if s.wq == nil {
		return store.BatchStats{}
	}
	w := s.wq
	return store.BatchStats{Commits: w.enqCommits.Load(), Calls: w.enqCalls.Load(),
		Waiting: int(w.enqQueued.Load() - w.enqTaken.Load() - w.enqDropped.Load())}
}

var _ store.WriteQueue = (*Store)(nil)
