package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sheetq/store"
	"time"
)

// Batched claims and finishes (ARCHITECTURE.md, rule 28).
//
// Each claim and each end of an attempt is a write transaction, and with
// synchronous=FULL each COMMIT is an fsync: two per job on top of its Enqueue. The engine
// therefore claims as many jobs as a lane has free slots in one transaction
// (ClaimBatch), and commits the ends of attempts that arrive together in one transaction
// (FinishBatch, which the engine feeds from its group committer). Every rule holds per
// job: each end carries its own fence, a publish runs only after its own fence matched,
// and one end that fails is rolled back to its SAVEPOINT alone, so it never takes
// another's with it. Nothing is answered before the COMMIT that holds it.

// ClaimBatch atomically takes up to limit runnable PENDING jobs of queue (priority, then
// run_at, then insertion order), sets each PROCESSING, increments its attempt (the
// fencing token), stamps worker and heartbeat and appends its "started" event, all in one
// transaction. The jobs come back in claim order; none is an empty slice and no error.
func (s *Store) ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]store.Job, error) {
	var claimed []store.Job
	op := &writeOp{steps: []func(context.Context, *sql.Tx, *txState) error{func(ctx context.Context, tx *sql.Tx, _ *txState) error {
		var err error
		claimed, err = s.claimTx(ctx, tx, worker, queue, limit)
		return err
	}}}
	s.write(ctx, op)
	if err := op.result(0); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return claimed, nil
}

// claimTx is ClaimBatch inside tx, which holds SQLite's one writer: nothing can come
// between the pick and the updates, so the two are one atomic claim (rule 2).
//
// The pick reads the jobs in claim order from jobs_claim (migration 0009 starts it with
// the queue), stops after limit entries, and the row of each is updated by its rowid.
// The claim was one UPDATE ... WHERE rowid IN (SELECT ...) RETURNING: SQLite built and
// dropped two temporary tables for it (the IN list and RETURNING's rows) inside the
// writer's critical section, and sorted the rows back into claim order in Go. The job
// returned is the row as read with the claim's own changes applied, as enqueueTx builds
// an accepted job; TestClaimReturnsStoredJob holds it to what Get reads back.
//
// The limit is "? + 0", not a bare parameter: with a bare one SQLite re-prepares (parses
// again) the statement whenever the bound limit differs from the last, as a lane's free
// slots do from one claim to the next, and that was 40% of a claim's CPU time at 100
// workers (BENCHMARKS.md, "One commit for every write").
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, worker, queue string, limit int) ([]store.Job, error) {
	t := s.now()
	now := ms(t)
	rows, err := tx.StmtContext(ctx, s.stmts.claimPick).QueryContext(ctx, queue, now, limit)
	if err != nil {
		return nil, err
	}
	var claimed []store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		claimed = append(claimed, j)
	}
	// The pick's cursor is closed before its rows are updated: the updates move them out
	// of the index it reads.
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	at := time.UnixMilli(now).UTC()
	update := tx.StmtContext(ctx, s.stmts.claimOne)
	for i := range claimed {
		j := &claimed[i]
		res, err := update.ExecContext(ctx, worker, now, now, j.Seq)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return nil, cmp.Or(err, fmt.Errorf("claim %s: %d rows changed", j.ID, n))
		}
		j.Status, j.Attempt, j.Worker = store.StatusProcessing, j.Attempt+1, worker
		j.StartedAt, j.HeartbeatAt = at, at
		j.ProgressRows, j.ProgressTotal, j.ErrorCode, j.ErrorMessage = 0, -1, "", ""
		if err := s.addEvent(ctx, tx, j.ID, store.EventStarted, store.StatusProcessing, j.Attempt, store.StartedData{Worker: worker}); err != nil {
			return nil, err
		}
	}
	return claimed, nil
}

