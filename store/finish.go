package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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

// Claim takes the next runnable PENDING job of queue: ClaimBatch with a limit of one. It
// returns ErrNotFound when nothing in queue is runnable.
func (s *Store) Claim(ctx context.Context, worker, queue string) (Job, error) {
	jobs, err := s.ClaimBatch(ctx, worker, queue, 1)
	if err != nil {
		return Job{}, err
	}
	if len(jobs) == 0 {
		return Job{}, ErrNotFound
	}
	return jobs[0], nil
}

// ClaimBatch atomically takes up to limit runnable PENDING jobs of queue (priority, then
// run_at, then insertion order), sets each PROCESSING, increments its attempt (the
// fencing token), stamps worker and heartbeat and appends its "started" event, all in one
// transaction. The jobs come back in claim order; none is an empty slice and no error.
// jobs_claim (migration 0009) starts with the queue, so the pick reads the index in
// order and stops after limit entries.
func (s *Store) ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]Job, error) {
	if queue == "" {
		return nil, errors.New("claim: a queue is required")
	}
	if limit < 1 {
		return nil, fmt.Errorf("claim: limit %d, want at least 1", limit)
	}
	var claimed []Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		claimed = claimed[:0]
		now := ms(s.now())
		rows, err := tx.StmtContext(ctx, s.stmts.claim).QueryContext(ctx, worker, now, now, queue, now, limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return err
			}
			claimed = append(claimed, j)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// RETURNING gives rows in no promised order: put them back in claim order.
		slices.SortFunc(claimed, func(a, b Job) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.Seq, b.Seq))
		})
		for _, j := range claimed {
			if err := s.addEvent(ctx, tx, j.ID, EventStarted, StatusProcessing, j.Attempt, StartedData{Worker: worker}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return claimed, nil
}

// Outcome is how a running attempt ends, in a Finish.
type Outcome int

// The outcomes a Finish records; each is what the method of the same name does alone.
const (
	// Succeeded: Succeed (Result, Publish).
	Succeeded Outcome = iota + 1
	// Failed: Fail (Error, RetryIn).
	Failed
	// Canceled: FinishCanceled.
	Canceled
	// Requeued: Requeue (Reason).
	Requeued
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeed"
	case Failed:
		return "fail"
	case Canceled:
		return "finish canceled"
	case Requeued:
		return "requeue"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Finish is the end of one running attempt, fenced by ID and Attempt (rule 3).
type Finish struct {
	ID      string
	Attempt int
	Outcome Outcome

	// Result and Publish, for Succeeded: Publish (may be nil) runs inside the
	// transaction once the fence has matched, and its error commits nothing of this job.
	Result  FileResult
	Publish func() error
	// Error and RetryIn, for Failed.
	Error   AttemptError
	RetryIn time.Duration
	// Reason, for Requeued.
	Reason string
}

// Finished is what one Finish came to: the job as committed, or the error that kept
// this Finish (and only it) from committing.
type Finished struct {
	Job Job
	Err error
}

// FinishBatch records fs in one transaction, each as its Outcome's method would alone,
// and returns what each came to, in order. Each Finish runs inside a SAVEPOINT of its
// own: one that fails (ErrLeaseLost from its fence, a publish error, an error of the
// follow-up hook) is rolled back alone and answered with its error, and the others
// commit. When the transaction itself fails (it cannot begin, or COMMIT fails), nothing
// is committed and every Finish is answered with that error. Nothing is answered before
// COMMIT has returned (rule 1's promise, kept for ends).
func (s *Store) FinishBatch(ctx context.Context, fs []Finish) []Finished {
	out := make([]Finished, len(fs))
	if len(fs) == 0 {
		return out
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if len(fs) == 1 {
			// The transaction is this end's alone: its failure needs no savepoint.
			job, err := s.finishOneTx(ctx, tx, fs[0])
			out[0] = Finished{Job: job, Err: err}
			return err
		}
		for i, f := range fs {
			if _, err := tx.StmtContext(ctx, s.stmts.savepoint).ExecContext(ctx); err != nil {
				return err
			}
			job, err := s.finishOneTx(ctx, tx, f)
			if err != nil {
				if _, err := tx.StmtContext(ctx, s.stmts.rollbackTo).ExecContext(ctx); err != nil {
					return err
				}
				job = Job{}
			}
			out[i] = Finished{Job: job, Err: err}
			if _, err := tx.StmtContext(ctx, s.stmts.release).ExecContext(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	for i, f := range fs {
		if out[i].Err == nil && err != nil {
			// The transaction failed as a whole: nothing of it was committed.
			out[i] = Finished{Err: err}
		}
		if out[i].Err != nil {
			out[i] = Finished{Err: fmt.Errorf("%s %s: %w", f.Outcome, f.ID, out[i].Err)}
		}
	}
	return out
}

// finishOneTx records one Finish inside tx.
func (s *Store) finishOneTx(ctx context.Context, tx *sql.Tx, f Finish) (Job, error) {
	switch f.Outcome {
	case Succeeded:
		return s.succeedTx(ctx, tx, f.ID, f.Attempt, f.Result, f.Publish)
	case Failed:
		return s.failTx(ctx, tx, f.ID, f.Attempt, f.Error, f.RetryIn)
	case Canceled:
		return s.finishCanceledTx(ctx, tx, f.ID, f.Attempt)
	case Requeued:
		return s.requeueTx(ctx, tx, f.ID, f.Attempt, f.Reason)
	}
	return Job{}, fmt.Errorf("unknown outcome %d", int(f.Outcome))
}

// finishOne records one Finish in a transaction of its own.
func (s *Store) finishOne(ctx context.Context, f Finish) (Job, error) {
	r := s.FinishBatch(ctx, []Finish{f})[0]
	return r.Job, r.Err
}

// Succeed marks a running attempt SUCCEEDED. publish (the rename of the part file into
// place) runs inside the write transaction after the fence has matched, so a lost lease
// never publishes, and nothing can recover or re-claim the job between the check and the
// rename. If publish fails nothing is committed. A crash after publish and before commit
// leaves a PROCESSING row with its file in place, which recovery completes from the file.
func (s *Store) Succeed(ctx context.Context, id string, attempt int, res FileResult, publish func() error) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Succeeded, Result: res, Publish: publish})
}

func (s *Store) succeedTx(ctx context.Context, tx *sql.Tx, id string, attempt int, res FileResult, publish func() error) (Job, error) {
	job, err := s.finishTx(ctx, tx, id, attempt, StatusSucceeded, res)
	if err != nil {
		return Job{}, err
	}
	if publish != nil {
		if err := publish(); err != nil {
			return Job{}, fmt.Errorf("publish: %w", err)
		}
	}
	if err := s.addEvent(ctx, tx, id, EventSucceeded, StatusSucceeded, attempt, fileData(res)); err != nil {
		return Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

// Fail records a failed attempt. A permanent error, or an attempt that used the last of
// max_attempts, makes the job FAILED; otherwise it goes back to PENDING to run retryIn
// from now, by the store's clock (the caller passes a duration, never a time of its own
// clock, so that a store may keep time by its database). A job whose cancel was requested
// while it ran becomes CANCELED instead of running again.
func (s *Store) Fail(ctx context.Context, id string, attempt int, e AttemptError, retryIn time.Duration) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Failed, Error: e, RetryIn: retryIn})
}

func (s *Store) failTx(ctx context.Context, tx *sql.Tx, id string, attempt int, e AttemptError, retryIn time.Duration) (Job, error) {
	t := s.now()
	now, retryAt := ms(t), t.Add(max(retryIn, 0))
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.fail).QueryRowContext(ctx,
		e.Permanent, e.Permanent, now, ms(retryAt), e.Code, e.Message, id, attempt))
	if errors.Is(err, ErrNotFound) {
		return Job{}, ErrLeaseLost
	}
	if err != nil {
		return Job{}, err
	}
	data := FailureData{Code: e.Code, Message: e.Message, Permanent: e.Permanent}
	typ := EventFailed
	switch job.Status {
	case StatusPending:
		typ = EventAttemptFailed
		at := retryAt.UTC()
		data.RetryAt = &at
	case StatusCanceled:
		typ = EventCanceled
	}
	if err := s.addEvent(ctx, tx, id, typ, job.Status, attempt, data); err != nil {
		return Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

// Requeue puts a running attempt back to PENDING without spending it, for shutdown
// (rule 9). attempt is decremented so the next claim reuses the number; this is safe
// because the execution that held it has stopped. A job whose cancel was requested
// becomes CANCELED instead (its attempt stays spent).
func (s *Store) Requeue(ctx context.Context, id string, attempt int, reason string) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Requeued, Reason: reason})
}

