package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// Batched claims and ends (ARCHITECTURE.md, rule 28), on PostgreSQL.
//
// A claim is one statement. The MATERIALIZED CTE picks the jobs and locks them, with the
// LIMIT inside it: the planner cannot fold it into the UPDATE, so no more than limit rows
// are ever locked, and SKIP LOCKED lets claims of other nodes take the next jobs instead
// of waiting. It locks FOR NO KEY UPDATE, the lock the UPDATE takes anyway, which unlike
// FOR UPDATE does not conflict with the key-share lock that inserting a job_events row
// takes on its job through the foreign key.
//
// Ends are one transaction without a SAVEPOINT per end: each subtransaction past 64 in
// one transaction overflows PostgreSQL's per-backend cache and slows every session that
// checks row visibility (ARCHITECTURE.md, "Ready for a second store"). An end refused by
// its fence wrote nothing (its UPDATE matched no row), so it is answered ErrLeaseLost and
// the transaction goes on; an end that fails after writing rolls the transaction back,
// is answered with its error alone, and the others go again in a new transaction, as
// the SQLite store's enqueue group commit does (rule 17).

const claimSQL = `WITH picked AS MATERIALIZED (
	SELECT id FROM jobs
	WHERE status = 'PENDING' AND queue = $2 AND run_at <= ` + nowSQL + `
	ORDER BY priority, run_at, seq
	LIMIT $3
	FOR NO KEY UPDATE SKIP LOCKED
), claimed AS (
	UPDATE jobs SET status = 'PROCESSING', attempt = jobs.attempt + 1,
		worker = $4, started_at = ` + nowSQL + `, heartbeat_at = ` + nowSQL + `,
		progress_rows = 0, progress_total = NULL, error_code = NULL, error_message = NULL
	FROM picked WHERE jobs.id = picked.id
	RETURNING ` + claimedColumns + `
), started AS (
	INSERT INTO job_events (job_id, at, type, status, attempt, data)
	SELECT id, ` + nowSQL + `, 'started', 'PROCESSING', attempt, $5::json FROM claimed
	ORDER BY priority, run_at, seq
)
SELECT ` + jobColumns + ` FROM claimed ORDER BY priority, run_at, seq`

// claimedColumns are jobColumns qualified by the table, for the UPDATE ... FROM.
const claimedColumns = `jobs.id, jobs.kind, jobs.args, jobs.status, jobs.priority, jobs.run_at, jobs.attempt,
	jobs.max_attempts, jobs.worker, jobs.created_at, jobs.started_at, jobs.heartbeat_at, jobs.finished_at,
	jobs.progress_rows, jobs.progress_total, jobs.cancel_requested, jobs.error_code, jobs.error_message,
	jobs.file_name, jobs.file_size, jobs.file_sha256, jobs.idempotency_key, jobs.request_hash, jobs.warnings,
	jobs.created_by, jobs.notify_url, jobs.parent_id, jobs.queue, jobs.attempt_base, jobs.seq`

// ClaimBatch takes up to limit runnable PENDING jobs of queue (priority, run_at, then
// insertion order; run_at by the database's clock) in one statement: each becomes
// PROCESSING with attempt+1, worker and heartbeat stamped, and its "started" event
// (rules 2, 27, 28). The jobs come back in claim order; none is an empty slice.
func (s *Store) ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]store.Job, error) {
	data, err := json.Marshal(store.StartedData{Worker: worker})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	jobs, err := s.queryJobs(ctx, s.pool, claimSQL, s.now(), queue, limit, worker, string(data))
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if jobs == nil {
		jobs = []store.Job{}
	}
	return jobs, nil
}

// nextRunSQL is NextRunIn's query: microseconds until the earliest run_at of a PENDING
// job of queue $2, NULL when there is none.
const nextRunSQL = `SELECT (extract(epoch FROM min(run_at) - ` + nowSQL + `) * 1000000)::bigint
	FROM jobs WHERE status = 'PENDING' AND queue = $2`

