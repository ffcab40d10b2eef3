package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sheetq/store"
	"time"
)

const scheduleColumns = `id, report, params, format, bom, cron, timezone, deliver, owner, paused,
	next_run_at, last_fired_for, created_at, updated_at`

func scanSchedule(row scanner) (store.Schedule, error) {
	var (
		sc               store.Schedule
		params           string
		deliver, owner   sql.NullString
		next, last       sql.NullInt64
		created, updated int64
		bom, paused      int
	)
	err := row.Scan(&sc.ID, &sc.Report, &params, &sc.Format, &bom, &sc.Cron, &sc.TimeZone, &deliver, &owner, &paused,
		&next, &last, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Schedule{}, store.ErrNotFound
	}
	if err != nil {
		return store.Schedule{}, err
	}
	sc.Params = json.RawMessage(params)
	if deliver.Valid {
		sc.Deliver = json.RawMessage(deliver.String)
	}
	sc.Owner, sc.BOM, sc.Paused = owner.String, bom != 0, paused != 0
	sc.NextRunAt, sc.LastFiredFor = fromMS(next), fromMS(last)
	sc.CreatedAt, sc.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return sc, nil
}

// nextOrNull is a schedule's next_run_at: NULL while paused or when there is none.
func nextOrNull(sc store.Schedule) sql.NullInt64 {
	if sc.Paused || sc.NextRunAt.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: ms(sc.NextRunAt), Valid: true}
}

func rawOrNullString(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}

// CreateSchedule stores a new schedule, stamping CreatedAt and UpdatedAt; an id that
// exists is ErrConflict.
func (s *Store) CreateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	now := ms(s.now())
	var out store.Schedule
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanSchedule(tx.QueryRowContext(ctx, `INSERT INTO schedules (id, report, params, format, bom, cron,
			timezone, deliver, owner, paused, next_run_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+scheduleColumns,
			sc.ID, sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
			rawOrNullString(sc.Deliver), nullString(sc.Owner), sc.Paused, nextOrNull(sc), now, now))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("create schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// GetSchedule returns the schedule id, or ErrNotFound.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	return scanSchedule(s.r.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
}

// ListSchedules returns every schedule, oldest first.
func (s *Store) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	out, err := s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY created_at, id`)
	if out == nil && err == nil {
		out = []store.Schedule{}
	}
	return out, err
}

// querySchedules reads the schedules a query of the read pool returns.
func (s *Store) querySchedules(ctx context.Context, q string, args ...any) ([]store.Schedule, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
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

// UpdateSchedule replaces everything of schedule sc.ID that a user edits (report,
// params, format, cron, zone, deliveries, paused, and NextRunAt, which the caller
// computes again), stamping UpdatedAt; Owner, CreatedAt and LastFiredFor stay. An
// unknown id is ErrNotFound.
func (s *Store) UpdateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var out store.Schedule
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanSchedule(tx.QueryRowContext(ctx, `UPDATE schedules SET report = ?, params = ?, format = ?, bom = ?,
			cron = ?, timezone = ?, deliver = ?, paused = ?, next_run_at = ?, updated_at = ?
			WHERE id = ? RETURNING `+scheduleColumns,
			sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
			rawOrNullString(sc.Deliver), sc.Paused, nextOrNull(sc), ms(s.now()), sc.ID))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// EditSchedule changes schedule id to what edit makes of it as it is now, in one
// transaction: a pause, an edit or a firing that commits while edit runs cannot be
// undone by this write, since the row is read under the write lock (on SQLite the one
// writer; on PostgreSQL SELECT ... FOR UPDATE). edit gets the stored row and returns the
// row to write (its ID, Owner, CreatedAt and LastFiredFor are kept whatever it says);
// its error aborts the edit and is returned as it is. An unknown id is ErrNotFound.
func (s *Store) EditSchedule(ctx context.Context, id string, edit func(store.Schedule) (store.Schedule, error)) (store.Schedule, error) {
	var out store.Schedule
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
		if err != nil {
			return err
		}
		sc, err := edit(cur)
		if err != nil {
			return err
		}
		out, err = scanSchedule(tx.QueryRowContext(ctx, `UPDATE schedules SET report = ?, params = ?, format = ?, bom = ?,
			cron = ?, timezone = ?, deliver = ?, paused = ?, next_run_at = ?, updated_at = ?
			WHERE id = ? RETURNING `+scheduleColumns,
			sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
			rawOrNullString(sc.Deliver), sc.Paused, nextOrNull(sc), ms(s.now()), id))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("edit schedule %s: %w", id, err)
	}
	return out, nil
}