func (s *Store) requeueTx(ctx context.Context, tx *sql.Tx, id string, attempt int, reason string) (Job, error) {
	now := ms(s.now())
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.requeue).QueryRowContext(ctx, now, now, id, attempt))
	if errors.Is(err, ErrNotFound) {
		return Job{}, ErrLeaseLost
	}
	if err != nil {
		return Job{}, err
	}
	if job.Status == StatusCanceled {
		if err := s.addEvent(ctx, tx, id, EventCanceled, StatusCanceled, attempt, ReasonData{Reason: reason}); err != nil {
			return Job{}, err
		}
		return job, s.followUpsTx(ctx, tx, job)
	}
	return job, s.addEvent(ctx, tx, id, EventRequeued, StatusPending, attempt, ReasonData{Reason: reason})
}

// FinishCanceled ends a running attempt that stopped because it was cancelled.
func (s *Store) FinishCanceled(ctx context.Context, id string, attempt int) (Job, error) {
	return s.finishOne(ctx, Finish{ID: id, Attempt: attempt, Outcome: Canceled})
}

func (s *Store) finishCanceledTx(ctx context.Context, tx *sql.Tx, id string, attempt int) (Job, error) {
	job, err := scanJob(tx.StmtContext(ctx, s.stmts.finishCanceled).QueryRowContext(ctx, ms(s.now()), id, attempt))
	if errors.Is(err, ErrNotFound) {
		return Job{}, ErrLeaseLost
	}
	if err != nil {
		return Job{}, err
	}
	if err := s.addEvent(ctx, tx, id, EventCanceled, StatusCanceled, attempt, nil); err != nil {
		return Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

// stmts are the statements of claims and ends, prepared once on the writer (like
// insertEvent): parsing the claim's UPDATE was a third of a no-op job's CPU time.
type stmts struct {
	claim, finish, fail, requeue, finishCanceled, heartbeat *sql.Stmt
	savepoint, rollbackTo, release                          *sql.Stmt
}

const (
	claimSQL = `UPDATE jobs SET status = 'PROCESSING', attempt = attempt + 1,
		worker = ?, started_at = ?, heartbeat_at = ?, progress_rows = 0, progress_total = NULL,
		error_code = NULL, error_message = NULL
		WHERE rowid IN (SELECT rowid FROM jobs WHERE status = 'PENDING' AND queue = ? AND run_at <= ?
			ORDER BY priority, run_at, rowid LIMIT ?)
		RETURNING ` + jobColumns
	finishSQL = `UPDATE jobs SET status = ?, finished_at = ?, heartbeat_at = ?,
		progress_rows = CASE WHEN ? > 0 THEN ? ELSE progress_rows END,
		progress_total = CASE WHEN ? > 0 THEN ? ELSE progress_total END,
		file_name = ?, file_size = ?, file_sha256 = ?, warnings = ?, worker = NULL` + fence + ` RETURNING ` + jobColumns
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
	finishCanceledSQL = `UPDATE jobs SET status = 'CANCELED', finished_at = ?, worker = NULL` + fence + ` RETURNING ` + jobColumns
)

func (st *stmts) prepare(ctx context.Context, w *sql.DB) error {
	return prepareEach(ctx, w, []toPrepare{
		{&st.claim, claimSQL}, {&st.finish, finishSQL}, {&st.fail, failSQL}, {&st.requeue, requeueSQL},
		{&st.finishCanceled, finishCanceledSQL}, {&st.heartbeat, heartbeatSQL},
		{&st.savepoint, `SAVEPOINT finish`}, {&st.rollbackTo, `ROLLBACK TO finish`}, {&st.release, `RELEASE finish`},
	})
}
