package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// fence is the condition every update of a running execution carries (rule 3), with
// the id and the attempt as $2 and $3 (the clock is $1).
const fence = ` WHERE id = $2 AND attempt = $3 AND status = 'PROCESSING'`

// Heartbeat (fenced) stamps heartbeat_at and progress (total < 0: unknown) and reports
// whether a cancel was requested (rule 4). It changes no indexed column, so with room on
// the row's page (fillfactor, migration 0001) the update is HOT.
func (s *Store) Heartbeat(ctx context.Context, id string, attempt int, rows, total int64) (cancelRequested bool, err error) {
	var t *int64
	if total >= 0 {
		t = &total
	}
	err = s.pool.QueryRow(ctx, `UPDATE jobs SET heartbeat_at = `+nowSQL+`, progress_rows = $4, progress_total = $5`+fence+
		` RETURNING cancel_requested`, s.now(), id, attempt, rows, t).Scan(&cancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, store.ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return cancelRequested, nil
}

// SaveCheckpoint is Heartbeat that also replaces the job's checkpoint (nil clears it),
// in the same fenced update; the column has no index, so the update can stay HOT.
func (s *Store) SaveCheckpoint(ctx context.Context, id string, attempt int, rows, total int64, data []byte) (cancelRequested bool, err error) {
	var t *int64
	if total >= 0 {
		t = &total
	}
	err = s.pool.QueryRow(ctx, `UPDATE jobs SET heartbeat_at = `+nowSQL+`, progress_rows = $4, progress_total = $5, checkpoint = $6`+fence+
		` RETURNING cancel_requested`, s.now(), id, attempt, rows, t, data).Scan(&cancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, store.ErrLeaseLost
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	return cancelRequested, nil
}

// Checkpoint reads the job's checkpoint (nil: none).
func (s *Store) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	if hasNUL(id) {
		return nil, store.ErrNotFound
	}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT checkpoint FROM jobs WHERE id = $1`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	return data, nil
}

// Get returns one job, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (store.Job, error) {
	if hasNUL(id) {
		return store.Job{}, store.ErrNotFound
	}
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Job{}, fmt.Errorf("get job: %w", err)
	}
	return j, err
}

// getForUpdate reads a job inside tx and locks its row, so that the check that follows
// and the update it guards see the same row.
func getForUpdate(ctx context.Context, tx pgx.Tx, id string) (store.Job, error) {
	if hasNUL(id) {
		return store.Job{}, store.ErrNotFound
	}
	return scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1 FOR NO KEY UPDATE`, id))
}

// CompleteFromFile (fenced) makes an orphan whose file was published SUCCEEDED, without
// running it again (rule 5).
func (s *Store) CompleteFromFile(ctx context.Context, id string, attempt int, res store.FileResult) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if job, err = s.finishTx(ctx, tx, id, attempt, res); err != nil {
			return err
		}
		if err := s.addEvent(ctx, tx, id, store.EventCompletedFromFile, store.StatusSucceeded, attempt, store.FileDataOf(res)); err != nil {
			return err
		}
		return s.followUpsTx(ctx, tx, job)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("complete %s from file: %w", id, unstorable(err))
	}
	return job, nil
}

