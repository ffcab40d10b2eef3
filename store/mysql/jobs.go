package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"sheetq/store"
)

// fence is the condition every update of a running execution carries (rule 3), with the
// id and the attempt as its two parameters.
const fence = ` WHERE id = ? AND attempt = ? AND status = 'PROCESSING'`

// matched reports whether an UPDATE matched a row (the DSN's clientFoundRows makes
// RowsAffected count matched rows, also those it left as they were).
func matched(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n > 0, err
}

// Heartbeat (fenced) stamps heartbeat_at and progress (total < 0: unknown) and reports
// whether a cancel was requested (rule 4).
func (s *Store) Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error) {
	return s.heartbeat(ctx, id, attempt, rows, total, false, nil)
}

// SaveCheckpoint is Heartbeat that also replaces the job's checkpoint (nil clears it),
// in the same fenced update (rule 30).
func (s *Store) SaveCheckpoint(ctx context.Context, id string, attempt int, rows, total int64, data []byte) (cancelRequested bool, err error) {
	return s.heartbeat(ctx, id, attempt, rows, total, true, data)
}

// heartbeat is Heartbeat, and with checkpoint SaveCheckpoint: one fenced UPDATE, then the
// read of cancel_requested.
func (s *Store) heartbeat(ctx context.Context, id string, attempt int, rows, total int64, checkpoint bool, data []byte) (bool, error) {
	var t any
	if total >= 0 {
		t = total
	}
	what := "heartbeat"
	q, args := `UPDATE jobs SET heartbeat_at = `+nowSQL+`, progress_rows = ?, progress_total = ?`+fence, []any{s.now(), rows, t, id, attempt}
	if checkpoint {
		what = "checkpoint"
		q = `UPDATE jobs SET heartbeat_at = ` + nowSQL + `, progress_rows = ?, progress_total = ?, checkpoint = ?, checkpoint_attempt = attempt` + fence
		args = []any{s.now(), rows, t, data, id, attempt}
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	if ok, err := matched(res); err != nil || !ok {
		if err == nil {
			err = store.ErrLeaseLost
		}
		return false, err
	}
	var c bool
	if err := s.db.QueryRowContext(ctx, `SELECT cancel_requested FROM jobs WHERE id = ?`, id).Scan(&c); err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return c, nil
}

// Checkpoint reads the job's checkpoint (nil: none).
func (s *Store) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT checkpoint FROM jobs WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	return data, nil
}

// Get returns one job, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (store.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Job{}, fmt.Errorf("get job: %w", err)
	}
	return j, err
}

