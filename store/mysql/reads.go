package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"sheetq/store"
)

// List returns jobs newest first (insertion order) with optional filters; o.Before
// pages (the seq of the last job of the page before). An unknown status lists nothing.
func (s *Store) List(ctx context.Context, o store.ListOptions) ([]store.Job, error) {
	q, args, ok := listQuery(o)
	if !ok {
		return nil, nil
	}
	jobs, err := queryJobs(ctx, s.db, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// listQuery is List's statement for o and its arguments; !ok: o lists nothing.
func listQuery(o store.ListOptions) (string, []any, bool) {
	if o.Status != "" && !o.Status.Valid() {
		return "", nil, false
	}
	var (
		where []string
		args  []any
	)
	if o.Status != "" {
		where, args = append(where, `status = ?`), append(args, string(o.Status))
	}
	if o.Kind != "" {
		where, args = append(where, `kind = ?`), append(args, o.Kind)
	}
	if o.Report != "" {
		// The generated column (migration 0002) finds the rows by jobs_report; the
		// whole name is compared too, since the column keeps only its first 191
		// characters.
		where = append(where, `report = LEFT(?, 191) AND JSON_VALID(args) AND JSON_UNQUOTE(JSON_EXTRACT(args, '$.report')) = ?`)
		args = append(args, o.Report, o.Report)
	}
	if o.CreatedBy != "" {
		where, args = append(where, `created_by = ?`), append(args, o.CreatedBy)
	}
	if o.Before > 0 {
		where, args = append(where, `seq < ?`), append(args, o.Before)
	}
	q := `SELECT ` + jobColumns + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY seq DESC LIMIT ?`, append(args, o.Limit), true
}

// Counts returns how many jobs are in each state, follow-ups left out.
func (s *Store) Counts(ctx context.Context) (map[store.Status]int, error) {
	out := map[store.Status]int{}
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM jobs WHERE parent_id IS NULL GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[store.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return out, nil
}

// JobsByID returns the jobs of ids that exist, by id.
func (s *Store) JobsByID(ctx context.Context, ids []string) (map[string]store.Job, error) {
	out := make(map[string]store.Job, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		ids = ids[n:]
		jobs, err := queryJobs(ctx, s.db, `SELECT `+jobColumns+` FROM jobs WHERE id IN (`+placeholders(n)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("jobs by id: %w", err)
		}
		for _, j := range jobs {
			out[j.ID] = j
		}
	}
	return out, nil
}

// Unfinished returns every PENDING or PROCESSING job, oldest first.
func (s *Store) Unfinished(ctx context.Context) ([]store.Job, error) {
	jobs, err := queryJobs(ctx, s.db, `SELECT `+jobColumns+` FROM jobs
		WHERE status IN ('PENDING', 'PROCESSING') ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("unfinished jobs: %w", err)
	}
	return jobs, nil
}

// pendingHeadQuery is PendingHead's statement: jobs_claim in order.
const pendingHeadQuery = `SELECT ` + jobColumns + ` FROM jobs
	WHERE status = 'PENDING' AND queue = ? AND kind = ? ORDER BY priority, run_at, seq LIMIT ?`

// PendingHead returns up to limit PENDING jobs of queue and kind, in claim order.
func (s *Store) PendingHead(ctx context.Context, queue, kind string, limit int) ([]store.Job, error) {
	jobs, err := queryJobs(ctx, s.db, pendingHeadQuery, queue, kind, min(max(limit, 1), 1000))
	if err != nil {
		return nil, fmt.Errorf("pending head of %s: %w", queue, err)
	}
	return jobs, nil
}

// PendingByQueue counts PENDING jobs per queue.
func (s *Store) PendingByQueue(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	rows, err := s.db.QueryContext(ctx, `SELECT queue, COUNT(*) FROM jobs WHERE status = 'PENDING' GROUP BY queue`)
	if err != nil {
		return nil, fmt.Errorf("pending by queue: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("pending by queue: %w", err)
		}
		out[q] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending by queue: %w", err)
	}
	return out, nil
}

// QueueStats counts each kind's jobs by state, with the oldest due PENDING job's run_at
// and the PROCESSING jobs whose heartbeat is older than lateBefore, in one statement.
func (s *Store) QueueStats(ctx context.Context, now, lateBefore time.Time, kinds ...string) (map[string]store.KindStats, error) {
	out := map[string]store.KindStats{}
	kind := func(k string) store.KindStats {
		ks, ok := out[k]
		if !ok {
			ks = store.KindStats{Counts: make(map[store.Status]int, len(store.AllStatuses))}
			for _, st := range store.AllStatuses {
				ks.Counts[st] = 0
			}
			out[k] = ks
		}
		return ks
	}
	for _, k := range kinds {
		kind(k)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT kind, status, COUNT(*),
			MIN(CASE WHEN status = 'PENDING' AND run_at <= ? THEN run_at END),
			SUM(CASE WHEN status = 'PROCESSING' AND heartbeat_at < ? THEN 1 ELSE 0 END)
		FROM jobs GROUP BY kind, status`, now, lateBefore)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k, st     string
			n, late   int
			oldestRun sql.NullTime
		)
		if err := rows.Scan(&k, &st, &n, &oldestRun, &late); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		ks := kind(k)
		ks.Counts[store.Status(st)] = n
		if oldestRun.Valid {
			ks.OldestPendingRunAt = oldestRun.Time.UTC()
		}
		ks.LateHeartbeats += late
		out[k] = ks
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return out, nil
}

// StalledJobs returns the running jobs of kind whose heartbeat is older than
// lateBefore, or that have written no row since before quietBefore, oldest heartbeat
// first, up to limit (< 0: all), with how many there are; the count and the page come
// from one snapshot (a read-only REPEATABLE READ transaction).
func (s *Store) StalledJobs(ctx context.Context, kind string, lateBefore, quietBefore time.Time, limit int) ([]store.StalledJob, int, error) {
	const where = ` FROM jobs WHERE status = 'PROCESSING' AND kind = ?
		AND (heartbeat_at < ? OR (progress_rows = 0 AND started_at < ?))`
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("stalled jobs: %w", err)
	}
	defer tx.Rollback()
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*)`+where, kind, lateBefore, quietBefore).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("stalled jobs: %w", err)
	}
	lim := int64(limit)
	if limit < 0 {
		lim = 1 << 62
	}
	jobs, err := queryJobs(ctx, tx, `SELECT `+jobColumns+where+` ORDER BY heartbeat_at, id LIMIT ?`,
		kind, lateBefore, quietBefore, lim)
	if err != nil {
		return nil, 0, fmt.Errorf("stalled jobs: %w", err)
	}
	var out []store.StalledJob
	for _, j := range jobs {
		reason := store.StallNoRows
		if j.HeartbeatAt.Before(lateBefore) {
			reason = store.StallLateHeartbeat
		}
		out = append(out, store.StalledJob{Job: j, Reason: reason})
	}
	return out, total, tx.Commit()
}

// Throughput counts kind's jobs that finished in each of n buckets of width ending with
// the one that holds now, by final state.
func (s *Store) Throughput(ctx context.Context, kind string, now time.Time, width time.Duration, n int) ([]store.ThroughputBucket, error) {
	w := width.Milliseconds()
	if w <= 0 || n <= 0 {
		return nil, fmt.Errorf("throughput: bad bucket width %s or count %d", width, n)
	}
	firstMS := (now.UnixMilli()/w - int64(n-1)) * w
	first := time.UnixMilli(firstMS).UTC()
	end := time.UnixMilli(firstMS + int64(n)*w).UTC()
	out := make([]store.ThroughputBucket, n)
	for i := range out {
		out[i].Start = time.UnixMilli(firstMS + int64(i)*w).UTC()
	}
	rows, err := s.db.QueryContext(ctx, `SELECT FLOOR(TIMESTAMPDIFF(MICROSECOND, ?, finished_at) / 1000 / ?) AS b,
			status, COUNT(*)
		FROM jobs WHERE kind = ? AND finished_at >= ? AND finished_at < ?
			AND status IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'EXPIRED')
		GROUP BY b, status`, first, w, kind, first, end)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			i  int64
			st string
			c  int
		)
		if err := rows.Scan(&i, &st, &c); err != nil {
			return nil, fmt.Errorf("throughput: %w", err)
		}
		if i < 0 || i >= int64(n) {
			continue
		}
		switch store.Status(st) {
		case store.StatusSucceeded, store.StatusExpired:
			out[i].Succeeded += c
		case store.StatusFailed:
			out[i].Failed += c
		case store.StatusCanceled:
			out[i].Canceled += c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	return out, nil
}

// maxDurationSample bounds the rows Durations reads for each percentile.
const maxDurationSample = 10_000

// Durations returns the wait (created to started) and run (started to finished)
// percentiles of kind's jobs since since, over the newest maxDurationSample of each, in
// microseconds.
func (s *Store) Durations(ctx context.Context, kind string, since time.Time) (store.DurationStats, error) {
	var ds store.DurationStats
	var err error
	ds.Wait, err = s.percentiles(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at) AS v
		FROM jobs WHERE kind = ? AND started_at >= ? ORDER BY started_at DESC LIMIT ?`, kind, since)
	if err != nil {
		return store.DurationStats{}, fmt.Errorf("wait times: %w", err)
	}
	ds.Run, err = s.percentiles(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, started_at, finished_at) AS v
		FROM jobs WHERE kind = ? AND finished_at >= ? AND started_at IS NOT NULL
			AND status IN ('SUCCEEDED', 'FAILED', 'EXPIRED')
		ORDER BY finished_at DESC LIMIT ?`, kind, since)
	if err != nil {
		return store.DurationStats{}, fmt.Errorf("run times: %w", err)
	}
	return ds, nil
}

