package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sheetq/store"
)

// Batched claims and ends (ARCHITECTURE.md, rule 28), on MySQL and MariaDB.
//
// A claim reads the jobs it takes with SELECT ... FOR UPDATE SKIP LOCKED (MySQL 8.0.1+,
// MariaDB 10.6+), so claims of other nodes take the next jobs instead of waiting, then
// updates them by id, in one transaction. Ends go in one transaction with a SAVEPOINT
// each, as on SQLite: an end that fails after writing is rolled back to its savepoint
// and answered alone, and the others commit.

// ClaimBatch takes up to limit runnable PENDING jobs of queue (priority, run_at, then
// insertion order; run_at by the database's clock) in one transaction: each becomes
// PROCESSING with attempt+1, worker and heartbeat stamped, and its "started" event
// (rules 2, 27, 28). The jobs come back in claim order; none is an empty slice.
func (s *Store) ClaimBatch(ctx context.Context, worker, queue string, limit int) ([]store.Job, error) {
	jobs, _, _, err := s.claim(ctx, worker, queue, limit, false)
	return jobs, err
}

// ClaimBatchNext is ClaimBatch and then NextRunIn for the same queue, in the claim's
// transaction (store.ClaimNexter): the read sees the jobs just taken as PROCESSING, so
// they do not count, and a dispatcher whose claim left slots free learns how long it
// may sleep without a transaction of its own. pending is false when no PENDING job of
// queue is left.
func (s *Store) ClaimBatchNext(ctx context.Context, worker, queue string, limit int) (claimed []store.Job, next time.Duration, pending bool, err error) {
	return s.claim(ctx, worker, queue, limit, true)
}

