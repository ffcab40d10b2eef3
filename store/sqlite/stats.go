package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sheetq/store"
	"time"
)

// The queries below serve /metrics and /api/v1/stats. They read through the read pool,
// so a scrape never waits for the writer. Those over finished jobs scan the jobs table,
// which retention keeps bounded (there is no index on started_at or finished_at).

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
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		// A scan of the table: retention keeps it bounded.
		if err := eachRow(ctx, tx, `SELECT kind, status, count(*) FROM jobs GROUP BY kind, status`, nil,
			func(rows *sql.Rows) error {
				var k string
				var st store.Status
				var n int
				if err := rows.Scan(&k, &st, &n); err != nil {
					return err
				}
				kind(k).Counts[st] = n
				return nil
			}); err != nil {
			return err
		}
		// run_at, not created_at: a job waiting out a retry backoff is not late yet, and
		// for a job on its first attempt the two are equal.
		if err := eachRow(ctx, tx, `SELECT kind, min(run_at) FROM jobs WHERE status = 'PENDING' AND run_at <= ? GROUP BY kind`,
			[]any{ms(now)}, func(rows *sql.Rows) error {
				var k string
				var at int64
				if err := rows.Scan(&k, &at); err != nil {
					return err
				}
				ks := kind(k)
				ks.OldestPendingRunAt = time.UnixMilli(at).UTC()
				out[k] = ks
				return nil
			}); err != nil {
			return err
		}
		return eachRow(ctx, tx, `SELECT kind, count(*) FROM jobs WHERE status = 'PROCESSING' AND heartbeat_at < ? GROUP BY kind`,
			[]any{ms(lateBefore)}, func(rows *sql.Rows) error {
				var k string
				var n int
				if err := rows.Scan(&k, &n); err != nil {
					return err
				}
				ks := kind(k)
				ks.LateHeartbeats = n
				out[k] = ks
				return nil
			})
	})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return out, nil
}

// PendingByQueue counts the PENDING jobs of each queue that has any, runnable or not.
// jobs_claim starts with the queue and holds only PENDING jobs, so this reads that
// index alone.
func (s *Store) PendingByQueue(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		return eachRow(ctx, tx, `SELECT queue, count(*) FROM jobs WHERE status = 'PENDING' GROUP BY queue`, nil,
			func(rows *sql.Rows) error {
				var q string
				var n int
				if err := rows.Scan(&q, &n); err != nil {
					return err
				}
				out[q] = n
				return nil
			})
	})
	if err != nil {
		return nil, fmt.Errorf("pending by queue: %w", err)
	}
	return out, nil
}

// PendingHead returns the first limit (at most 1,000) PENDING jobs of kind in queue in
// the order claims take them: priority, then run_at, then insertion (ClaimBatch), a
// job waiting out a backoff in its place. It reads jobs_claim in order, so a queue of
// any depth costs limit rows.
func (s *Store) PendingHead(ctx context.Context, queue, kind string, limit int) ([]store.Job, error) {
	jobs, err := s.queryJobs(ctx, s.r, pendingHeadQuery, queue, kind, min(max(limit, 1), 1000))
	if err != nil {
		return nil, fmt.Errorf("pending head of %s: %w", queue, err)
	}
	return jobs, nil
}

// pendingHeadQuery is PendingHead's statement.
const pendingHeadQuery = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_claim
	WHERE status = 'PENDING' AND queue = ? AND kind = ? ORDER BY priority, run_at, rowid LIMIT ?`

// eachRow runs q in tx and calls fn for each row.
func eachRow(ctx context.Context, tx *sql.Tx, q string, args []any, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// readTx runs fn in a read transaction, so that its queries see one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	// Read only: there is nothing to commit.
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// StalledJobs returns up to limit PROCESSING jobs of kind whose heartbeat is before
// lateBefore, or that started before quietBefore and have reported no row yet, oldest
// heartbeat first, and how many there are in all.
func (s *Store) StalledJobs(ctx context.Context, kind string, lateBefore, quietBefore time.Time, limit int) ([]store.StalledJob, int, error) {
	const where = ` FROM jobs WHERE status = 'PROCESSING' AND kind = ?
		AND (heartbeat_at < ? OR (progress_rows = 0 AND started_at < ?))`
	var out []store.StalledJob
	var total int
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*)`+where, kind, ms(lateBefore), ms(quietBefore)).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+jobColumns+where+` ORDER BY heartbeat_at, id LIMIT ?`,
			kind, ms(lateBefore), ms(quietBefore), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			reason := store.StallNoRows
			if j.HeartbeatAt.Before(lateBefore) {
				reason = store.StallLateHeartbeat
			}
			out = append(out, store.StalledJob{Job: j, Reason: reason})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("stalled jobs: %w", err)
	}
	return out, total, nil
}

