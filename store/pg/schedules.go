package pg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// The schedules table (issue 20), as the SQLite store keeps it (store/schedules.go): the
// same methods and rules, passing conformance.RunSchedules.

const scheduleColumns = `id, report, params, format, bom, cron, timezone, deliver, owner, paused,
	next_run_at, last_fired_for, created_at, updated_at`

func scanSchedule(row pgx.Row) (store.Schedule, error) {
	var (
		sc             store.Schedule
		params         string
		deliver, owner *string
		next, last     *time.Time
	)
	err := row.Scan(&sc.ID, &sc.Report, &params, &sc.Format, &sc.BOM, &sc.Cron, &sc.TimeZone, &deliver, &owner, &sc.Paused,
		&next, &last, &sc.CreatedAt, &sc.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Schedule{}, store.ErrNotFound
	}
	if err != nil {
		return store.Schedule{}, err
	}
	sc.Params = []byte(params)
	if deliver != nil {
		sc.Deliver = []byte(*deliver)
	}
	sc.Owner = str(owner)
	sc.NextRunAt, sc.LastFiredFor = utc(next), utc(last)
	sc.CreatedAt, sc.UpdatedAt = sc.CreatedAt.UTC(), sc.UpdatedAt.UTC()
	return sc, nil
}

// checkSchedule refuses a schedule PostgreSQL cannot store; the core checked the rest
// (store.CheckSchedule).
func checkSchedule(sc store.Schedule) error {
	// A value PostgreSQL could not keep, or not read back (nul.go): refused before it is
	// written, as a job's are, so that no schedule's firing can carry one.
	if unreadableJSON(sc.Params) || unreadableJSON(sc.Deliver) || hasNUL(sc.ID, sc.Report, sc.Format, sc.Cron, sc.TimeZone, sc.Owner) {
		return fmt.Errorf("schedule %s: %w", sc.ID, store.ErrUnstorable)
	}
	return nil
}

// nextOrNull is a schedule's next_run_at: NULL while paused or when there is none.
func nextOrNull(sc store.Schedule) *time.Time {
	if sc.Paused || sc.NextRunAt.IsZero() {
		return nil
	}
	return &sc.NextRunAt
}

