package pg

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"sheetq/store"
)

// The commit-safe event cursor (issue 17; ARCHITECTURE.md, "PostgreSQL").
//
// Every event row records the transaction that wrote it (job_events.xid, xid8, by
// migration 0002). A read delivers only events whose transaction id is below xmin of the
// snapshot the read itself runs on (pg_snapshot_xmin(pg_current_snapshot())): every
// transaction below xmin has ended, its committed rows are visible to that snapshot, its
// aborted rows never will be, and every transaction that starts writing later takes an
// xid at or above xmin. So the set of events below xmin is final, and a read that takes
// them in (xid, id) order after the cursor, then moves the cursor to the last one it
// took, can never find a new event behind the cursor: no event is skipped, none is
// delivered twice, on any node, as the cursor names rows, not a node's state.
//
// What it costs: an event is delivered once every transaction older than it has ended,
// anywhere in the cluster (xids are cluster-wide), so a long transaction, even on
// another database, holds delivery back (never loses an event). And (xid, id) is the
// order transactions took their xids, which is not always the order they committed:
// within one transaction events keep their id order, but a transaction that took its xid
// first and then waited on a row lock writes its events after the other's yet sorts
// before them.

// EventsSince returns up to limit events after cursor (the core bounds the limit)
// in a commit-safe order, each with its own cursor, and the cursor after the last one
// (cursor itself when there is none yet). An empty cursor reads from the start; one that
// the store did not hand out is store.ErrBadCursor. Unlike EventsAfter, an event whose
// transaction commits after a later one's is never skipped: it is delivered only once no
// earlier transaction can still be open (see above).
func (s *Store) EventsSince(ctx context.Context, cursor string, limit int) ([]store.CursorEvent, string, error) {
	return s.eventsSince(ctx, "", cursor, limit)
}

// JobEventsSince is EventsSince for the events of one job, for a stream that follows it.
func (s *Store) JobEventsSince(ctx context.Context, jobID, cursor string, limit int) ([]store.CursorEvent, string, error) {
	if jobID == "" {
		return nil, cursor, nil // no job has an empty id; "" must not read every job's
	}
	return s.eventsSince(ctx, jobID, cursor, limit)
}

// eventsSince reads the events after cursor, of jobID or ("") of every job.
func (s *Store) eventsSince(ctx context.Context, jobID, cursor string, limit int) ([]store.CursorEvent, string, error) {
	xid, id, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	// One statement, so pg_current_snapshot() is the snapshot the rows are read with: a
	// transaction that commits while it runs is above that xmin and waits for the next read.
	// ORDER BY names the table's columns: a bare "xid" would be the text output column
	// (and "10" sorts before "9"). The range reads job_events_xid in order (checked with
	// EXPLAIN: an index-only range scan, then the limit); one job's events come from
	// job_events_job and are sorted, a handful of rows.
	// Two statements rather than "$4 = '' OR job_id = $4": a cached generic plan of that
	// would read one job's events by walking every job's.
	q, args := `SELECT `+eventColumns+`, xid::text AS cursor_xid FROM job_events
		WHERE (xid, id) > ($1::text::xid8, $2) AND xid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY job_events.xid, job_events.id LIMIT $3`, []any{strconv.FormatUint(xid, 10), id, limit}
	if jobID != "" {
		q, args = `SELECT `+eventColumns+`, xid::text AS cursor_xid FROM job_events
		WHERE job_id = $4 AND (xid, id) > ($1::text::xid8, $2) AND xid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY job_events.xid, job_events.id LIMIT $3`, append(args, jobID)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("events since: %w", err)
	}
	defer rows.Close()
	var out []store.CursorEvent
	next := cursor
	for rows.Next() {
		var x string
		e, err := scanEvent(rows, &x)
		if err != nil {
			return nil, "", fmt.Errorf("events since: %w", err)
		}
		if next, err = cursorOf(x, e.ID); err != nil {
			return nil, "", fmt.Errorf("events since: %w", err)
		}
		out = append(out, store.CursorEvent{Event: e, Cursor: next})
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("events since: %w", err)
	}
	return out, next, nil
}