// FinishBatch records fs in one transaction (the writer's next commit, writer.go), each
// as its Outcome's method would alone, and returns what each came to, in order. Each
// Finish runs inside a SAVEPOINT of its own: one that fails (ErrLeaseLost from its fence, a publish error, an error of the
// follow-up hook) is rolled back alone and answered with its error, and the others
// commit. When the transaction itself fails (it cannot begin, or COMMIT fails), nothing
// is committed and every Finish is answered with that error. Nothing is answered before
// COMMIT has returned (rule 1's promise, kept for ends).
func (s *Store) FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished {
	out := make([]store.Finished, len(fs))
	if len(fs) == 0 {
		return out
	}
	op := &writeOp{steps: make([]func(context.Context, *sql.Tx, *txState) error, len(fs))}
	for i, f := range fs {
		op.steps[i] = func(ctx context.Context, tx *sql.Tx, w *txState) error {
			if f.Outcome == store.Succeeded && w.published > 0 {
				// For crash tests: an earlier end of this transaction is written and its
				// file published, and the transaction is not committed.
				publish := f.Publish
				f.Publish = func() error {
					store.CrashPoint("mid-batch-end")
					if publish != nil {
						return publish()
					}
					return nil
				}
			}
			job, err := s.finishOneTx(ctx, tx, f)
			if err == nil {
				out[i].Job = job
				if f.Outcome == store.Succeeded {
					w.published++
				}
			}
			return err
		}
	}
	s.write(ctx, op)
	for i, f := range fs {
		if err := op.result(i); err != nil {
			// This end, or the transaction as a whole, failed: nothing of it was committed.
			out[i] = store.Finished{Err: fmt.Errorf("%s %s: %w", f.Outcome, f.ID, err)}
		}
	}
	return out
}

// finishOneTx records one Finish inside tx.
func (s *Store) finishOneTx(ctx context.Context, tx *sql.Tx, f store.Finish) (store.Job, error) {
	switch f.Outcome {
	case store.Succeeded:
		return s.succeedTx(ctx, tx, f.ID, f.Attempt, f.Result, f.Publish)
	case store.Failed:
		return s.failTx(ctx, tx, f.ID, f.Attempt, f.Error, f.RetryIn)
	case store.Canceled:
		return s.finishCanceledTx(ctx, tx, f.ID, f.Attempt)
	case store.Requeued:
		return s.requeueTx(ctx, tx, f.ID, f.Attempt, f.Reason)
	}
	return store.Job{}, fmt.Errorf("unknown outcome %d", int(f.Outcome))
}

func (s *Store) succeedTx(ctx context.Context, tx *sql.Tx, id string, attempt int, res store.FileResult, publish func() error) (store.Job, error) {
	job, err := s.finishTx(ctx, tx, id, attempt, store.StatusSucceeded, res)
	if err != nil {
		return store.Job{}, err
	}
	if publish != nil {
		if err := publish(); err != nil {
			return store.Job{}, fmt.Errorf("publish: %w", err)
		}
	}
	if err := s.addEvent(ctx, tx, id, store.EventSucceeded, store.StatusSucceeded, attempt, store.FileDataOf(res)); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

func (s *Store) failTx(ctx context.Context, tx *sql.Tx, id string, attempt int, e store.AttemptError, retryIn time.Duration) (store.Job, error) {
	t := s.now()
	now, retryAt := ms(t), t.Add(max(retryIn, 0))
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.fail).QueryRowContext(ctx,
		e.Permanent, e.Permanent, now, ms(retryAt), e.Code, e.Message, id, attempt))
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, store.ErrLeaseLost
	}
	if err != nil {
		return store.Job{}, err
	}
	data := store.FailureData{Code: e.Code, Message: e.Message, Permanent: e.Permanent}
	typ := store.EventFailed
	switch job.Status {
	case store.StatusPending:
		typ = store.EventAttemptFailed
		at := retryAt.UTC()
		data.RetryAt = &at
	case store.StatusCanceled:
		typ = store.EventCanceled
	}
	if err := s.addEvent(ctx, tx, id, typ, job.Status, attempt, data); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

func (s *Store) requeueTx(ctx context.Context, tx *sql.Tx, id string, attempt int, reason string) (store.Job, error) {
	now := ms(s.now())
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.requeue).QueryRowContext(ctx, now, now, id, attempt))
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, store.ErrLeaseLost
	}
	if err != nil {
		return store.Job{}, err
	}
	if job.Status == store.StatusCanceled {
		if err := s.addEvent(ctx, tx, id, store.EventCanceled, store.StatusCanceled, attempt, store.ReasonData{Reason: reason}); err != nil {
			return store.Job{}, err
		}
		return job, s.followUpsTx(ctx, tx, job)
	}
	return job, s.addEvent(ctx, tx, id, store.EventRequeued, store.StatusPending, attempt, store.ReasonData{Reason: reason})
}

