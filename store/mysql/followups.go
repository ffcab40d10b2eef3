package mysql

import (
	"context"
	"encoding/json"
	"fmt"

	"sheetq/store"
)

// followUpsTx inserts the follow-ups of job, which w has just made final, and their
// events (rule 19): the store's hook decides what they are. An error here comes after
// the end was written: the caller must roll back (the transaction, or the end's
// savepoint).
func (s *Store) followUpsTx(ctx context.Context, w *wtx, job store.Job) error {
	if s.followUps == nil {
		return nil
	}
	fus, err := s.followUps(job) // the core's hook: checked, defaults filled
	if err != nil {
		return err
	}
	for _, f := range fus {
		if _, err := w.ExecContext(ctx, `INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at, parent_id, queue)
			VALUES (?, ?, ?, 'PENDING', ?, ? + INTERVAL ? MICROSECOND, ?, ?, ?, ?)`,
			f.ID, f.Kind, string(f.Args), f.Priority, w.now, micros(f.RunIn), f.MaxAttempts, w.now, job.ID, f.Queue); err != nil {
			if isUnique(err) {
				err = fmt.Errorf("%w: %w", store.ErrConflict, err)
			}
			return fmt.Errorf("follow-up %s of %s: %w", f.Kind, job.ID, unstorable(err))
		}
		if err := w.event(f.ID, store.EventAccepted, store.StatusPending, 0, rawOrNil(f.AcceptedData)); err != nil {
			return err
		}
		if f.ParentEvent != "" {
			if err := w.event(job.ID, f.ParentEvent, job.Status, job.Attempt, rawOrNil(f.ParentData)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawOrNil keeps an empty payload an untyped nil, so that the event stores NULL.
func rawOrNil(data []byte) any {
	if len(data) == 0 {
		return nil
	}
	return json.RawMessage(data)
}

// stopFollowUpsTx ends the follow-ups of parent, which is being deleted (rule 21): a
// waiting one is deleted with its events; a running one is asked to cancel. Finished
// ones stay as a record until retention removes them. The rows are locked so that a
// claim cannot take a waiting one meanwhile (a claim skips them).
func (s *Store) stopFollowUpsTx(ctx context.Context, w *wtx, parent store.Job) error {
	rows, err := w.QueryContext(ctx, `SELECT id, status, cancel_requested, attempt FROM jobs
		WHERE parent_id = ? AND status IN ('PENDING', 'PROCESSING') FOR UPDATE`, parent.ID)
	if err != nil {
		return fmt.Errorf("follow-ups of %s: %w", parent.ID, err)
	}
	type followUp struct {
		id       string
		status   string
		canceled bool
		attempt  int
	}
	var fs []followUp
	for rows.Next() {
		var f followUp
		if err := rows.Scan(&f.id, &f.status, &f.canceled, &f.attempt); err != nil {
			rows.Close()
			return fmt.Errorf("follow-ups of %s: %w", parent.ID, err)
		}
		fs = append(fs, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("follow-ups of %s: %w", parent.ID, err)
	}
	for _, f := range fs {
		switch {
		case f.status == string(store.StatusPending):
			if err := deleteEvents(ctx, w, f.id); err != nil {
				return err
			}
			if _, err := w.ExecContext(ctx, `DELETE FROM jobs WHERE id = ? AND status = 'PENDING'`, f.id); err != nil {
				return err
			}
		case !f.canceled:
			if _, err := w.ExecContext(ctx, `UPDATE jobs SET cancel_requested = TRUE
				WHERE id = ? AND status = 'PROCESSING'`, f.id); err != nil {
				return err
			}
			if err := w.event(f.id, store.EventCancelRequested, store.StatusProcessing, f.attempt,
				store.ReasonData{Reason: parent.Kind + " " + parent.ID + " deleted"}); err != nil {
				return err
			}
		}
	}
	return nil
}
