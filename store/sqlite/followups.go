package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sheetq/store"
)

// followUpsTx inserts the follow-ups of job, which tx has just made final, and their
// events: those the core's hook gives (store.Driver's SetFollowUps), checked and with
// their defaults filled.
func (s *Store) followUpsTx(ctx context.Context, tx *sql.Tx, job store.Job) error {
	if s.followUps == nil {
		return nil
	}
	fus, err := s.followUps(job)
	if err != nil {
		return err
	}
	now := s.now()
	for _, f := range fus {
		if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at, parent_id, queue)
			VALUES (?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?)`,
			f.ID, f.Kind, string(f.Args), f.Priority, ms(now.Add(f.RunIn)), f.MaxAttempts, ms(now), job.ID,
			f.Queue); err != nil {
			if isUnique(err) {
				err = store.ErrConflict
			}
			return fmt.Errorf("follow-up %s of %s: %w", f.Kind, job.ID, err)
		}
		if err := s.addEvent(ctx, tx, f.ID, store.EventAccepted, store.StatusPending, 0, rawOrNil(f.AcceptedData)); err != nil {
			return err
		}
		if f.ParentEvent != "" {
			if err := s.addEvent(ctx, tx, job.ID, f.ParentEvent, job.Status, job.Attempt, rawOrNil(f.ParentData)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawOrNil keeps an empty payload an untyped nil, so addEvent stores NULL rather than
// the JSON null a nil RawMessage marshals to.
func rawOrNil(data json.RawMessage) any {
	if len(data) == 0 {
		return nil
	}
	return data
}

// stopFollowUpsTx ends the follow-ups of parentID, which is being deleted: they would
// act on, and retry for a day to act on, a job that no longer exists. A waiting one
// (its first attempt or a retry) is deleted with its events; a running one is asked to
// cancel, so that it stops, or ends CANCELED instead of retrying. Finished ones stay as
// a record until retention removes them. parent_id's partial index finds them.
func (s *Store) stopFollowUpsTx(ctx context.Context, tx *sql.Tx, parent store.Job) error {
	parentID := parent.ID
	rows, err := tx.QueryContext(ctx, `SELECT id, status, cancel_requested, attempt FROM jobs
		WHERE parent_id = ? AND status IN ('PENDING', 'PROCESSING')`, parentID)
	if err != nil {
		return fmt.Errorf("follow-ups of %s: %w", parentID, err)
	}
	type followUp struct {
		id       string
		status   store.Status
		canceled bool
		attempt  int
	}
	var fs []followUp
	for rows.Next() {
		var f followUp
		if err := rows.Scan(&f.id, &f.status, &f.canceled, &f.attempt); err != nil {
			rows.Close()
			return fmt.Errorf("follow-ups of %s: %w", parentID, err)
		}
		fs = append(fs, f)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("follow-ups of %s: %w", parentID, err)
	}
	for _, f := range fs {
		switch {
		case f.status == store.StatusPending:
			if _, err := tx.ExecContext(ctx, `DELETE FROM job_events WHERE job_id = ?`, f.id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ? AND status = 'PENDING'`, f.id); err != nil {
				return err
			}
		case !f.canceled:
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET cancel_requested = 1
				WHERE id = ? AND status = 'PROCESSING'`, f.id); err != nil {
				return err
			}
			if err := s.addEvent(ctx, tx, f.id, store.EventCancelRequested, store.StatusProcessing, f.attempt,
				store.ReasonData{Reason: parent.Kind + " " + parentID + " deleted"}); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendEvent appends an event of type typ with data to job id's timeline, with the
// job's status and attempt as they are: a job kind's note on another job (a webhook
// delivery's attempt on its export). A job removed meanwhile is skipped without an
// error: there is no timeline left to write to.
func (s *Store) AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error {
	var payload sql.NullString
	if len(data) > 0 {
		payload = sql.NullString{String: string(data), Valid: true}
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt, data)
			SELECT id, ?, ?, status, attempt, ? FROM jobs WHERE id = ?`, ms(s.now()), typ, payload, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("append event %s to %s: %w", typ, id, err)
	}
	return nil
}
