package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"sheetq/store"
)

// The event cursor no node can skip past (rule 10; ARCHITECTURE.md, "MySQL and MariaDB").
//
// AUTO_INCREMENT hands ids out as transactions insert, not as they commit: a
// transaction that took id 7 may commit after one that took id 8, and a reader that saw
// 8 and keeps "id > 8" as its cursor would never see 7. PostgreSQL's store records each
// event's transaction and reads below the snapshot's xmin; MySQL has no xmin a statement
// can read. So on MySQL the writers keep the order instead: a transaction inserts its
// events only after it has taken the row lock of event_clock (flush, tx.go), as its last
// statements before COMMIT, and InnoDB holds a row lock until the transaction ends. No
// two transactions hold it at once, so event ids are taken in the order transactions
// commit: when a reader sees id n committed, every id below n was taken by a transaction
// that had already ended (committed, or rolled back and never to appear). A read by id
// is then commit-safe, and the cursor is the event id, as on SQLite.
//
// It relies on InnoDB making a transaction visible to new reads before it releases its
// locks (trx_t::commit_in_memory), and on every path that inserts into job_events taking
// the lock first (flush; store/mysqlcopy holds it for its whole copy). What it costs:
// transactions that append events commit one at a time, each holding the lock for two
// statements and its COMMIT, so they no longer share log flushes (BENCHMARKS.md: about
// 2,000 such commits a second on the CI machine, against 5,000 without the lock).

const eventColumns = `id, job_id, at, type, status, attempt, data`

// deleteEvents deletes a job's events inside w and notes the highest id deleted, which
// flush records as event_clock.pruned (EventsKept).
func deleteEvents(ctx context.Context, w *wtx, jobID string) error {
	var top sql.NullInt64
	if err := w.QueryRowContext(ctx, `SELECT MAX(id) FROM job_events WHERE job_id = ?`, jobID).Scan(&top); err != nil {
		return err
	}
	if !top.Valid {
		return nil
	}
	if _, err := w.ExecContext(ctx, `DELETE FROM job_events WHERE job_id = ?`, jobID); err != nil {
		return err
	}
	w.pruned = max(w.pruned, top.Int64)
	return nil
}

// EventsAfter returns up to limit events with an id greater than afterID, in id order
// (the core bounds the limit). On this store ids commit in order.
func (s *Store) EventsAfter(ctx context.Context, afterID int64, limit int) ([]store.Event, error) {
	return s.queryEvents(ctx, `SELECT `+eventColumns+` FROM job_events WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
}

// Events returns a job's events in order.
func (s *Store) Events(ctx context.Context, jobID string) ([]store.Event, error) {
	return s.queryEvents(ctx, `SELECT `+eventColumns+` FROM job_events WHERE job_id = ? ORDER BY id`, jobID)
}

// AppendEvent appends an event of type typ with data to job id's timeline, with the
// job's status and attempt as they are: a job kind's note on another job (a webhook
// delivery's attempt on its export). A job removed meanwhile is skipped without an
// error: there is no timeline left to write to.
func (s *Store) AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error {
	err := s.tx(ctx, func(w *wtx) error {
		w.events = nil
		var (
			status  string
			attempt int
		)
		err := w.QueryRowContext(ctx, `SELECT status, attempt FROM jobs WHERE id = ? LOCK IN SHARE MODE`, id).Scan(&status, &attempt)
		if err == sql.ErrNoRows {
			return nil
		}
		if err != nil {
			return err
		}
		return w.event(id, typ, store.Status(status), attempt, data)
	})
	if err != nil {
		return fmt.Errorf("append event %s to %s: %w", typ, id, unstorable(err))
	}
	return nil
}

// EventsSince returns up to limit events after cursor (the core bounds the limit), each
// with its own cursor, and the cursor after the last one (cursor itself when there is
// none yet). The cursor is the event id (see above); "" reads from the start; any other
// text is store.ErrBadCursor.
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
	after, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q, args := `SELECT `+eventColumns+` FROM job_events WHERE id > ? ORDER BY id LIMIT ?`, []any{after, limit}
	if jobID != "" {
		q, args = `SELECT `+eventColumns+` FROM job_events WHERE job_id = ? AND id > ? ORDER BY id LIMIT ?`, []any{jobID, after, limit}
	}
	evs, err := s.queryEvents(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("events since: %w", err)
	}
	out := make([]store.CursorEvent, len(evs))
	next := cursor
	for i, e := range evs {
		next = store.MakeCursor(uint64(e.ID))
		out[i] = store.CursorEvent{Event: e, Cursor: next}
	}
	return out, next, nil
}

// TransitionsSince returns up to limit job events after cursor, in EventsSince's order
// and with its cursor, together with their jobs' kind and times, for the metrics' tail.
func (s *Store) TransitionsSince(ctx context.Context, cursor string, limit int) ([]store.Transition, string, error) {
	after, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT e.id, e.job_id, e.type, e.status, e.attempt, e.at, e.data,
			j.kind, j.created_at, j.started_at
		FROM job_events e JOIN jobs j ON j.id = e.job_id
		WHERE e.id > ? ORDER BY e.id LIMIT ?`, after, limit)
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
			data    sql.NullString
			started sql.NullTime
		)
		if err := rows.Scan(&t.EventID, &t.JobID, &t.Type, &status, &t.Attempt, &t.At, &data,
			&t.Kind, &t.CreatedAt, &started); err != nil {
			return nil, "", fmt.Errorf("transitions: %w", err)
		}
		t.Status, t.At, t.CreatedAt, t.StartedAt = store.Status(status), t.At.UTC(), t.CreatedAt.UTC(), utc(started)
		if data.Valid {
			var d struct {
				Code string `json:"code"`
			}
			if jsonUnmarshal(data.String, &d) == nil {
				t.Code = d.Code
			}
		}
		next = store.MakeCursor(uint64(t.EventID))
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("transitions: %w", err)
	}
	return out, next, nil
}