func rawOrNullString(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// CreateSchedule is store.Store.CreateSchedule.
func (s *Store) CreateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	if err := checkSchedule(sc); err != nil {
		return store.Schedule{}, err
	}
	out, err := scanSchedule(s.pool.QueryRow(ctx, `INSERT INTO schedules (id, report, params, format, bom, cron,
		timezone, deliver, owner, paused, next_run_at, created_at, updated_at)
		VALUES ($2, $3, $4::json, $5, $6, $7, $8, $9::json, $10, $11, $12, `+nowSQL+`, `+nowSQL+`) RETURNING `+scheduleColumns,
		s.now(), sc.ID, sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
		rawOrNullString(sc.Deliver), nullString(sc.Owner), sc.Paused, nextOrNull(sc)))
	if isUnique(err) {
		err = store.ErrConflict
	}
	if err != nil {
		return store.Schedule{}, fmt.Errorf("create schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// GetSchedule is store.Store.GetSchedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (store.Schedule, error) {
	if hasNUL(id) {
		return store.Schedule{}, store.ErrNotFound
	}
	return scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = $1`, id))
}

// ListSchedules is store.Store.ListSchedules.
func (s *Store) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	out, err := s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY created_at, id`)
	if out == nil && err == nil {
		out = []store.Schedule{}
	}
	return out, err
}

func (s *Store) querySchedules(ctx context.Context, q string, args ...any) ([]store.Schedule, error) {
	rows, err := s.pool.Query(ctx, q, args...)
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

// UpdateSchedule is store.Store.UpdateSchedule.
func (s *Store) UpdateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	if hasNUL(sc.ID) {
		return store.Schedule{}, store.ErrNotFound // no schedule can have that id
	}
	if err := checkSchedule(sc); err != nil {
		return store.Schedule{}, err
	}
	out, err := scanSchedule(s.pool.QueryRow(ctx, `UPDATE schedules SET report = $2, params = $3::json, format = $4,
		bom = $5, cron = $6, timezone = $7, deliver = $8::json, paused = $9, next_run_at = $10, updated_at = `+nowSQL+`
		WHERE id = $11 RETURNING `+scheduleColumns,
		s.now(), sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
		rawOrNullString(sc.Deliver), sc.Paused, nextOrNull(sc), sc.ID))
	if err != nil {
		return store.Schedule{}, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// EditSchedule is store.Store.EditSchedule: the row is read FOR UPDATE, so a
// concurrent pause, edit or firing waits for this transaction, or this one for it.
func (s *Store) EditSchedule(ctx context.Context, id string, edit func(store.Schedule) (store.Schedule, error)) (store.Schedule, error) {
	if hasNUL(id) {
		return store.Schedule{}, store.ErrNotFound
	}
	var out store.Schedule
	err := s.tx(ctx, func(tx pgx.Tx) error {
		cur, err := scanSchedule(tx.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		sc, err := edit(cur)
		if err != nil {
			return err
		}
		if err := checkSchedule(sc); err != nil {
			return err
		}
		out, err = scanSchedule(tx.QueryRow(ctx, `UPDATE schedules SET report = $2, params = $3::json, format = $4,
			bom = $5, cron = $6, timezone = $7, deliver = $8::json, paused = $9, next_run_at = $10, updated_at = `+nowSQL+`
			WHERE id = $11 RETURNING `+scheduleColumns,
			s.now(), sc.Report, string(sc.Params), cmp.Or(sc.Format, "xlsx"), sc.BOM, sc.Cron, sc.TimeZone,
			rawOrNullString(sc.Deliver), sc.Paused, nextOrNull(sc), id))
		return err
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("edit schedule %s: %w", id, err)
	}
	return out, nil
}

// MoveSchedule is store.Store.MoveSchedule.
func (s *Store) MoveSchedule(ctx context.Context, id string, from, next time.Time) (bool, error) {
	if hasNUL(id) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE schedules SET next_run_at = $1 WHERE id = $2 AND next_run_at = $3`, next, id, from)
	if err != nil {
		return false, fmt.Errorf("move schedule %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteSchedule is store.Store.DeleteSchedule.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if hasNUL(id) {
		return store.ErrNotFound
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM schedules WHERE id = $1`, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}

// DueSchedules is store.Store.DueSchedules, by the database's clock.
func (s *Store) DueSchedules(ctx context.Context, limit int) ([]store.Schedule, error) {
	return s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE next_run_at IS NOT NULL AND next_run_at <= `+nowSQL+` ORDER BY next_run_at, id LIMIT $2`, s.now(), limit)
}

// FireSchedule is store.Store.FireSchedule. Two nodes that fire one schedule together
// meet at its row: the second UPDATE waits for the first to commit, then finds
// next_run_at moved and changes nothing.
func (s *Store) FireSchedule(ctx context.Context, f store.Firing) (job store.Job, fired bool, err error) {
	if f.Job.IdempotencyKey == "" {
		return store.Job{}, false, errors.New("fire schedule: the job needs an idempotency key")
	}
	if err := checkNewJobText(f.Job); err != nil {
		return store.Job{}, false, err
	}
	nj := f.Job
	err = s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE schedules SET next_run_at = $1, last_fired_for = $2
			WHERE id = $3 AND next_run_at = $4`, f.Next, f.ScheduledFor, f.ScheduleID, f.Due)
		if err != nil || tag.RowsAffected() == 0 {
			return err // moved on: nothing to do
		}
		var runAt *time.Time
		if !nj.RunAt.IsZero() {
			runAt = &nj.RunAt
		}
		jobs, err := s.queryJobs(ctx, tx, insertJobsSQL, s.now(), []string{nj.ID}, []string{nj.Kind}, []string{string(nj.Args)},
			[]int32{int32(nj.Priority)}, []*time.Time{runAt}, []int32{int32(nj.MaxAttempts)},
			[]*string{nullString(nj.IdempotencyKey)}, []*string{nullString(nj.RequestHash)}, []*string{nullString(nj.NotifyURL)},
			[]*string{nullString(nj.CreatedBy)}, []string{nj.Queue},
			// A firing is the scheduler's, not a request: no audit entry (NULL actor).
			[]*string{nil}, []*string{nil}, []*string{nil}, []*string{nil}, []*string{nil})
		if err != nil {
			return err
		}
		if len(jobs) == 1 {
			job, fired = jobs[0], true
			return nil
		}
		// The insert did nothing: that time was fired before (its key has a job, whatever
		// its values), and the schedule still moves on; or the id is taken.
		job, err = scanJob(tx.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE idempotency_key = $1`, nj.IdempotencyKey))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("job %s: %w", nj.ID, store.ErrConflict)
		}
		return err
	})
	if err != nil {
		return store.Job{}, false, fmt.Errorf("fire schedule %s: %w", f.ScheduleID, err)
	}
	return job, fired, nil
}

// ScheduleFirings is store.Store.ScheduleFirings: a range of the firings' keys in the
// partial index of migration 0008, whose "C" collation orders them byte by byte as the
// SQLite store's keys are (the predicate repeats the index's, for the planner).
func (s *Store) ScheduleFirings(ctx context.Context, id string, limit int) ([]store.Job, error) {
	if hasNUL(id) {
		return nil, nil
	}
	lo, hi := store.FiringKeyRange(id)
	jobs, err := s.queryJobs(ctx, s.pool, firingsQuery, lo, hi, store.FiringsLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("schedule %s firings: %w", id, err)
	}
	return jobs, nil
}

// firingsQuery is ScheduleFirings' statement.
const firingsQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE idempotency_key LIKE 'schedule:%' AND idempotency_key COLLATE "C" > $1 AND idempotency_key COLLATE "C" < $2
	ORDER BY idempotency_key COLLATE "C" DESC LIMIT $3`
