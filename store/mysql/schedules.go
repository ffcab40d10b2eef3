package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"sheetq/store"
)

// Schedules (rule 29) on MySQL: a firing moves the schedule's next_run_at compared with
// the value the firing node read and inserts its export with the firing's idempotency
// key, in one transaction, so a firing happens once on any number of nodes.

const scheduleColumns = `id, report, params, format, bom, cron, timezone, deliver, owner, paused,
	next_run_at, last_fired_for, created_at, updated_at`

// scanSchedule reads one row of scheduleColumns; no row is store.ErrNotFound.
func scanSchedule(row scanner) (store.Schedule, error) {
	var (
		sc             store.Schedule
		params         []byte
		deliver, owner sql.NullString
		next, last     sql.NullTime
	)
	err := row.Scan(&sc.ID, &sc.Report, &params, &sc.Format, &sc.BOM, &sc.Cron, &sc.TimeZone, &deliver, &owner, &sc.Paused,
		&next, &last, &sc.CreatedAt, &sc.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Schedule{}, store.ErrNotFound
	}
	if err != nil {
		return store.Schedule{}, err
	}
	sc.Params = params
	if deliver.Valid {
		sc.Deliver = []byte(deliver.String)
	}
	sc.Owner = owner.String
	sc.NextRunAt, sc.LastFiredFor = utc(next), utc(last)
	sc.CreatedAt, sc.UpdatedAt = sc.CreatedAt.UTC(), sc.UpdatedAt.UTC()
	return sc, nil
}

// nextOrNull is the schedule's next_run_at: NULL while paused.
func nextOrNull(sc store.Schedule) any {
	if sc.Paused || sc.NextRunAt.IsZero() {
		return nil
	}
	return sc.NextRunAt
}

