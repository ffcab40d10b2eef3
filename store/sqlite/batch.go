package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"sheetq/store"
)

// EnqueueBatch writes njs (one Enqueue, as the core hands each to a store that queues
// its writes, store.WriteQueue) in the writer's next commit, beside the other writes
// that wait (writer.go, rule 31); without the queue (Options.Unbatched), alone.
func (s *Store) EnqueueBatch(ctx context.Context, njs []store.NewJob) ([]store.Enqueued, error) {
	op := &writeOp{enq: njs}
	s.write(ctx, op)
	if op.err != nil {
		return nil, op.err
	}
	return op.enqOut, nil
}

// enqueueAlone writes a group of Enqueues in one write transaction of their own: one
// BEGIN IMMEDIATE, one COMMIT, one fsync for all of them.
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
func (s *Store) enqueueAlone(ctx context.Context, njs []store.NewJob) ([]store.Enqueued, error) {
	out := make([]store.Enqueued, len(njs))
	done := make([]bool, len(njs)) // answered already: broke an earlier try
	for {
		broke := -1
		err := s.tx(ctx, func(tx *sql.Tx) error {
			for i, nj := range njs {
				if done[i] {
					continue
				}
				r := &out[i]
				r.Job, r.Existed, r.Err = s.enqueueTx(ctx, tx, nj)
				if r.Err != nil && !refusedAlone(r.Err) {
					if errors.Is(r.Err, errAfterInsert) {
						broke = i
					}
					return r.Err
				}
			}
			return nil
		})
		if err == nil {
			return out, nil
		}
		if broke < 0 {
			return nil, err
		}
		// One job failed after writing its row: the whole transaction is rolled back, so
		// that job fails alone and the others go again in a new one.
		done[broke] = true
		out[broke] = store.Enqueued{Err: out[broke].Err}
	}
}

const jobByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ?`

// refusedAlone reports whether err refused one job without writing anything, so that the
// transaction can go on with the others: an insert that breaks a unique index (a
// duplicate id or idempotency key) is undone by SQLite at the statement, and the lookup
// that follows writes nothing.
func refusedAlone(err error) bool {
	var se *sqlite.Error
	return errors.Is(err, store.ErrIdempotencyMismatch) || errors.Is(err, store.ErrConflict) ||
		(errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT && !errors.Is(err, errAfterInsert))
}