// percentiles reads the sample's values and takes the nearest-rank p50 and p95 of them.
func (s *Store) percentiles(ctx context.Context, sample, kind string, since time.Time) (store.Percentiles, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT v FROM (`+sample+`) d ORDER BY v`, kind, since, maxDurationSample)
	if err != nil {
		return store.Percentiles{}, err
	}
	defer rows.Close()
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return store.Percentiles{}, err
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return store.Percentiles{}, err
	}
	n := len(vs)
	if n == 0 {
		return store.Percentiles{}, nil
	}
	rank := func(p int) time.Duration {
		i := (n*p + 99) / 100 // nearest rank, 1-based
		return time.Duration(max(vs[max(i, 1)-1], 0)) * time.Microsecond
	}
	return store.Percentiles{Count: n, P50: rank(50), P95: rank(95)}, nil
}

// Now is the database's clock as this node estimates it (the offset measured at Open and
// at each Ping), or the test clock; callers use it only to show and compute.
func (s *Store) Now() time.Time {
	if s.testClock != nil {
		return s.testClock()
	}
	return time.Now().Add(time.Duration(s.skew.Load())).UTC()
}

// Ping checks that the database answers, and measures its clock's offset again.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.readSkew(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// readSkew measures the database's clock against this node's, taking the middle of the
// round trip.
func (s *Store) readSkew(ctx context.Context) error {
	var db time.Time
	before := time.Now()
	if err := s.db.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(&db); err != nil {
		return err
	}
	after := time.Now()
	s.skew.Store(int64(db.Sub(before.Add(after.Sub(before) / 2))))
	return nil
}

// probeEvery is how old the last probe write must be, by the database's clock, for
// ProbeWrite to write again: nodes polling /readyz write once a second between them.
const probeEvery = time.Second

// ProbeWrite rewrites write_probe's row when the last probe is a second old: a server
// in read-only mode, a full disk or a replica refuses it, named as the core's kind.
func (s *Store) ProbeWrite(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `UPDATE write_probe SET at = `+nowSQL+`
		WHERE id = 1 AND at <= `+nowSQL+` - INTERVAL ? MICROSECOND`, s.now(), s.now(), micros(probeEvery))
	if err != nil {
		if k := s.Fault(err); k != nil {
			return fmt.Errorf("probe write: %w: %w", k, err)
		}
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}