// ClaimBatchNext is ClaimBatch and then NextRunIn for the same queue, sent together (a
// pgx batch: one round trip and one implicit transaction, where the two methods take
// two round trips). The read runs after the claim in that transaction, so the jobs just
// taken are PROCESSING to it and do not count. pending is false when no PENDING job of
// queue is left (NextRunIn's store.ErrNotFound). A dispatcher whose claim left slots
// free learns from it how long it may sleep (jobs.ClaimNexter).
func (s *Store) ClaimBatchNext(ctx context.Context, worker, queue string, limit int) (claimed []store.Job, next time.Duration, pending bool, err error) {
	data, err := json.Marshal(store.StartedData{Worker: worker})
	if err != nil {
		return nil, 0, false, fmt.Errorf("claim: %w", err)
	}
	var b pgx.Batch
	now := s.now()
	b.Queue(claimSQL, now, queue, limit, worker, string(data))
	b.Queue(nextRunSQL, now, queue)
	br := s.pool.SendBatch(ctx, &b)
	claimed, err = scanJobs(br)
	var us *int64
	if err == nil {
		err = br.QueryRow().Scan(&us)
	}
	// Close reads what is left and reports the implicit transaction's COMMIT: nothing
	// is claimed until it returns nil.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("claim: %w", err)
	}
	if claimed == nil {
		claimed = []store.Job{}
	}
	if us == nil {
		return claimed, 0, false, nil
	}
	return claimed, time.Duration(*us) * time.Microsecond, true, nil
}