// eventRange reads, in one statement, the oldest stored event id (0: none), the newest
// position (the highest id stored or pruned), and the pruned mark.
func (s *Store) eventRange(ctx context.Context) (oldest, last, pruned int64, err error) {
	var o, l sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(id), MAX(id), (SELECT pruned FROM event_clock WHERE one = 1)
		FROM job_events`).Scan(&o, &l, &pruned); err != nil {
		return 0, 0, 0, fmt.Errorf("event range: %w", err)
	}
	return o.Int64, max(l.Int64, pruned), pruned, nil
}

// EventHead returns the cursor of the present: every event committed so far is at or
// behind it, every later one after it (ids commit in order, see above). It names a
// position, not a row, so it stays valid in an empty or pruned log.
func (s *Store) EventHead(ctx context.Context) (string, error) {
	_, last, _, err := s.eventRange(ctx)
	if err != nil {
		return "", err
	}
	return store.MakeCursor(uint64(last)), nil
}

// EventsKept reports whether the log still holds every event after cursor: true when no
// event after it was ever deleted (event_clock.pruned), or, as SQLite's store judges it,
// when the oldest stored event is at most one id past it; false for a cursor ahead of
// the log. Ids are not dense (a transaction that rolls back took one), so the oldest
// stored id alone would make a head read before such a gap look pruned.
func (s *Store) EventsKept(ctx context.Context, cursor string) (bool, error) {
	id, err := parseCursor(cursor)
	if err != nil {
		return false, err
	}
	oldest, last, pruned, err := s.eventRange(ctx)
	if err != nil {
		return false, err
	}
	first := last + 1
	if oldest > 0 {
		first = oldest
	}
	return id <= last && (id >= pruned || id >= first-1), nil
}

// parseCursor reads an event id cursor with store.ParseCursor, which takes one spelling
// per position; "" is the start.
func parseCursor(c string) (int64, error) {
	var parts [1]uint64
	if err := store.ParseCursor(c, parts[:]); err != nil {
		return 0, err
	}
	if parts[0] > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %q", store.ErrBadCursor, c)
	}
	return int64(parts[0]), nil
}

func (s *Store) queryEvents(ctx context.Context, q string, args ...any) ([]store.Event, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var (
			e      store.Event
			at     time.Time
			status string
			data   sql.NullString
		)
		if err := rows.Scan(&e.ID, &e.JobID, &at, &e.Type, &status, &e.Attempt, &data); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		e.At, e.Status = at.UTC(), store.Status(status)
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
