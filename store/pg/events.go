package pg

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// Event ids come from an identity column, and PostgreSQL hands sequence values out in
// the order transactions ask, not the order they commit: a transaction that took id 7 may
// commit after one that took id 8, so a reader that saw 8 and keeps "id > 8" as its
// cursor never sees 7 (ARCHITECTURE.md, "PostgreSQL"). EventsAfter reads by id all the
// same, as the conformance suite's callers expect; a tailer shared by nodes reads with
// EventsSince, whose cursor is safe across commits.

const eventColumns = `id, job_id, at, type, status, attempt, data`

// addEvent appends to job_events inside tx; every state change calls it (rule 10).
// data is marshalled to JSON; nil stores NULL.
func (s *Store) addEvent(ctx context.Context, tx pgx.Tx, jobID, typ string, status store.Status, attempt int, data any) error {
	payload, err := eventPayload(data)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt, data)
		VALUES ($2, `+nowSQL+`, $3, $4, $5, $6::json)`, s.now(), jobID, typ, string(status), attempt, payload); err != nil {
		return fmt.Errorf("add event %s: %w", typ, err)
	}
	return nil
}

// eventPayload is data as JSON text: a json.RawMessage as it is (empty: NULL), anything
// else marshalled; nil is NULL.
func eventPayload(data any) (*string, error) {
	switch d := data.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(d) == 0 {
			return nil, nil
		}
		s := string(d)
		return &s, nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("event data: %w", err)
	}
	s := string(b)
	return &s, nil
}

// EventsAfter returns up to limit events with an id greater than afterID, in id order
// (the core bounds the limit). Ids may commit out of order (see above).
func (s *Store) EventsAfter(ctx context.Context, afterID int64, limit int) ([]store.Event, error) {
	return s.queryEvents(ctx, `SELECT `+eventColumns+` FROM job_events WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
}

// Events returns a job's events in order.
func (s *Store) Events(ctx context.Context, jobID string) ([]store.Event, error) {
	if hasNUL(jobID) {
		return nil, nil
	}
	return s.queryEvents(ctx, `SELECT `+eventColumns+` FROM job_events WHERE job_id = $1 ORDER BY id`, jobID)
}

// AppendEvent appends an event of type typ with data to job id's timeline, with the
// job's status and attempt as they are: a job kind's note on another job (a webhook
// delivery's attempt on its export). A job removed meanwhile is skipped without an
// error: there is no timeline left to write to.
func (s *Store) AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error {
	payload, err := eventPayload(data)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt, data)
		SELECT id, `+nowSQL+`, $2, status, attempt, $3::json FROM jobs WHERE id = $4`, s.now(), typ, payload, id); err != nil {
		return fmt.Errorf("append event %s to %s: %w", typ, id, err)
	}
	return nil
}

func (s *Store) queryEvents(ctx context.Context, q string, args ...any) ([]store.Event, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return out, nil
}

// scanEvent reads eventColumns, then the extra columns into extra.
func scanEvent(rows pgx.Rows, extra ...any) (store.Event, error) {
	var (
		e      store.Event
		at     time.Time
		status string
		data   *string
	)
	if err := rows.Scan(append([]any{&e.ID, &e.JobID, &at, &e.Type, &status, &e.Attempt, &data}, extra...)...); err != nil {
		return store.Event{}, err
	}
	e.At, e.Status = at.UTC(), store.Status(status)
	if data != nil {
		e.Data = json.RawMessage(*data)
	}
	return e, nil
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