// getForUpdate reads a job inside w and locks its row, so that the check that follows
// and the update it guards see the same row.
func getForUpdate(ctx context.Context, w *wtx, id string) (store.Job, error) {
	return scanJob(w.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ? FOR UPDATE`, id))
}

// reread reads a job inside w after an update, as the update left it.
func reread(ctx context.Context, w *wtx, id string) (store.Job, error) {
	return scanJob(w.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
}

// fenced runs a fenced UPDATE in w and reads the job back; no row is
// store.ErrLeaseLost.
func fenced(ctx context.Context, w *wtx, id string, q string, args ...any) (store.Job, error) {
	res, err := w.ExecContext(ctx, q, args...)
	if err != nil {
		return store.Job{}, err
	}
	ok, err := matched(res)
	if err != nil {
		return store.Job{}, err
	}
	if !ok {
		return store.Job{}, store.ErrLeaseLost
	}
	return reread(ctx, w, id)
}

// CompleteFromFile (fenced) makes an orphan whose file was published SUCCEEDED, without
// running it again (rule 5).
func (s *Store) CompleteFromFile(ctx context.Context, id string, attempt int, res store.FileResult) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(w *wtx) error {
		var err error
		if job, err = s.finishTx(ctx, w, id, attempt, res); err != nil {
			return err
		}
		if err := w.event(id, store.EventCompletedFromFile, store.StatusSucceeded, attempt, store.FileDataOf(withValidText(res))); err != nil {
			return err
		}
		return s.followUpsTx(ctx, w, job)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("complete %s from file: %w", id, unstorable(err))
	}
	return job, nil
}

// Recover (fenced) takes back an attempt whose heartbeat was lost; the attempt counts as
// spent unless it saved a checkpoint: PENDING to run retryIn from now by the database's
// clock, FAILED out of attempts, or CANCELED when a cancel was requested (rule 5).
func (s *Store) Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(w *wtx) error {
		var err error
		// SET assigns left to right: status and finished_at read max_attempts before it
		// changes; an attempt that saved a checkpoint does not spend the budget (rule 30).
		job, err = fenced(ctx, w, id, `UPDATE jobs SET
			status = CASE WHEN cancel_requested THEN 'CANCELED'
				WHEN attempt >= max_attempts AND NOT (checkpoint_attempt <=> attempt) THEN 'FAILED' ELSE 'PENDING' END,
			finished_at = CASE WHEN status IN ('CANCELED', 'FAILED') THEN ? ELSE NULL END,
			max_attempts = CASE WHEN checkpoint_attempt <=> attempt THEN max_attempts + 1 ELSE max_attempts END,
			run_at = ? + INTERVAL ? MICROSECOND, worker = NULL, error_code = 'lost', error_message = ?`+
			` WHERE id = ? AND attempt = ? AND status = 'PROCESSING'`,
			w.now, w.now, micros(max(retryIn, 0)), text(reason), id, attempt)
		if err != nil {
			return err
		}
		typ := store.RecoveredEvent(job.Status)
		if err := w.event(id, typ, job.Status, attempt, store.LostData{Code: "lost", Message: job.ErrorMessage}); err != nil {
			return err
		}
		return s.followUpsTx(ctx, w, job)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("recover %s: %w", id, unstorable(err))
	}
	return job, nil
}

// Cancel makes a PENDING job CANCELED at once and sets cancel_requested on a PROCESSING
// one, which its worker sees through its engine or its next heartbeat (rule 8). A
// finished job is store.ErrFinished.
func (s *Store) Cancel(ctx context.Context, id string) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(w *wtx) error {
		var err error
		if job, err = getForUpdate(ctx, w, id); err != nil {
			return err
		}
		step, err := store.CancelStepOf(job)
		switch step {
		case store.CancelNow:
			if _, err := w.ExecContext(ctx, `UPDATE jobs SET status = 'CANCELED', finished_at = ? WHERE id = ? AND status = 'PENDING'`, w.now, id); err != nil {
				return err
			}
			if job, err = reread(ctx, w, id); err != nil {
				return err
			}
			if err := w.event(id, store.EventCanceled, store.StatusCanceled, job.Attempt, nil); err != nil {
				return err
			}
			return s.followUpsTx(ctx, w, job)
		case store.CancelRequest:
			if _, err := w.ExecContext(ctx, `UPDATE jobs SET cancel_requested = TRUE WHERE id = ? AND status = 'PROCESSING'`, id); err != nil {
				return err
			}
			if job, err = reread(ctx, w, id); err != nil {
				return err
			}
			return w.event(id, store.EventCancelRequested, store.StatusProcessing, job.Attempt, nil)
		}
		return err // nil (nothing to write) or store.ErrFinished
	})
	if err != nil {
		return job, fmt.Errorf("cancel %s: %w", id, unstorable(err))
	}
	return job, nil
}

// Retry puts a FAILED or CANCELED job back to PENDING to run now with a fresh budget:
// attempt is the fencing token, so it is not reset, and max_attempts becomes attempt +
// budget (rule 20). Another state is store.ErrNotRetryable, with the job as it is.
func (s *Store) Retry(ctx context.Context, id string, budget int) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(w *wtx) error {
		cur, err := getForUpdate(ctx, w, id)
		if err != nil {
			return err
		}
		if err := store.CheckRetry(cur); err != nil {
			job = cur
			return err
		}
		if _, err := w.ExecContext(ctx, `UPDATE jobs SET status = 'PENDING', run_at = ?,
			max_attempts = attempt + ?, attempt_base = attempt, worker = NULL, started_at = NULL, heartbeat_at = NULL, finished_at = NULL,
			progress_rows = 0, progress_total = NULL, cancel_requested = FALSE, error_code = NULL, error_message = NULL,
			file_name = NULL, file_size = NULL, file_sha256 = NULL, warnings = NULL
			WHERE id = ? AND status IN ('FAILED', 'CANCELED')`, w.now, budget, id); err != nil {
			return err
		}
		if job, err = reread(ctx, w, id); err != nil {
			return err
		}
		return w.event(id, store.EventRetried, store.StatusPending, job.Attempt,
			store.RetriedData{From: cur.Status, MaxAttempts: job.MaxAttempts})
	})
	if errors.Is(err, store.ErrNotRetryable) {
		return job, fmt.Errorf("retry %s: %w", id, err)
	}
	if err != nil {
		return store.Job{}, fmt.Errorf("retry %s: %w", id, err)
	}
	return job, nil
}

// Expire makes a SUCCEEDED job EXPIRED, with an "expired" event, keeping its file's
// record (rule 22); another state is store.ErrNotSucceeded, with the job.
func (s *Store) Expire(ctx context.Context, id string) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(w *wtx) error {
		var err error
		if job, err = getForUpdate(ctx, w, id); err != nil {
			return err
		}
		if err := store.CheckExpire(job); err != nil {
			return err
		}
		if _, err := w.ExecContext(ctx, `UPDATE jobs SET status = 'EXPIRED' WHERE id = ? AND status = 'SUCCEEDED'`, id); err != nil {
			return err
		}
		if job, err = reread(ctx, w, id); err != nil {
			return err
		}
		return w.event(id, store.EventExpired, store.StatusExpired, job.Attempt, nil)
	})
	if errors.Is(err, store.ErrNotSucceeded) {
		return job, fmt.Errorf("expire %s: %w", id, err)
	}
	if err != nil {
		return store.Job{}, fmt.Errorf("expire %s: %w", id, err)
	}
	return job, nil
}

// Delete removes a final job and its events and stops its follow-ups, in one
// transaction (rule 21), and returns the job as it was; store.ErrNotFinished (with the
// job) for a PENDING or PROCESSING one.
func (s *Store) Delete(ctx context.Context, id string) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(w *wtx) error {
		var err error
		if job, err = getForUpdate(ctx, w, id); err != nil {
			return err
		}
		if err := store.CheckDelete(job); err != nil {
			return err
		}
		if err := s.stopFollowUpsTx(ctx, w, job); err != nil {
			return err
		}
		if err := deleteEvents(ctx, w, id); err != nil {
			return err
		}
		_, err = w.ExecContext(ctx, `DELETE FROM jobs WHERE id = ? AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'EXPIRED')`, id)
		return err
	})
	if errors.Is(err, store.ErrNotFinished) {
		return job, fmt.Errorf("delete %s: %w", id, err)
	}
	if err != nil {
		return store.Job{}, fmt.Errorf("delete %s: %w", id, err)
	}
	return job, nil
}

// Stale lists PROCESSING jobs whose heartbeat is older than staleAfter by the database's
// clock, oldest heartbeat first; staleAfter <= 0 lists every PROCESSING job (rule 5).
func (s *Store) Stale(ctx context.Context, staleAfter time.Duration) ([]store.Job, error) {
	jobs, err := queryJobs(ctx, s.db, `SELECT `+jobColumns+` FROM jobs WHERE status = 'PROCESSING'
		AND (? <= 0 OR heartbeat_at < `+nowSQL+` - INTERVAL ? MICROSECOND)
		ORDER BY heartbeat_at, seq`, micros(staleAfter), s.now(), micros(staleAfter))
	if err != nil {
		return nil, fmt.Errorf("stale jobs: %w", err)
	}
	return jobs, nil
}

// nextRunSQL is NextRunIn's query: microseconds until the earliest run_at of a PENDING
// job of a queue, NULL when there is none.
const nextRunSQL = `SELECT TIMESTAMPDIFF(MICROSECOND, ` + nowSQL + `, MIN(run_at))
	FROM jobs WHERE status = 'PENDING' AND queue = ?`

// NextRunIn is how long until the earliest run_at of a PENDING job of queue by the
// database's clock (<= 0: now), or store.ErrNotFound when the queue has none.
func (s *Store) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	var us sql.NullInt64
	if err := s.db.QueryRowContext(ctx, nextRunSQL, s.now(), queue).Scan(&us); err != nil {
		return 0, fmt.Errorf("next run_at: %w", err)
	}
	if !us.Valid {
		return 0, store.ErrNotFound
	}
	return time.Duration(us.Int64) * time.Microsecond, nil
}

// FinishedOlderThan lists up to limit jobs in one of statuses that finished more than
// age ago by the database's clock, oldest first (rule 22).
func (s *Store) FinishedOlderThan(ctx context.Context, statuses []store.Status, age time.Duration, limit int) ([]store.Job, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	args := []any{s.now(), micros(age)}
	for _, st := range statuses {
		args = append(args, string(st))
	}
	args = append(args, limit)
	jobs, err := queryJobs(ctx, s.db, `SELECT `+jobColumns+` FROM jobs
		WHERE finished_at < `+nowSQL+` - INTERVAL ? MICROSECOND AND status IN (`+placeholders(len(statuses))+`)
		AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'EXPIRED')
		ORDER BY finished_at, seq LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("finished jobs: %w", err)
	}
	return jobs, nil
}
