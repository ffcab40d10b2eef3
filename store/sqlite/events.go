package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sheetq/store"
	"strconv"
	"time"
)

// Reading job_events by id is how the SSE hub tails the log. It relies on ids being
// assigned in commit order, which holds because every write goes through the one writer
// connection inside BEGIN IMMEDIATE: a row with a lower id is never committed after a
// row with a higher one, so "id > cursor" misses nothing. The cursor a reader holds is
// therefore the decimal id of the last event it saw: the SSE ids SQLite users' clients
// have always held stay valid (ARCHITECTURE.md, "PostgreSQL", for the other store).

const eventColumns = `id, job_id, at, type, status, attempt, data`

// EventsAfter returns up to limit events with an id greater than afterID, in id order.
func (s *Store) EventsAfter(ctx context.Context, afterID int64, limit int) ([]store.Event, error) {
	return s.queryEvents(ctx, s.reads.eventsAfter, afterID, limit)
}

// EventsSince returns up to limit events after cursor, in order, each with its own
// cursor, and the cursor after the last one (cursor itself, written canonically, when
// there is none). "" is the start; a cursor that is not an event id is ErrBadCursor.
func (s *Store) EventsSince(ctx context.Context, cursor string, limit int) ([]store.CursorEvent, string, error) {
	after, err := parseEventID(cursor)
	if err != nil {
		return nil, "", err
	}
	evs, err := s.EventsAfter(ctx, after, limit)
	if err != nil {
		return nil, "", err
	}
	out, next := withCursors(evs, after)
	return out, next, nil
}

// JobEventsSince is EventsSince for the events of one job.
func (s *Store) JobEventsSince(ctx context.Context, jobID, cursor string, limit int) ([]store.CursorEvent, string, error) {
	after, err := parseEventID(cursor)
	if err != nil {
		return nil, "", err
	}
	evs, err := s.queryEvents(ctx, s.reads.jobEventsAfter, jobID, after, limit)
	if err != nil {
		return nil, "", err
	}
	out, next := withCursors(evs, after)
	return out, next, nil
}

// EventHead returns the cursor of the present: every event committed so far is behind
// it, every later one after it. It is the newest id ever assigned (see EventRange).
func (s *Store) EventHead(ctx context.Context) (string, error) {
	_, last, err := s.EventRange(ctx)
	if err != nil {
		return "", err
	}
	return store.MakeCursor(uint64(last)), nil
}

// EventsKept reports whether the log still holds every event after cursor: false when
// retention pruned events the cursor's holder has not seen, or when the cursor is ahead
// of every id assigned (it is not from this log). A cursor that is not an event id is
// ErrBadCursor.
func (s *Store) EventsKept(ctx context.Context, cursor string) (bool, error) {
	n, err := parseEventID(cursor)
	if err != nil {
		return false, err
	}
	first, last, err := s.EventRange(ctx)
	if err != nil {
		return false, err
	}
	return n >= first-1 && n <= last, nil
}

// parseEventID reads a cursor: a non-negative decimal event id, as strconv.ParseInt
// reads it, so that the SSE ids a client sent before cursors were opaque (a sign, a
// leading zero) still resume; "" is 0, the start. The cursors it hands back are
// store.MakeCursor's, in the one spelling store.CompareCursors orders.
func parseEventID(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %q", store.ErrBadCursor, cursor)
	}
	return n, nil
}

// withCursors gives each event its id as its cursor, and returns the cursor after them.
func withCursors(evs []store.Event, after int64) ([]store.CursorEvent, string) {
	out := make([]store.CursorEvent, len(evs))
	for i, e := range evs {
		out[i] = store.CursorEvent{Event: e, Cursor: store.MakeCursor(uint64(e.ID))}
		after = e.ID
	}
	return out, store.MakeCursor(uint64(after))
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
func (s *Store) Unfinished(ctx context.Context) ([]store.Job, error) {
	return s.queryJobs(ctx, s.r, `SELECT `+jobColumns+` FROM jobs WHERE status IN ('PENDING', 'PROCESSING')
		ORDER BY created_at, id`)
}

// JobsByID returns the jobs with the given ids that exist, keyed by id.
func (s *Store) JobsByID(ctx context.Context, ids []string) (map[string]store.Job, error) {
	out := make(map[string]store.Job, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("jobs by id: %w", err)
	}
	jobs, err := scanJobs(s.reads.jobsByID.QueryContext(ctx, string(list)))
	if err != nil {
		return nil, fmt.Errorf("jobs by id: %w", err)
	}
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

func (s *Store) queryEvents(ctx context.Context, q *sql.Stmt, args ...any) ([]store.Event, error) {
	rows, err := q.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var (
			e    store.Event
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