func (s *Store) finishCanceledTx(ctx context.Context, tx *sql.Tx, id string, attempt int) (store.Job, error) {
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.finishCanceled).QueryRowContext(ctx, ms(s.now()), id, attempt))
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, store.ErrLeaseLost
	}
	if err != nil {
		return store.Job{}, err
	}
	if err := s.addEvent(ctx, tx, id, store.EventCanceled, store.StatusCanceled, attempt, nil); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

// stmts are the statements of claims and ends, prepared once on the writer (like
// insertEvent): parsing the claim's UPDATE was a third of a no-op job's CPU time.
type stmts struct {
	claimPick, claimOne                              *sql.Stmt
	finish, fail, requeue, finishCanceled, heartbeat *sql.Stmt
	checkpoint, byID                                 *sql.Stmt
	savepoint, rollbackTo, release                   *sql.Stmt
}

const (
	claimPickSQL = `SELECT ` + jobColumns + ` FROM jobs WHERE status = 'PENDING' AND queue = ? AND run_at <= ?
		ORDER BY priority, run_at, rowid LIMIT ? + 0`
	claimOneSQL = `UPDATE jobs SET status = 'PROCESSING', attempt = attempt + 1,
		worker = ?, started_at = ?, heartbeat_at = ?, progress_rows = 0, progress_total = NULL,
		error_code = NULL, error_message = NULL
		WHERE rowid = ? AND status = 'PENDING'`
	finishSQL = `UPDATE jobs SET status = ?, finished_at = ?, heartbeat_at = ?,
		progress_rows = CASE WHEN ? > 0 THEN ? ELSE progress_rows END,
		progress_total = CASE WHEN ? > 0 THEN ? ELSE progress_total END,
		file_name = ?, file_size = ?, file_sha256 = ?, warnings = ?, worker = NULL, checkpoint = NULL
		WHERE rowid = ? AND attempt = ? AND status = 'PROCESSING'`
	failSQL = `UPDATE jobs SET
		status = CASE WHEN cancel_requested THEN 'CANCELED'
			WHEN ? OR attempt >= max_attempts THEN 'FAILED' ELSE 'PENDING' END,
		finished_at = CASE WHEN cancel_requested OR ? OR attempt >= max_attempts THEN ? ELSE NULL END,
		run_at = ?, worker = NULL, error_code = ?, error_message = ?` + fence + ` RETURNING ` + jobColumns
	requeueSQL = `UPDATE jobs SET
		status = CASE WHEN cancel_requested THEN 'CANCELED' ELSE 'PENDING' END,
		attempt = CASE WHEN cancel_requested THEN attempt ELSE attempt - 1 END,
		finished_at = CASE WHEN cancel_requested THEN ? ELSE NULL END,
		run_at = ?, worker = NULL, heartbeat_at = NULL` + fence + ` RETURNING ` + jobColumns
	heartbeatSQL      = `UPDATE jobs SET heartbeat_at = ?, progress_rows = ?, progress_total = ?` + fence + ` RETURNING cancel_requested`
	checkpointSQL     = `UPDATE jobs SET heartbeat_at = ?, progress_rows = ?, progress_total = ?, checkpoint = ?, checkpoint_attempt = attempt` + fence + ` RETURNING cancel_requested`
	finishCanceledSQL = `UPDATE jobs SET status = 'CANCELED', finished_at = ?, worker = NULL, checkpoint = NULL` + fence + ` RETURNING ` + jobColumns
)

func (st *stmts) prepare(ctx context.Context, w *sql.DB) error {
	return prepareEach(ctx, w, []toPrepare{
		{&st.claimPick, claimPickSQL}, {&st.claimOne, claimOneSQL}, {&st.finish, finishSQL}, {&st.fail, failSQL}, {&st.requeue, requeueSQL},
		{&st.finishCanceled, finishCanceledSQL}, {&st.heartbeat, heartbeatSQL}, {&st.checkpoint, checkpointSQL}, {&st.byID, getSQL},
		{&st.savepoint, `SAVEPOINT finish`}, {&st.rollbackTo, `ROLLBACK TO finish`}, {&st.release, `RELEASE finish`},
	})
}