// TransitionsSince returns up to limit job events after cursor, in EventsSince's order
// and with its cursor, together with their jobs' kind and times, for the metrics' tail:
// a transition that commits late is counted once it can no longer be skipped.
func (s *Store) TransitionsSince(ctx context.Context, cursor string, limit int) ([]store.Transition, string, error) {
	xid, id, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.job_id, e.type, e.status, e.attempt, e.at, e.data::text,
			j.kind, j.created_at, j.started_at, e.xid::text
		FROM job_events e JOIN jobs j ON j.id = e.job_id
		WHERE (e.xid, e.id) > ($1::text::xid8, $2) AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY e.xid, e.id LIMIT $3`, strconv.FormatUint(xid, 10), id, limit)
	if err != nil {
		return nil, "", fmt.Errorf("transitions: %w", err)
	}
	defer rows.Close()
	var out []store.Transition
	next := cursor
	for rows.Next() {
		var (
			t       store.Transition
			status  string
			data    *string
			started *time.Time
			x       string
		)
		if err := rows.Scan(&t.EventID, &t.JobID, &t.Type, &status, &t.Attempt, &t.At, &data,
			&t.Kind, &t.CreatedAt, &started, &x); err != nil {
			return nil, "", fmt.Errorf("transitions: %w", err)
		}
		t.Status, t.At, t.CreatedAt = store.Status(status), t.At.UTC(), t.CreatedAt.UTC()
		if started != nil {
			t.StartedAt = started.UTC()
		}
		if data != nil {
			var d struct {
				Code string `json:"code"`
			}
			if jsonUnmarshal(*data, &d) == nil {
				t.Code = d.Code
			}
		}
		if next, err = cursorOf(x, t.EventID); err != nil {
			return nil, "", fmt.Errorf("transitions since: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("transitions: %w", err)
	}
	return out, next, nil
}

// EventHead returns the cursor of the present: "<xmin-1>.<newest id assigned>", read in
// one statement. Every transaction below the snapshot's xmin has ended and took its ids
// before the sequence was read, so each of its events is at or behind that position, and
// every event of a transaction still open or yet to start (xid >= xmin) is after it. It
// names a position, not a row, so it stays valid in an empty or pruned log.
func (s *Store) EventHead(ctx context.Context) (string, error) {
	var xmin string
	var last int64
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text,
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM job_events_id_seq)`).Scan(&xmin, &last); err != nil {
		return "", fmt.Errorf("event head: %w", err)
	}
	x, err := strconv.ParseUint(xmin, 10, 64)
	if err != nil || x == 0 {
		return "", fmt.Errorf("event head: snapshot xmin %q", xmin)
	}
	return store.MakeCursor(x-1, uint64(last)), nil
}

// EventsKept reports whether the log still holds every event after cursor: true when
// no event after the cursor's id was ever deleted (job_events_pruned, migration 0009),
// or, as SQLite's store judges it, when the oldest stored event is at most one id past
// it; false for a cursor ahead of the log, or for a bare decimal id, the cursor of a
// SQLite store (a queue copied from SQLite): neither is a position in this log. The
// first test matters because ids are not dense: an id that a transaction took from the
// sequence and then rolled back is never stored, and a head cursor read before such a
// gap would otherwise look pruned and cost its client a snapshot. Any other cursor this
// store did not hand out is store.ErrBadCursor.
func (s *Store) EventsKept(ctx context.Context, cursor string) (bool, error) {
	if _, err := strconv.ParseUint(cursor, 10, 64); err == nil {
		return false, nil
	}
	xid, id, err := parseCursor(cursor)
	if err != nil {
		return false, err
	}
	var (
		xmin    string
		oldest  *int64
		last    int64
		deleted int64
	)
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text, (SELECT min(id) FROM job_events),
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM job_events_id_seq),
		(SELECT through FROM job_events_pruned)`).Scan(&xmin, &oldest, &last, &deleted); err != nil {
		return false, fmt.Errorf("events kept: %w", err)
	}
	x, err := strconv.ParseUint(xmin, 10, 64)
	if err != nil {
		return false, fmt.Errorf("events kept: snapshot xmin %q", xmin)
	}
	first := last + 1
	if oldest != nil {
		first = *oldest
	}
	// Every cursor handed out has an xid below some earlier snapshot's xmin, which never
	// decreases, and an id already assigned.
	return xid < x && id <= last && (id >= deleted || id >= first-1), nil
}

// parseCursor reads "<xid>.<id>", as cursorOf writes it, with store.ParseCursor, which
// takes one spelling per position, as store.CompareCursors requires; "" is the start.
func parseCursor(c string) (xid uint64, id int64, err error) {
	var parts [2]uint64
	if err := store.ParseCursor(c, parts[:]); err != nil {
		return 0, 0, err
	}
	if parts[1] > math.MaxInt64 {
		return 0, 0, fmt.Errorf("%w: %q", store.ErrBadCursor, c)
	}
	return parts[0], int64(parts[1]), nil
}

// cursorOf is the cursor of the event id written by transaction xid (its xid8 as text).
func cursorOf(xid string, id int64) (string, error) {
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil || id < 0 {
		return "", fmt.Errorf("event %d: transaction id %q", id, xid)
	}
	return store.MakeCursor(x, uint64(id)), nil
}