// rawOrNullString is b as text, or NULL when empty.
func rawOrNullString(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// CreateSchedule stores a new schedule, stamped by the database's clock; an id in use is
// store.ErrConflict.
func (s *Store) CreateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var out store.Schedule
	err := s.tx(ctx, func(w *wtx) error {
		_, err := w.ExecContext(ctx, `INSERT INTO schedules (id, report, params, format, bom, cron,
			timezone, deliver, owner, paused, next_run_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sc.ID, sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
			rawOrNullString(sc.Deliver), nullString(sc.Owner), sc.Paused, nextOrNull(sc), w.now, w.now)
		if isUnique(err) {
			return store.ErrConflict
		}
		if err != nil {
			return err
		}
		out, err = scanSchedule(w.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, sc.ID))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("create schedule %s: %w", sc.ID, unstorable(err))
	}
	return out, nil
}

// GetSchedule returns one schedule, or store.ErrNotFound.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	return scanSchedule(s.db.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
}

// ListSchedules returns every schedule, oldest first.
func (s *Store) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	out, err := s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY created_at, id`)
	if out == nil && err == nil {
		out = []store.Schedule{}
	}
	return out, err
}

func (s *Store) querySchedules(ctx context.Context, q string, args ...any) ([]store.Schedule, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// updateSQL writes a schedule's fields; its parameters are updateArgs'.
const updateSQL = `UPDATE schedules SET report = ?, params = ?, format = ?,
	bom = ?, cron = ?, timezone = ?, deliver = ?, paused = ?, next_run_at = ?, updated_at = ?
	WHERE id = ?`

func updateArgs(sc store.Schedule, now time.Time, id string) []any {
	return []any{sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
		rawOrNullString(sc.Deliver), sc.Paused, nextOrNull(sc), now, id}
}

// UpdateSchedule replaces a schedule's fields (not its id, owner or creation time).
func (s *Store) UpdateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var out store.Schedule
	err := s.tx(ctx, func(w *wtx) error {
		res, err := w.ExecContext(ctx, updateSQL, updateArgs(sc, w.now, sc.ID)...)
		if err != nil {
			return err
		}
		if ok, err := matched(res); err != nil || !ok {
			if err == nil {
				err = store.ErrNotFound
			}
			return err
		}
		out, err = scanSchedule(w.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, sc.ID))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("update schedule %s: %w", sc.ID, unstorable(err))
	}
	return out, nil
}

// EditSchedule reads the schedule and locks its row (FOR UPDATE), applies edit to it,
// and writes the result, in one transaction (rule 29).
func (s *Store) EditSchedule(ctx context.Context, id string, edit func(store.Schedule) (store.Schedule, error)) (store.Schedule, error) {
	var out store.Schedule
	err := s.tx(ctx, func(w *wtx) error {
		cur, err := scanSchedule(w.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ? FOR UPDATE`, id))
		if err != nil {
			return err
		}
		sc, err := edit(cur)
		if err != nil {
			return err
		}
		if _, err := w.ExecContext(ctx, updateSQL, updateArgs(sc, w.now, id)...); err != nil {
			return err
		}
		out, err = scanSchedule(w.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("edit schedule %s: %w", id, unstorable(err))
	}
	return out, nil
}

// MoveSchedule sets next_run_at to next if it is still from (compare and set).
func (s *Store) MoveSchedule(ctx context.Context, id string, from, next time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE schedules SET next_run_at = ? WHERE id = ? AND next_run_at = ?`, next, id, from)
	if err != nil {
		return false, fmt.Errorf("move schedule %s: %w", id, err)
	}
	return matched(res)
}

// DeleteSchedule removes a schedule (its firings stay); store.ErrNotFound when none.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
	if err == nil {
		var ok bool
		if ok, err = matched(res); err == nil && !ok {
			err = store.ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}

// DueSchedules returns up to limit schedules whose next_run_at has come by the
// database's clock, earliest first.
func (s *Store) DueSchedules(ctx context.Context, limit int) ([]store.Schedule, error) {
	return s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE next_run_at IS NOT NULL AND next_run_at <= `+nowSQL+` ORDER BY next_run_at, id LIMIT ?`, s.now(), limit)
}

// FireSchedule moves the schedule on (compared with f.Due) and inserts its export, with
// the firing's idempotency key, in one transaction: fired is false when another node
// moved it first; a job that the key already has is returned, not inserted again.
func (s *Store) FireSchedule(ctx context.Context, f store.Firing) (job store.Job, fired bool, err error) {
	if f.Job.IdempotencyKey == "" {
		return store.Job{}, false, errors.New("fire schedule: the job needs an idempotency key")
	}
	err = s.tx(ctx, func(w *wtx) error {
		job, fired = store.Job{}, false
		w.events = nil
		res, err := w.ExecContext(ctx, `UPDATE schedules SET next_run_at = ?, last_fired_for = ?
			WHERE id = ? AND next_run_at = ?`, f.Next, f.ScheduledFor, f.ScheduleID, f.Due)
		if err != nil {
			return err
		}
		if ok, err := matched(res); err != nil || !ok {
			return err // moved on: nothing to do
		}
		j, existed, err := s.insertJob(ctx, w, f.Job)
		if err != nil && !errors.Is(err, store.ErrIdempotencyMismatch) {
			return err
		}
		job, fired = j, !existed
		return nil
	})
	if err != nil {
		return store.Job{}, false, fmt.Errorf("fire schedule %s: %w", f.ScheduleID, unstorable(err))
	}
	return job, fired, nil
}

// firingsQuery is ScheduleFirings' statement: a range of jobs_idempotency_key.
const firingsQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE idempotency_key > ? AND idempotency_key < ?
	ORDER BY idempotency_key DESC LIMIT ?`

// ScheduleFirings returns the newest limit exports that fired schedule id, newest first,
// found by their idempotency keys (byte order: VARBINARY).
func (s *Store) ScheduleFirings(ctx context.Context, id string, limit int) ([]store.Job, error) {
	lo, hi := store.FiringKeyRange(id)
	jobs, err := queryJobs(ctx, s.db, firingsQuery, lo, hi, store.FiringsLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("schedule %s firings: %w", id, err)
	}
	return jobs, nil
}
