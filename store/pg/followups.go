package pg

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// followUpsTx inserts the follow-ups of job, which tx has just made final, and their
// events (rule 19): the store's hook decides what they are. A job that did not reach a
// final state a follow-up hears of (EXPIRED, PENDING) gets none. An error here comes
// after the end was written: the caller must roll the transaction back.
func (s *Store) followUpsTx(ctx context.Context, tx pgx.Tx, job store.Job) error {
	if s.followUps == nil {
		return nil
	}
	fus, err := s.followUps(job) // the core's hook: checked, defaults filled
	if err != nil {
		return err
	}
	for _, f := range fus {
		if hasNUL(f.ID, f.Kind, f.Queue) || unreadableJSON(f.Args) {
			// Such a follow-up could never end (nul.go): its parent's end fails instead.
			return fmt.Errorf("follow-up %s of %s: %w", f.Kind, job.ID, store.ErrUnstorable)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at, parent_id, queue)
			VALUES ($2, $3, $4::json, 'PENDING', $5, `+nowSQL+` + $6 * interval '1 microsecond', $7, `+nowSQL+`, $8, $9)`,
			s.now(), f.ID, f.Kind, string(f.Args), f.Priority, micros(f.RunIn), f.MaxAttempts, job.ID,
			f.Queue); err != nil {
			if isUnique(err) {
				err = fmt.Errorf("%w: %w", store.ErrConflict, err)
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

// rawOrNil keeps an empty payload an untyped nil, so addEvent stores NULL.
func rawOrNil(data []byte) any {
	if len(data) == 0 {
		return nil
	}
	return json.RawMessage(data)
}

// stopFollowUpsTx ends the follow-ups of parent, which is being deleted (rule 21): a
// waiting one (its first attempt or a retry) is deleted with its events; a running one
// is asked to cancel, so that it stops, or ends CANCELED instead of retrying. Finished
// ones stay as a record until retention removes them. jobs_parent finds them, and the
// rows are locked so that a claim cannot take a waiting one meanwhile.
func (s *Store) stopFollowUpsTx(ctx context.Context, tx pgx.Tx, parent store.Job) error {
	rows, err := tx.Query(ctx, `SELECT id, status, cancel_requested, attempt FROM jobs
		WHERE parent_id = $1 AND status IN ('PENDING', 'PROCESSING') FOR NO KEY UPDATE`, parent.ID)
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
			if _, err := tx.Exec(ctx, `DELETE FROM job_events WHERE job_id = $1`, f.id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1 AND status = 'PENDING'`, f.id); err != nil {
				return err
			}
		case !f.canceled:
			if _, err := tx.Exec(ctx, `UPDATE jobs SET cancel_requested = true
				WHERE id = $1 AND status = 'PROCESSING'`, f.id); err != nil {
				return err
			}
			if err := s.addEvent(ctx, tx, f.id, store.EventCancelRequested, store.StatusProcessing, f.attempt,
				store.ReasonData{Reason: parent.Kind + " " + parent.ID + " deleted"}); err != nil {
				return err
			}
		}
	}
	return nil
}
