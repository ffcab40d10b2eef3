package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Reading job_events by id is how the SSE hub tails the log. It relies on ids being
// assigned in commit order, which holds because every write goes through the one writer
// connection inside BEGIN IMMEDIATE: a row with a lower id is never committed after a
// row with a higher one, so "id > cursor" misses nothing.

const eventColumns = `id, job_id, at, type, status, attempt, data`

// EventsAfter returns up to limit events with an id greater than afterID, in id order.
func (s *Store) EventsAfter(ctx context.Context, afterID int64, limit int) ([]Event, error) {
	return s.queryEvents(ctx, `SELECT `+eventColumns+` FROM job_events WHERE id > ? ORDER BY id LIMIT ?`,
		afterID, eventLimit(limit))
}

// JobEventsAfter returns up to limit events of one job with an id greater than afterID,
// in id order.
func (s *Store) JobEventsAfter(ctx context.Context, jobID string, afterID int64, limit int) ([]Event, error) {
	return s.queryEvents(ctx, `SELECT `+eventColumns+` FROM job_events WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?`,
		jobID, afterID, eventLimit(limit))
}

func eventLimit(limit int) int {
	if limit <= 0 {
		return 500
	}
	return min(limit, 10_000)
}

// EventRange returns the id of the oldest stored event and the newest id ever assigned,
// which pruning does not lower (job_events is AUTOINCREMENT, so ids are never reused).
// With no stored events, first is last+1. Events first..last are the ones stored; a
// client that has seen up to id n missed pruned events when n < first-1.
func (s *Store) EventRange(ctx context.Context) (first, last int64, err error) {
	// One statement reads one snapshot, so the two figures agree with each other.
	var oldest, seq sql.NullInt64
	err = s.r.QueryRowContext(ctx, `SELECT (SELECT min(id) FROM job_events),
		(SELECT seq FROM sqlite_sequence WHERE name = 'job_events')`).Scan(&oldest, &seq)
	if err != nil {
		return 0, 0, fmt.Errorf("event range: %w", err)
	}
	last = seq.Int64
	first = last + 1
	if oldest.Valid {
		first = oldest.Int64
	}
	return first, last, nil
}

// Unfinished returns every PENDING or PROCESSING job, oldest first.
func (s *Store) Unfinished(ctx context.Context) ([]Job, error) {
	return s.queryJobs(ctx, s.r, `SELECT `+jobColumns+` FROM jobs WHERE status IN ('PENDING', 'PROCESSING')
		ORDER BY created_at, id`)
}

// JobsByID returns the jobs with the given ids that exist, keyed by id.
func (s *Store) JobsByID(ctx context.Context, ids []string) (map[string]Job, error) {
	out := make(map[string]Job, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("jobs by id: %w", err)
	}
	jobs, err := s.queryJobs(ctx, s.r, `SELECT `+jobColumns+` FROM jobs WHERE id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("jobs by id: %w", err)
	}
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

func (s *Store) queryEvents(ctx context.Context, q string, args ...any) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var (
			e    Event
			at   int64
			data sql.NullString
		)
		if err := rows.Scan(&e.ID, &e.JobID, &at, &e.Type, &e.Status, &e.Attempt, &data); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		e.At = time.UnixMilli(at).UTC()
		if data.Valid {
			e.Data = json.RawMessage(data.String)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return out, nil
}