// MoveSchedule sets schedule id's next firing to next, but only while it is still from
// (compare-and-set, as FireSchedule's move): for a node that finds a schedule's next
// firing parked too far ahead after the clock stepped back. moved is false when the
// schedule had changed (or is gone).
func (s *Store) MoveSchedule(ctx context.Context, id string, from, next time.Time) (moved bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET next_run_at = ? WHERE id = ? AND next_run_at = ?`,
			ms(next), id, ms(from))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		moved = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("move schedule %s: %w", id, err)
	}
	return moved, nil
}

// DeleteSchedule removes schedule id (ErrNotFound when there is none). Its firings stay:
// they are exports like any other.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("delete schedule %s: %w", id, store.ErrNotFound)
		}
		return err
	})
}

// DueSchedules returns up to limit schedules that are not paused and whose NextRunAt
// has come by the store's clock, the most overdue first.
func (s *Store) DueSchedules(ctx context.Context, limit int) ([]store.Schedule, error) {
	return s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE next_run_at IS NOT NULL AND next_run_at <= ? ORDER BY next_run_at, id LIMIT ?`, ms(s.now()), limit)
}

// FireSchedule records one firing in one transaction: the schedule moves on to f.Next
// (remembering f.ScheduledFor), but only while its NextRunAt is still f.Due and it is
// not paused, and f.Job is enqueued. fired is false, with no job, when the schedule had
// moved on already (another node fired it, or an edit changed it), and false with the
// existing job when f.Job's idempotency key has one (that time was fired before, even
// with other values).
func (s *Store) FireSchedule(ctx context.Context, f store.Firing) (job store.Job, fired bool, err error) {
	if f.Job.IdempotencyKey == "" {
		return store.Job{}, false, errors.New("fire schedule: the job needs an idempotency key")
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET next_run_at = ?, last_fired_for = ?
			WHERE id = ? AND next_run_at = ?`, ms(f.Next), ms(f.ScheduledFor), f.ScheduleID, ms(f.Due))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // moved on: nothing to do
		}
		var existed bool
		job, existed, err = s.enqueueTx(ctx, tx, f.Job)
		if errors.Is(err, store.ErrIdempotencyMismatch) {
			// That time was fired before with other values (the schedule was edited
			// since): the earlier firing stands, and the schedule still moves on.
			return nil
		}
		if err != nil {
			return err
		}
		fired = !existed
		return nil
	})
	if err != nil {
		return store.Job{}, false, fmt.Errorf("fire schedule %s: %w", f.ScheduleID, err)
	}
	return job, fired, nil
}

// ScheduleFirings returns the exports that schedule id fired, newest scheduled time
// first, at most limit (default 50, at most 1000). It reads the idempotency keys'
// unique index (FiringKeyRange), so a report's other exports, however many, are not read.
func (s *Store) ScheduleFirings(ctx context.Context, id string, limit int) ([]store.Job, error) {
	lo, hi := store.FiringKeyRange(id)
	return s.queryJobs(ctx, s.r, firingsQuery, lo, hi, store.FiringsLimit(limit))
}

// firingsQuery is ScheduleFirings' statement: a backward range of jobs_idempotency_key.
const firingsQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE idempotency_key > ? AND idempotency_key < ? ORDER BY idempotency_key DESC LIMIT ?`
