package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reading job_events by id is how the SSE hub tails the log. It relies on ids being
// assigned in commit order, which holds because every write goes through the one writer
// connection inside BEGIN IMMEDIATE: a row with a lower id is never committed after a
// row with a higher one, so "id > cursor" misses nothing. The cursor a reader holds is
// therefore the decimal id of the last event it saw: the SSE ids SQLite users' clients
// have always held stay valid (ARCHITECTURE.md, "PostgreSQL", for the other store).

const eventColumns = `id, job_id, at, type, status, attempt, data`

// ErrBadCursor is the error for an event cursor that the store did not hand out.
var ErrBadCursor = errors.New("malformed event cursor")

// CursorEvent is an event and the cursor that resumes just after it: its SSE id.
type CursorEvent struct {
	Event
	// Cursor is opaque to clients: they pass it back to the store that handed it out,
	// or to any store of the same database.
	Cursor string
}

// CompareCursors orders two cursors handed out by one store (-1, 0, +1), as the reads
// deliver their events. Every store writes a cursor as decimal numbers without leading
// zeros, joined by dots (SQLite: the event id; PostgreSQL: its transaction id, then the
// event id), and orders cursors by those numbers, first number first; "" is the start.
// So the hub can tell whether an event is behind a client's position without knowing
// which store it reads, while clients still treat the cursor as opaque text.
func CompareCursors(a, b string) int {
	for a != "" || b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, ".")
		y, b, _ = strings.Cut(b, ".")
		// Without leading zeros, the longer number is the larger one, and numbers of one
		// length compare as text: no parsing, no allocation on the stream's hot path.
		if c := cmp.Compare(len(x), len(y)); c != 0 {
			return c
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// EventsAfter returns up to limit events with an id greater than afterID, in id order.
func (s *Store) EventsAfter(ctx context.Context, afterID int64, limit int) ([]Event, error) {
	return s.queryEvents(ctx, s.reads.eventsAfter, afterID, eventLimit(limit))
}

// EventsSince returns up to limit events after cursor, in order, each with its own
// cursor, and the cursor after the last one (cursor itself, written canonically, when
// there is none). "" is the start; a cursor that is not an event id is ErrBadCursor.
func (s *Store) EventsSince(ctx context.Context, cursor string, limit int) ([]CursorEvent, string, error) {
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
func (s *Store) JobEventsSince(ctx context.Context, jobID, cursor string, limit int) ([]CursorEvent, string, error) {
	after, err := parseEventID(cursor)
	if err != nil {
		return nil, "", err
	}
	evs, err := s.queryEvents(ctx, s.reads.jobEventsAfter, jobID, after, eventLimit(limit))
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
	return strconv.FormatInt(last, 10), nil
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
// reads it (the SSE ids a client sent before cursors were opaque); "" is 0, the start.
func parseEventID(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %q", ErrBadCursor, cursor)
	}
	return n, nil
}

// withCursors gives each event its id as its cursor, and returns the cursor after them.
func withCursors(evs []Event, after int64) ([]CursorEvent, string) {
	out := make([]CursorEvent, len(evs))
	for i, e := range evs {
		out[i] = CursorEvent{Event: e, Cursor: strconv.FormatInt(e.ID, 10)}
		after = e.ID
	}
	return out, strconv.FormatInt(after, 10)
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
	jobs, err := scanJobs(s.reads.jobsByID.QueryContext(ctx, string(list)))
	if err != nil {
		return nil, fmt.Errorf("jobs by id: %w", err)
	}
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

func (s *Store) queryEvents(ctx context.Context, q *sql.Stmt, args ...any) ([]Event, error) {
	rows, err := q.QueryContext(ctx, args...)
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
