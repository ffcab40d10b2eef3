package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sheetq/store"
	"strings"
	"time"
)

// Retry puts a FAILED or CANCELED job back to PENDING to run now with a fresh budget of
// attempts, keeping its events and appending a "retried" one. attempt is the fencing
// token, so it is not reset: max_attempts becomes attempt + budget, and the next claim
// takes attempt + 1, which no earlier execution can hold. The core gives the budget
// (store.Store.Retry). It returns ErrNotFound, or ErrNotRetryable with the job as it is.
func (s *Store) Retry(ctx context.Context, id string, budget int) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := store.CheckRetry(cur); err != nil {
			job = cur
			return err
		}
		// Everything the last run left behind goes; its story stays in job_events.
		job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET status = 'PENDING', run_at = ?,
			max_attempts = attempt + ?, attempt_base = attempt, worker = NULL, started_at = NULL, heartbeat_at = NULL, finished_at = NULL,
			progress_rows = 0, progress_total = NULL, cancel_requested = 0, error_code = NULL, error_message = NULL,
			file_name = NULL, file_size = NULL, file_sha256 = NULL, warnings = NULL
			WHERE id = ? AND status IN ('FAILED', 'CANCELED') RETURNING `+jobColumns, ms(s.now()), budget, id))
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

// Delete removes a finished job (SUCCEEDED, FAILED, CANCELED or EXPIRED) and its events,
// stops its follow-up jobs (stopFollowUpsTx), and returns the job as it was. The
// caller removes the job's file after Delete returns, so a crash in between leaves an
// orphan file, never a row without its file. It returns ErrNotFound, or ErrNotFinished
// with the job for a PENDING or PROCESSING one.
func (s *Store) Delete(ctx context.Context, id string) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		job, err = getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := store.CheckDelete(job); err != nil {
			return err
		}
		if err := s.stopFollowUpsTx(ctx, tx, job); err != nil {
			return err
		}
		// The foreign key cascades too; deleting the events explicitly does not depend
		// on the connection's foreign_keys pragma.
		if _, err := tx.ExecContext(ctx, `DELETE FROM job_events WHERE job_id = ?`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ? AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'EXPIRED')`, id)
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

// Expire marks a SUCCEEDED job EXPIRED, with an "expired" event: retention calls it once
// the job's file is removed. The file's name, size and sha256 stay on the row as a
// record. It returns ErrNotFound, or ErrNotSucceeded with the job in any other state.
func (s *Store) Expire(ctx context.Context, id string) (store.Job, error) {
	var job store.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		job, err = getTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := store.CheckExpire(job); err != nil {
			return err
		}
		job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE jobs SET status = 'EXPIRED'
			WHERE id = ? AND status = 'SUCCEEDED' RETURNING `+jobColumns, id))
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

// FinishedOlderThan returns up to limit jobs in one of statuses that finished more than
// age ago by the store's clock, oldest first: the retention janitor's work list.
func (s *Store) FinishedOlderThan(ctx context.Context, statuses []store.Status, age time.Duration, limit int) ([]store.Job, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE finished_at < ? AND status IN (?` +
		strings.Repeat(`, ?`, len(statuses)-1) + `) ORDER BY finished_at LIMIT ?`
	args := []any{ms(s.now().Add(-age))}
	for _, st := range statuses {
		args = append(args, st)
	}
	return s.queryJobs(ctx, s.r, q, append(args, limit)...)
}