// Recover (fenced) takes back an attempt whose heartbeat was lost; the attempt counts as
// spent: PENDING to run retryIn from now by the database's clock, FAILED out of
// attempts, or CANCELED when a cancel was requested (rule 5).
func (s *Store) Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		job, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs SET
			status = CASE WHEN cancel_requested THEN 'CANCELED'
				WHEN attempt >= max_attempts THEN 'FAILED' ELSE 'PENDING' END,
			finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts THEN `+nowSQL+` ELSE NULL END,
			run_at = `+nowSQL+` + $4 * interval '1 microsecond', worker = NULL, error_code = 'lost', error_message = $5`+
			fence+` RETURNING `+jobColumns,
			s.now(), id, attempt, micros(max(retryIn, 0)), noNUL(reason)))
		if errors.Is(err, store.ErrNotFound) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		typ := store.RecoveredEvent(job.Status)
		if err := s.addEvent(ctx, tx, id, typ, job.Status, attempt, store.LostData{Code: "lost", Message: job.ErrorMessage}); err != nil {
			return err
		}
		return s.followUpsTx(ctx, tx, job)
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if job, err = getForUpdate(ctx, tx, id); err != nil {
			return err
		}
		step, err := store.CancelStepOf(job)
		switch step {
		case store.CancelNow:
			job, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs SET status = 'CANCELED', finished_at = `+nowSQL+`
				WHERE id = $2 AND status = 'PENDING' RETURNING `+jobColumns, s.now(), id))
			if err != nil {
				return err
			}
			if err := s.addEvent(ctx, tx, id, store.EventCanceled, store.StatusCanceled, job.Attempt, nil); err != nil {
				return err
			}
			return s.followUpsTx(ctx, tx, job)
		case store.CancelRequest:
			job, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs SET cancel_requested = true
				WHERE id = $1 AND status = 'PROCESSING' RETURNING `+jobColumns, id))
			if err != nil {
				return err
			}
			return s.addEvent(ctx, tx, id, store.EventCancelRequested, store.StatusProcessing, job.Attempt, nil)
		}
		return err // nil (nothing to write) or store.ErrFinished
	})
	if err != nil {
		return job, fmt.Errorf("cancel %s: %w", id, unstorable(err))
	}
	return job, nil
}

// Retry puts a FAILED or CANCELED job back to PENDING to run now with a fresh budget
// (the core gives it, store.Store.Retry). attempt is the fencing token, so it is not reset:
// max_attempts becomes attempt + budget (rule 20). Another state is
// store.ErrNotRetryable, with the job as it is.
func (s *Store) Retry(ctx context.Context, id string, budget int) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := getForUpdate(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := store.CheckRetry(cur); err != nil {
			job = cur
			return err
		}
		// Everything the last run left behind goes; its story stays in job_events.
		job, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs SET status = 'PENDING', run_at = `+nowSQL+`,
			max_attempts = attempt + $2, attempt_base = attempt, worker = NULL, started_at = NULL, heartbeat_at = NULL, finished_at = NULL,
			progress_rows = 0, progress_total = NULL, cancel_requested = false, error_code = NULL, error_message = NULL,
			file_name = NULL, file_size = NULL, file_sha256 = NULL, warnings = NULL
			WHERE id = $3 AND status IN ('FAILED', 'CANCELED') RETURNING `+jobColumns, s.now(), budget, id))
		if err != nil {
			return err
		}
		return s.addEvent(ctx, tx, id, store.EventRetried, store.StatusPending, job.Attempt,
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if job, err = getForUpdate(ctx, tx, id); err != nil {
			return err
		}
		if err := store.CheckExpire(job); err != nil {
			return err
		}
		job, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs SET status = 'EXPIRED'
			WHERE id = $1 AND status = 'SUCCEEDED' RETURNING `+jobColumns, id))
		if err != nil {
			return err
		}
		return s.addEvent(ctx, tx, id, store.EventExpired, store.StatusExpired, job.Attempt, nil)
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if job, err = getForUpdate(ctx, tx, id); err != nil {
			return err
		}
		if err := store.CheckDelete(job); err != nil {
			return err
		}
		if err := s.stopFollowUpsTx(ctx, tx, job); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM job_events WHERE job_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1 AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'EXPIRED')`, id)
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
	jobs, err := s.queryJobs(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs WHERE status = 'PROCESSING'
		AND ($2::bigint <= 0 OR heartbeat_at < `+nowSQL+` - $2 * interval '1 microsecond')
		ORDER BY heartbeat_at, seq`, s.now(), micros(staleAfter))
	if err != nil {
		return nil, fmt.Errorf("stale jobs: %w", err)
	}
	return jobs, nil
}

// NextRunIn is how long until the earliest run_at of a PENDING job of queue by the
// database's clock (<= 0: now), or store.ErrNotFound when the queue has none.
func (s *Store) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	var us *int64
	if err := s.pool.QueryRow(ctx, nextRunSQL, s.now(), queue).Scan(&us); err != nil {
		return 0, fmt.Errorf("next run_at: %w", err)
	}
	if us == nil {
		return 0, store.ErrNotFound
	}
	return time.Duration(*us) * time.Microsecond, nil
}

// FinishedOlderThan lists up to limit jobs in one of statuses that finished more than
// age ago by the database's clock, oldest first (rule 22).
func (s *Store) FinishedOlderThan(ctx context.Context, statuses []store.Status, age time.Duration, limit int) ([]store.Job, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	// The fixed IN list is jobs_finished's predicate, so that the planner may use it.
	jobs, err := s.queryJobs(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs
		WHERE finished_at < `+nowSQL+` - $2 * interval '1 microsecond' AND status = ANY($3)
		AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'EXPIRED')
		ORDER BY finished_at, seq LIMIT $4`, s.now(), micros(age), names, limit)
	if err != nil {
		return nil, fmt.Errorf("finished jobs: %w", err)
	}
	return jobs, nil
}