// Throughput counts finished jobs of kind by outcome in n consecutive buckets of
// width, the last one holding now. Buckets are aligned to multiples of width since the Unix epoch
// (5-minute buckets start at :00, :05, ...; hourly ones on the UTC hour).
func (s *Store) Throughput(ctx context.Context, kind string, now time.Time, width time.Duration, n int) ([]store.ThroughputBucket, error) {
	w := width.Milliseconds()
	if w <= 0 || n <= 0 {
		return nil, fmt.Errorf("throughput: bad bucket width %s or count %d", width, n)
	}
	first := (ms(now)/w - int64(n-1)) * w
	end := first + int64(n)*w
	out := make([]store.ThroughputBucket, n)
	for i := range out {
		out[i].Start = time.UnixMilli(first + int64(i)*w).UTC()
	}
	rows, err := s.r.QueryContext(ctx, `SELECT (finished_at - ?) / ?, status, count(*) FROM jobs
		WHERE kind = ? AND finished_at >= ? AND finished_at < ? GROUP BY 1, 2`, first, w, kind, first, end)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		var st store.Status
		var c int
		if err := rows.Scan(&i, &st, &c); err != nil {
			return nil, fmt.Errorf("throughput: %w", err)
		}
		if i < 0 || i >= int64(n) {
			continue
		}
		switch st {
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

// maxDurationSample bounds the rows a percentile query sorts: the newest ones count.
const maxDurationSample = 10_000

// Durations computes wait and run percentiles over jobs of kind since the given time,
// each from at most the newest 10,000 jobs.
func (s *Store) Durations(ctx context.Context, kind string, since time.Time) (store.DurationStats, error) {
	var ds store.DurationStats
	var err error
	ds.Wait, err = s.percentiles(ctx, `SELECT started_at - created_at AS v FROM jobs
		WHERE kind = ? AND started_at >= ? ORDER BY started_at DESC LIMIT ?`, kind, ms(since))
	if err != nil {
		return store.DurationStats{}, fmt.Errorf("wait times: %w", err)
	}
	ds.Run, err = s.percentiles(ctx, `SELECT finished_at - started_at AS v FROM jobs
		WHERE kind = ? AND finished_at >= ? AND started_at IS NOT NULL AND status IN ('SUCCEEDED', 'FAILED', 'EXPIRED')
		ORDER BY finished_at DESC LIMIT ?`, kind, ms(since))
	if err != nil {
		return store.DurationStats{}, fmt.Errorf("run times: %w", err)
	}
	return ds, nil
}

// percentiles ranks the millisecond values sample returns (its parameters are kind,
// since and the sample limit) and picks the nearest-rank 50th and 95th: the value at rank
// ceil(p*n/100), computed in integers.
func (s *Store) percentiles(ctx context.Context, sample, kind string, since int64) (store.Percentiles, error) {
	var (
		n        int
		p50, p95 sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx, `WITH d AS (`+sample+`),
		r AS (SELECT v, row_number() OVER (ORDER BY v) AS rn, count(*) OVER () AS n FROM d)
		SELECT count(*),
			min(CASE WHEN rn >= (n * 50 + 99) / 100 THEN v END),
			min(CASE WHEN rn >= (n * 95 + 99) / 100 THEN v END)
		FROM r`, kind, since, maxDurationSample).Scan(&n, &p50, &p95)
	if err != nil {
		return store.Percentiles{}, err
	}
	return store.Percentiles{
		Count: n,
		P50:   time.Duration(max(p50.Int64, 0)) * time.Millisecond,
		P95:   time.Duration(max(p95.Int64, 0)) * time.Millisecond,
	}, nil
}

// TransitionsSince returns up to limit job events after cursor (as EventsSince reads
// it), with their jobs' times, and the cursor after the last one. Event ids grow in
// commit order (one writer), so a reader that keeps the cursor misses none and sees none
// twice.
func (s *Store) TransitionsSince(ctx context.Context, cursor string, limit int) ([]store.Transition, string, error) {
	after, err := parseEventID(cursor)
	if err != nil {
		return nil, "", err
	}
	ts, err := s.transitionsAfter(ctx, after, limit)
	if err != nil {
		return nil, "", err
	}
	if len(ts) > 0 {
		after = ts[len(ts)-1].EventID
	}
	return ts, store.MakeCursor(uint64(after)), nil
}

// transitionsAfter returns up to limit job events with an id above after, in id order.
func (s *Store) transitionsAfter(ctx context.Context, after int64, limit int) ([]store.Transition, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT e.id, e.job_id, e.type, e.status, e.attempt, e.at, e.data,
			j.kind, j.created_at, j.started_at
		FROM job_events e JOIN jobs j ON j.id = e.job_id
		WHERE e.id > ? ORDER BY e.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("transitions: %w", err)
	}
	defer rows.Close()
	var out []store.Transition
	for rows.Next() {
		var (
			t           store.Transition
			at, created int64
			started     sql.NullInt64
			data        sql.NullString
		)
		if err := rows.Scan(&t.EventID, &t.JobID, &t.Type, &t.Status, &t.Attempt, &at, &data, &t.Kind, &created, &started); err != nil {
			return nil, fmt.Errorf("transitions: %w", err)
		}
		t.At, t.CreatedAt, t.StartedAt = time.UnixMilli(at).UTC(), time.UnixMilli(created).UTC(), fromMS(started)
		if data.Valid {
			var d struct {
				Code string `json:"code"`
			}
			if json.Unmarshal([]byte(data.String), &d) == nil {
				t.Code = d.Code
			}
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