// scanJobs reads the jobs of a batch's next result.
func scanJobs(br pgx.BatchResults) ([]store.Job, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// errEndFailed rolls back a FinishBatch transaction in which one end failed after writing.
var errEndFailed = errors.New("an end failed after writing")

// FinishBatch records fs in one transaction, each as its outcome's operation would alone
// (jobs.Store), and returns what each came to, in order. An end refused by its fence is
// store.ErrLeaseLost and its Publish never runs. An end that fails after its fence
// matched (its Publish, the follow-up hook, a statement) rolls back the transaction and
// is answered with its error; the ends left go again in a new transaction. A Publish
// that returned nil is not called again in that new transaction: the file it put in
// place stays there through the rollback (a crash before the new COMMIT leaves what any
// crash after a publish leaves, rule 5). When a transaction fails as a whole (BEGIN or
// COMMIT), every end still in it is answered with that error. Nothing is answered
// before the COMMIT that holds it.
func (s *Store) FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished {
	out := make([]store.Finished, len(fs))
	if len(fs) == 0 {
		return out
	}
	alone := make([]bool, len(fs)) // answered with an error of its own, out of the batch
	// A Publish that returned nil in a transaction that was rolled back has done its
	// work all the same (a rename is not undone): it is not run again.
	published := make([]bool, len(fs))
	for {
		failed := -1
		err := s.tx(ctx, func(tx pgx.Tx) error {
			// Successes with nothing to publish (a bucket's file is visible already, and
			// its key is the attempt's own) go in one round trip; the rest one by one.
			piped, err := s.succeedPiped(ctx, tx, fs, alone, out)
			if err != nil {
				failed = piped
				return errEndFailed
			}
			for i, f := range fs {
				if alone[i] || pipeable(f) {
					continue
				}
				if f.Publish != nil {
					if published[i] {
						f.Publish = nil
					} else {
						publish := f.Publish
						f.Publish = func() error {
							err := publish()
							published[i] = err == nil
							return err
						}
					}
				}
				job, err := s.finishOneTx(ctx, tx, f)
				switch {
				case err == nil:
					out[i] = store.Finished{Job: job}
				case errors.Is(err, store.ErrLeaseLost):
					// The fenced UPDATE matched no row: nothing was written.
					out[i] = store.Finished{Err: err}
				default:
					failed, out[i] = i, store.Finished{Err: err}
					return errEndFailed
				}
			}
			return nil
		})
		if failed >= 0 {
			alone[failed] = true
			if remaining(alone) {
				continue
			}
			break
		}
		if err != nil {
			for i := range out {
				if !alone[i] && out[i].Err == nil {
					// The transaction failed as a whole: nothing of it was committed.
					out[i] = store.Finished{Err: err}
				}
			}
		}
		break
	}
	for i, f := range fs {
		if out[i].Err != nil {
			out[i] = store.Finished{Err: fmt.Errorf("%s %s: %w", f.Outcome, f.ID, unstorable(out[i].Err))}
		}
	}
	return out
}

// pipeable reports whether f is a success that can go in succeedPiped's pipeline: it has
// nothing to publish, so no Go code must run between its fence and its event.
func pipeable(f store.Finish) bool { return f.Outcome == store.Succeeded && f.Publish == nil }

// succeedSQL is one fenced success with its event, in one statement: the event is
// inserted only for the row the fence matched, so a lost lease writes nothing.
const succeedSQL = `WITH done AS (
	UPDATE jobs SET status = 'SUCCEEDED', finished_at = ` + nowSQL + `, heartbeat_at = ` + nowSQL + `,
		progress_rows = CASE WHEN $4::bigint > 0 THEN $4 ELSE progress_rows END,
		progress_total = CASE WHEN $4::bigint > 0 THEN $4 ELSE progress_total END,
		file_name = $5, file_size = $6, file_sha256 = $7, warnings = $8::json, worker = NULL, checkpoint = NULL` + fence + `
	RETURNING ` + jobColumns + `
), event AS (
	INSERT INTO job_events (job_id, at, type, status, attempt, data)
	SELECT id, ` + nowSQL + `, '` + store.EventSucceeded + `', '` + string(store.StatusSucceeded) + `', $3, $9::json FROM done
)
SELECT ` + jobColumns + ` FROM done`

// succeedPiped records every pipeable success of fs (not alone) in tx, sending their
// statements together (a pgx batch: one round trip, where one statement per end would
// take two round trips each), then runs their follow-ups. It fills out for them; on an
// error it returns the index of the end that failed.
func (s *Store) succeedPiped(ctx context.Context, tx pgx.Tx, fs []store.Finish, alone []bool, out []store.Finished) (int, error) {
	var b pgx.Batch
	var idx []int
	for i, f := range fs {
		if alone[i] || !pipeable(f) {
			continue
		}
		res := withoutNUL(f.Result)
		var warnings *string
		if len(res.Warnings) > 0 {
			w, err := json.Marshal(res.Warnings)
			if err != nil {
				return i, err
			}
			ws := string(w)
			warnings = &ws
		}
		data, err := eventPayload(store.FileDataOf(res))
		if err != nil {
			return i, err
		}
		b.Queue(succeedSQL, s.now(), f.ID, f.Attempt, res.Rows, nullString(res.Name), res.Size,
			nullString(res.SHA256), warnings, data)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return -1, nil
	}
	br := tx.SendBatch(ctx, &b)
	for _, i := range idx {
		job, err := scanJob(br.QueryRow())
		switch {
		case err == nil:
			out[i] = store.Finished{Job: job}
		case errors.Is(err, store.ErrNotFound):
			out[i] = store.Finished{Err: store.ErrLeaseLost}
		default:
			br.Close()
			out[i] = store.Finished{Err: err}
			return i, err
		}
	}
	if err := br.Close(); err != nil {
		return idx[len(idx)-1], err
	}
	for _, i := range idx {
		if out[i].Err == nil {
			if err := s.followUpsTx(ctx, tx, out[i].Job); err != nil {
				out[i] = store.Finished{Err: err}
				return i, err
			}
		}
	}
	return -1, nil
}

// remaining reports whether an end is still to be tried.
func remaining(alone []bool) bool {
	for _, a := range alone {
		if !a {
			return true
		}
	}
	return false
}

// finishOneTx records one Finish inside tx. ErrLeaseLost means it wrote nothing.
func (s *Store) finishOneTx(ctx context.Context, tx pgx.Tx, f store.Finish) (store.Job, error) {
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

// finishTx ends a running attempt SUCCEEDED with its file (fenced). A finished job's
// total is the rows it wrote, also when it ended before a heartbeat carried the total.
func (s *Store) finishTx(ctx context.Context, tx pgx.Tx, id string, attempt int, res store.FileResult) (store.Job, error) {
	res = withoutNUL(res)
	var warnings *string
	if len(res.Warnings) > 0 {
		b, err := json.Marshal(res.Warnings)
		if err != nil {
			return store.Job{}, err
		}
		w := string(b)
		warnings = &w
	}
	job, err := scanJob(tx.QueryRow(ctx, `UPDATE jobs SET status = 'SUCCEEDED', finished_at = `+nowSQL+`, heartbeat_at = `+nowSQL+`,
		progress_rows = CASE WHEN $4::bigint > 0 THEN $4 ELSE progress_rows END,
		progress_total = CASE WHEN $4::bigint > 0 THEN $4 ELSE progress_total END,
		file_name = $5, file_size = $6, file_sha256 = $7, warnings = $8::json, worker = NULL, checkpoint = NULL`+fence+` RETURNING `+jobColumns,
		s.now(), id, attempt, res.Rows, nullString(res.Name), res.Size, nullString(res.SHA256), warnings))
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, store.ErrLeaseLost
	}
	return job, err
}

// succeedTx: the fenced UPDATE, then publish (rule 7: only after the fence matched,
// before COMMIT), the event and the follow-ups.
func (s *Store) succeedTx(ctx context.Context, tx pgx.Tx, id string, attempt int, res store.FileResult, publish func() error) (store.Job, error) {
	res = withoutNUL(res)
	job, err := s.finishTx(ctx, tx, id, attempt, res)
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

// failTx: a permanent error or the last attempt makes the job FAILED, a requested cancel
// CANCELED, anything else PENDING to run retryIn from now by the database's clock.
func (s *Store) failTx(ctx context.Context, tx pgx.Tx, id string, attempt int, e store.AttemptError, retryIn time.Duration) (store.Job, error) {
	job, err := scanJob(tx.QueryRow(ctx, `UPDATE jobs SET
		status = CASE WHEN cancel_requested THEN 'CANCELED'
			WHEN $4::boolean OR attempt >= max_attempts THEN 'FAILED' ELSE 'PENDING' END,
		finished_at = CASE WHEN cancel_requested OR $4::boolean OR attempt >= max_attempts THEN `+nowSQL+` ELSE NULL END,
		run_at = `+nowSQL+` + $5 * interval '1 microsecond', worker = NULL, error_code = $6, error_message = $7`+fence+
		` RETURNING `+jobColumns,
		s.now(), id, attempt, e.Permanent, micros(max(retryIn, 0)), noNUL(e.Code), noNUL(e.Message)))
	if errors.Is(err, store.ErrNotFound) {
		return store.Job{}, store.ErrLeaseLost
	}
	if err != nil {
		return store.Job{}, err
	}
	data := store.FailureData{Code: job.ErrorCode, Message: job.ErrorMessage, Permanent: e.Permanent}
	typ := store.EventFailed
	switch job.Status {
	case store.StatusPending:
		typ = store.EventAttemptFailed
		at := job.RunAt
		data.RetryAt = &at
	case store.StatusCanceled:
		typ = store.EventCanceled
	}
	if err := s.addEvent(ctx, tx, id, typ, job.Status, attempt, data); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, tx, job)
}

// requeueTx puts a running attempt back to PENDING without spending it (rule 9), or
// makes the job CANCELED when a cancel was requested (its attempt stays spent).
func (s *Store) requeueTx(ctx context.Context, tx pgx.Tx, id string, attempt int, reason string) (store.Job, error) {
	job, err := scanJob(tx.QueryRow(ctx, `UPDATE jobs SET
		status = CASE WHEN cancel_requested THEN 'CANCELED' ELSE 'PENDING' END,
		attempt = CASE WHEN cancel_requested THEN attempt ELSE attempt - 1 END,
		finished_at = CASE WHEN cancel_requested THEN `+nowSQL+` ELSE NULL END,
		run_at = `+nowSQL+`, worker = NULL, heartbeat_at = NULL`+fence+` RETURNING `+jobColumns,
		s.now(), id, attempt))
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

// finishCanceledTx ends a running attempt that stopped because it was cancelled.
func (s *Store) finishCanceledTx(ctx context.Context, tx pgx.Tx, id string, attempt int) (store.Job, error) {
	job, err := scanJob(tx.QueryRow(ctx, `UPDATE jobs SET status = 'CANCELED', finished_at = `+nowSQL+`, worker = NULL, checkpoint = NULL`+
		fence+` RETURNING `+jobColumns, s.now(), id, attempt))
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
