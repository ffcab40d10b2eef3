package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// The queries below serve /metrics and /api/v1/stats, with the meaning of the SQLite
// store's (store/stats.go). The times they compare with are the caller's (the metrics
// take them from Now); the rows' stamps are the database's. Those over finished jobs scan
// the jobs table, which retention keeps bounded.

// QueueStats returns, by job kind, the jobs in each state, the oldest PENDING job
// runnable at now and the running jobs whose last heartbeat is before lateBefore, in
// one read snapshot. Every kind in kinds is in the result, with zeros if it has no job.
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
	// One statement, so one snapshot and one pass over the table: each (kind, state)
	// group also carries the oldest runnable run_at (of the PENDING group) and the late
	// heartbeats (of the PROCESSING group). run_at, not created_at: a job waiting out a
	// retry backoff is not late yet.
	rows, err := s.pool.Query(ctx, `SELECT kind, status, count(*),
			min(run_at) FILTER (WHERE status = 'PENDING' AND run_at <= $1::timestamptz),
			count(*) FILTER (WHERE status = 'PROCESSING' AND heartbeat_at < $2::timestamptz)
		FROM jobs GROUP BY kind, status`, now, lateBefore)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k, st     string
			n, late   int
			oldestRun *time.Time
		)
		if err := rows.Scan(&k, &st, &n, &oldestRun, &late); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		ks := kind(k)
		ks.Counts[store.Status(st)] = n
		if oldestRun != nil {
			ks.OldestPendingRunAt = oldestRun.UTC()
		}
		ks.LateHeartbeats += late
		out[k] = ks
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return out, nil
}

// StalledJobs returns up to limit PROCESSING jobs of kind whose heartbeat is before
// lateBefore, or that started before quietBefore and have reported no row yet, oldest
// heartbeat first, and how many there are in all. A negative limit lists them all.
func (s *Store) StalledJobs(ctx context.Context, kind string, lateBefore, quietBefore time.Time, limit int) ([]store.StalledJob, int, error) {
	// jobs_running holds the PROCESSING jobs; the filter is on columns a heartbeat
	// writes, which no index may name (a heartbeat is a HOT update).
	const where = ` FROM jobs WHERE status = 'PROCESSING' AND kind = $1
		AND (heartbeat_at < $2::timestamptz OR (progress_rows = 0 AND started_at < $3::timestamptz))`
	var lim *int // NULL: no limit, as SQLite's LIMIT -1
	if limit >= 0 {
		lim = &limit
	}
	var (
		out   []store.StalledJob
		total int
	)
	// The count and the page come from one snapshot.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*)`+where, kind, lateBefore, quietBefore).Scan(&total); err != nil {
			return err
		}
		jobs, err := s.queryJobs(ctx, tx, `SELECT `+jobColumns+where+` ORDER BY heartbeat_at, id LIMIT $4`,
			kind, lateBefore, quietBefore, lim)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			reason := store.StallNoRows
			if j.HeartbeatAt.Before(lateBefore) {
				reason = store.StallLateHeartbeat
			}
			out = append(out, store.StalledJob{Job: j, Reason: reason})
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("stalled jobs: %w", err)
	}
	return out, total, nil
}

// Throughput counts finished jobs of kind by outcome in n consecutive buckets of width,
// the last one holding now. Buckets are aligned to multiples of width since the Unix epoch
// (5-minute buckets start at :00, :05, ...; hourly ones on the UTC hour). Width is taken
// in whole milliseconds, as the SQLite store takes it.
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
	// Only final states have a finished_at; naming them lets the planner use
	// jobs_finished (the retention index) for the time range.
	rows, err := s.pool.Query(ctx, `SELECT floor(extract(epoch FROM finished_at - $1::timestamptz) * 1000 / $2)::bigint,
			status, count(*)
		FROM jobs WHERE kind = $3 AND finished_at >= $1::timestamptz AND finished_at < $4::timestamptz AND `+final+`
		GROUP BY 1, 2`, first, w, kind, end)
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

// maxDurationSample bounds the rows a percentile query sorts, the newest ones counting:
// the SQLite store's bound.
const maxDurationSample = 10_000

// Durations computes wait and run percentiles over jobs of kind since the given time,
// each from at most the newest 10,000 jobs (store.DurationStats says which jobs count).
// The durations keep PostgreSQL's microseconds; the SQLite store's are whole milliseconds.
func (s *Store) Durations(ctx context.Context, kind string, since time.Time) (store.DurationStats, error) {
	var ds store.DurationStats
	var err error
	ds.Wait, err = s.percentiles(ctx, `SELECT (extract(epoch FROM started_at - created_at) * 1000000)::bigint AS v
		FROM jobs WHERE kind = $1 AND started_at >= $2::timestamptz ORDER BY started_at DESC LIMIT $3`, kind, since)
	if err != nil {
		return store.DurationStats{}, fmt.Errorf("wait times: %w", err)
	}
	ds.Run, err = s.percentiles(ctx, `SELECT (extract(epoch FROM finished_at - started_at) * 1000000)::bigint AS v
		FROM jobs WHERE kind = $1 AND finished_at >= $2::timestamptz AND started_at IS NOT NULL
			AND status IN ('SUCCEEDED', 'FAILED', 'EXPIRED')
		ORDER BY finished_at DESC LIMIT $3`, kind, since)
	if err != nil {
		return store.DurationStats{}, fmt.Errorf("run times: %w", err)
	}
	return ds, nil
}

// percentiles ranks the microsecond values sample returns (its parameters are kind, since
// and the sample limit) and picks the nearest-rank 50th and 95th: the value at rank
// ceil(p*n/100), computed in integers.
func (s *Store) percentiles(ctx context.Context, sample, kind string, since time.Time) (store.Percentiles, error) {
	var (
		n        int
		p50, p95 *int64
	)
	err := s.pool.QueryRow(ctx, `WITH d AS (`+sample+`),
		r AS (SELECT v, row_number() OVER (ORDER BY v) AS rn, count(*) OVER () AS n FROM d)
		SELECT count(*),
			min(CASE WHEN rn >= (n * 50 + 99) / 100 THEN v END),
			min(CASE WHEN rn >= (n * 95 + 99) / 100 THEN v END)
		FROM r`, kind, since, maxDurationSample).Scan(&n, &p50, &p95)
	if err != nil {
		return store.Percentiles{}, err
	}
	us := func(v *int64) time.Duration {
		if v == nil {
			return 0
		}
		return time.Duration(max(*v, 0)) * time.Microsecond
	}
	return store.Percentiles{Count: n, P50: us(p50), P95: us(p95)}, nil
}