// claim is ClaimBatch, and with next ClaimBatchNext.
func (s *Store) claim(ctx context.Context, worker, queue string, limit int, next bool) (jobs []store.Job, in time.Duration, pending bool, err error) {
	err = s.tx(ctx, func(w *wtx) error {
		jobs, in, pending = []store.Job{}, 0, false
		rows, err := w.QueryContext(ctx, `SELECT id FROM jobs
			WHERE status = 'PENDING' AND queue = ? AND run_at <= ?
			ORDER BY priority, run_at, seq LIMIT ? FOR UPDATE SKIP LOCKED`, queue, w.now, limit)
		if err != nil {
			return err
		}
		var ids []any
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) > 0 {
			args := append([]any{worker, w.now, w.now}, ids...)
			if _, err := w.ExecContext(ctx, `UPDATE jobs SET status = 'PROCESSING', attempt = attempt + 1,
				worker = ?, started_at = ?, heartbeat_at = ?,
				progress_rows = 0, progress_total = NULL, error_code = NULL, error_message = NULL
				WHERE status = 'PENDING' AND id IN (`+placeholders(len(ids))+`)`, args...); err != nil {
				return err
			}
			got, err := queryJobs(ctx, w, `SELECT `+jobColumns+` FROM jobs WHERE id IN (`+placeholders(len(ids))+`)
				ORDER BY priority, run_at, seq`, ids...)
			if err != nil {
				return err
			}
			data := store.StartedData{Worker: worker}
			for _, j := range got {
				if err := w.event(j.ID, store.EventStarted, store.StatusProcessing, j.Attempt, data); err != nil {
					return err
				}
			}
			jobs = got
		}
		if !next {
			return nil
		}
		var us sql.NullInt64
		if err := w.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, ?, MIN(run_at))
			FROM jobs WHERE status = 'PENDING' AND queue = ?`, w.now, queue).Scan(&us); err != nil {
			return err
		}
		in, pending = time.Duration(us.Int64)*time.Microsecond, us.Valid
		return nil
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("claim: %w", err)
	}
	return jobs, in, pending, nil
}

// FinishBatch records fs in one transaction, each as its outcome's operation would alone
// (jobs.Store), and returns what each came to, in order. An end refused by its fence is
// store.ErrLeaseLost and its Publish never runs. An end that fails after its fence
// matched (its Publish, the follow-up hook, a statement) is rolled back to its own
// SAVEPOINT and answered with its error; the others go on. When the transaction fails
// as a whole (BEGIN, COMMIT), every end still in it is answered with that error; after
// a deadlock it goes again whole, and a Publish that returned nil is not called again.
// Nothing is answered before the COMMIT that holds it.
func (s *Store) FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished {
	out := make([]store.Finished, len(fs))
	if len(fs) == 0 {
		return out
	}
	published := make([]bool, len(fs))
	err := s.tx(ctx, func(w *wtx) error {
		clear(out)
		for i, f := range fs {
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
			if _, err := w.ExecContext(ctx, `SAVEPOINT end_one`); err != nil {
				return err
			}
			mark := len(w.events)
			job, err := s.finishOneTx(ctx, w, f)
			switch {
			case err == nil:
				out[i] = store.Finished{Job: job}
			case errors.Is(err, store.ErrLeaseLost):
				// The fenced UPDATE matched no row: nothing was written.
				out[i] = store.Finished{Err: err}
			case isDeadlock(err) || IsUnavailable(err):
				return err // the transaction is gone: all of it goes again, or fails
			default:
				out[i] = store.Finished{Err: err}
				w.events = w.events[:mark]
				if _, rerr := w.ExecContext(ctx, `ROLLBACK TO SAVEPOINT end_one`); rerr != nil {
					return rerr
				}
			}
		}
		return nil
	})
	if err != nil {
		for i := range out {
			if out[i].Err == nil {
				// The transaction failed as a whole: nothing of it was committed.
				out[i] = store.Finished{Err: err}
			}
		}
	}
	for i, f := range fs {
		if out[i].Err != nil {
			out[i] = store.Finished{Err: fmt.Errorf("%s %s: %w", f.Outcome, f.ID, unstorable(out[i].Err))}
		}
	}
	return out
}

// finishOneTx records one Finish inside w. ErrLeaseLost means it wrote nothing.
func (s *Store) finishOneTx(ctx context.Context, w *wtx, f store.Finish) (store.Job, error) {
	switch f.Outcome {
	case store.Succeeded:
		return s.succeedTx(ctx, w, f.ID, f.Attempt, f.Result, f.Publish)
	case store.Failed:
		return s.failTx(ctx, w, f.ID, f.Attempt, f.Error, f.RetryIn)
	case store.Canceled:
		return s.finishCanceledTx(ctx, w, f.ID, f.Attempt)
	case store.Requeued:
		return s.requeueTx(ctx, w, f.ID, f.Attempt, f.Reason)
	}
	return store.Job{}, fmt.Errorf("unknown outcome %d", int(f.Outcome))
}

// withValidText is res with its warnings made storable (text).
func withValidText(res store.FileResult) store.FileResult {
	ws := make([]string, len(res.Warnings))
	for i, w := range res.Warnings {
		ws[i] = text(w)
	}
	if len(ws) == 0 {
		ws = res.Warnings
	}
	res.Warnings = ws
	return res
}

// finishTx ends a running attempt SUCCEEDED with its file (fenced). A finished job's
// total is the rows it wrote, also when it ended before a heartbeat carried the total.
func (s *Store) finishTx(ctx context.Context, w *wtx, id string, attempt int, res store.FileResult) (store.Job, error) {
	res = withValidText(res)
	var warnings any
	if len(res.Warnings) > 0 {
		b, err := json.Marshal(res.Warnings)
		if err != nil {
			return store.Job{}, err
		}
		warnings = string(b)
	}
	return fenced(ctx, w, id, `UPDATE jobs SET status = 'SUCCEEDED', finished_at = ?, heartbeat_at = ?,
		progress_rows = CASE WHEN ? > 0 THEN ? ELSE progress_rows END,
		progress_total = CASE WHEN ? > 0 THEN ? ELSE progress_total END,
		file_name = ?, file_size = ?, file_sha256 = ?, warnings = ?, worker = NULL, checkpoint = NULL`+fence,
		w.now, w.now, res.Rows, res.Rows, res.Rows, res.Rows, nullString(text(res.Name)), res.Size, nullString(res.SHA256), warnings,
		id, attempt)
}

// succeedTx: the fenced UPDATE, then publish (rule 7: only after the fence matched,
// before COMMIT), the event and the follow-ups.
func (s *Store) succeedTx(ctx context.Context, w *wtx, id string, attempt int, res store.FileResult, publish func() error) (store.Job, error) {
	job, err := s.finishTx(ctx, w, id, attempt, res)
	if err != nil {
		return store.Job{}, err
	}
	if publish != nil {
		if err := publish(); err != nil {
			return store.Job{}, fmt.Errorf("publish: %w", err)
		}
	}
	if err := w.event(id, store.EventSucceeded, store.StatusSucceeded, attempt, store.FileDataOf(withValidText(res))); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, w, job)
}

// failTx: a permanent error or the last attempt makes the job FAILED, a requested cancel
// CANCELED, anything else PENDING to run retryIn from now by the database's clock.
func (s *Store) failTx(ctx context.Context, w *wtx, id string, attempt int, e store.AttemptError, retryIn time.Duration) (store.Job, error) {
	// SET assigns left to right: finished_at reads the status just set.
	job, err := fenced(ctx, w, id, `UPDATE jobs SET
		status = CASE WHEN cancel_requested THEN 'CANCELED'
			WHEN ? OR attempt >= max_attempts THEN 'FAILED' ELSE 'PENDING' END,
		finished_at = CASE WHEN status IN ('CANCELED', 'FAILED') THEN ? ELSE NULL END,
		run_at = ? + INTERVAL ? MICROSECOND, worker = NULL, error_code = ?, error_message = ?`+fence,
		e.Permanent, w.now, w.now, micros(max(retryIn, 0)), text(e.Code), text(e.Message), id, attempt)
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
	if err := w.event(id, typ, job.Status, attempt, data); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, w, job)
}

// requeueTx puts a running attempt back to PENDING without spending it (rule 9), or
// makes the job CANCELED when a cancel was requested (its attempt stays spent).
func (s *Store) requeueTx(ctx context.Context, w *wtx, id string, attempt int, reason string) (store.Job, error) {
	job, err := fenced(ctx, w, id, `UPDATE jobs SET
		finished_at = CASE WHEN cancel_requested THEN ? ELSE NULL END,
		attempt = CASE WHEN cancel_requested THEN attempt ELSE attempt - 1 END,
		status = CASE WHEN cancel_requested THEN 'CANCELED' ELSE 'PENDING' END,
		run_at = ?, worker = NULL, heartbeat_at = NULL`+fence,
		w.now, w.now, id, attempt)
	if err != nil {
		return store.Job{}, err
	}
	if job.Status == store.StatusCanceled {
		if err := w.event(id, store.EventCanceled, store.StatusCanceled, attempt, store.ReasonData{Reason: text(reason)}); err != nil {
			return store.Job{}, err
		}
		return job, s.followUpsTx(ctx, w, job)
	}
	return job, w.event(id, store.EventRequeued, store.StatusPending, attempt, store.ReasonData{Reason: text(reason)})
}

// finishCanceledTx ends a running attempt that stopped because it was cancelled.
func (s *Store) finishCanceledTx(ctx context.Context, w *wtx, id string, attempt int) (store.Job, error) {
	job, err := fenced(ctx, w, id, `UPDATE jobs SET status = 'CANCELED', finished_at = ?, worker = NULL, checkpoint = NULL`+fence,
		w.now, id, attempt)
	if err != nil {
		return store.Job{}, err
	}
	if err := w.event(id, store.EventCanceled, store.StatusCanceled, attempt, nil); err != nil {
		return store.Job{}, err
	}
	return job, s.followUpsTx(ctx, w, job)
}
