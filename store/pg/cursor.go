package pg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// ErrBadCursor is the error for a cursor that EventsSince did not hand out.
var ErrBadCursor = errors.New("malformed event cursor")

// CursorEvent is an event and the cursor that resumes just after it (an SSE id).
type CursorEvent struct {
	store.Event
	// Cursor is opaque to callers: pass it to EventsSince on any store of the database.
	Cursor string
}

// EventsSince returns up to limit events after cursor (limit <= 0: 500, at most 10,000)
// in a commit-safe order, each with its own cursor, and the cursor after the last one
// (cursor itself when there is none yet). An empty cursor reads from the start; one that
// EventsSince did not hand out is ErrBadCursor. Unlike EventsAfter, an event whose
// transaction commits after a later one's is never skipped: it is delivered only once no
// earlier transaction can still be open (see above).
func (s *Store) EventsSince(ctx context.Context, cursor string, limit int) ([]CursorEvent, string, error) {
	xid, id, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = 500
	}
	limit = min(limit, 10_000)
	// One statement, so pg_current_snapshot() is the snapshot the rows are read with: a
	// transaction that commits while it runs is above that xmin and waits for the next read.
	// ORDER BY names the table's columns: a bare "xid" would be the text output column
	// (and "10" sorts before "9"). The range reads job_events_xid in order (checked with
	// EXPLAIN: an index-only range scan, then the limit).
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+`, xid::text AS cursor_xid FROM job_events
		WHERE (xid, id) > ($1::text::xid8, $2) AND xid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY job_events.xid, job_events.id LIMIT $3`, strconv.FormatUint(xid, 10), id, limit)
	if err != nil {
		return nil, "", fmt.Errorf("events since: %w", err)
	}
	defer rows.Close()
	var out []CursorEvent
	next := cursor
	for rows.Next() {
		var x string
		e, err := scanEvent(rows, &x)
		if err != nil {
			return nil, "", fmt.Errorf("events since: %w", err)
		}
		next = x + "." + strconv.FormatInt(e.ID, 10)
		out = append(out, CursorEvent{Event: e, Cursor: next})
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("events since: %w", err)
	}
	return out, next, nil
}

// parseCursor reads "<xid>.<id>" in decimal, as EventsSince writes it, and nothing else
// (no sign, no leading zeros), so that one position has one spelling; "" is the start.
func parseCursor(c string) (xid uint64, id int64, err error) {
	if c == "" {
		return 0, 0, nil
	}
	xs, is, ok := strings.Cut(c, ".")
	if ok {
		xid, err = strconv.ParseUint(xs, 10, 64)
	}
	if ok && err == nil {
		id, err = strconv.ParseInt(is, 10, 64)
	}
	if !ok || err != nil || id < 0 || strconv.FormatUint(xid, 10)+"."+strconv.FormatInt(id, 10) != c {
		return 0, 0, fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	return xid, id, nil
}
