package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"sheetq/store"
)

// wtx is one write transaction: its clock reading, taken once, and the events it
// appends, which go in at its end (flush), under the event clock's lock.
type wtx struct {
	*sql.Tx
	now    time.Time
	events []pendingEvent
	// pruned is the highest id of the events the transaction deleted (deleteEvents).
	pruned int64
}

// pendingEvent is a job_events row to insert at the end of its transaction.
type pendingEvent struct {
	jobID   string
	typ     string
	status  store.Status
	attempt int
	data    *string
}

// event appends an event to the transaction (rule 10); data is marshalled to JSON, nil
// stores NULL. It is inserted by flush, just before COMMIT.
func (w *wtx) event(jobID, typ string, status store.Status, attempt int, data any) error {
	payload, err := eventPayload(data)
	if err != nil {
		return err
	}
	w.events = append(w.events, pendingEvent{jobID: jobID, typ: typ, status: status, attempt: attempt, data: payload})
	return nil
}

// maxRetries bounds how often tx runs a transaction again after a deadlock.
const maxRetries = 3

// tx runs fn in one transaction and commits it. A deadlock (the server rolled the
// transaction back whole) runs fn again, up to maxRetries times: fn must set its
// results afresh on every run, and a side effect it has (a publish) must know it ran.
func (s *Store) tx(ctx context.Context, fn func(*wtx) error) error {
	for try := 0; ; try++ {
		err := s.tx1(ctx, fn)
		if isDeadlock(err) && try < maxRetries && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// tx1 is one run of tx.
func (s *Store) tx1(ctx context.Context, fn func(*wtx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	w := &wtx{Tx: tx}
	if s.testClock != nil {
		w.now = s.testClock()
	} else if err := tx.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(&w.now); err != nil {
		tx.Rollback()
		return err
	}
	if err := fn(w); err != nil {
		tx.Rollback()
		return err
	}
	if err := w.flush(ctx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// flush inserts the transaction's events, after taking the event clock's row lock, which
// the transaction then holds until its COMMIT (events.go): no other transaction can take
// an event id until this one has committed or rolled back, so event ids commit in
// order. It is the transaction's last statement but for COMMIT, so that the lock is held
// for as short a time as possible.
func (w *wtx) flush(ctx context.Context) error {
	if len(w.events) == 0 && w.pruned == 0 {
		return nil
	}
	if _, err := w.ExecContext(ctx, lockClockSQL, w.pruned); err != nil {
		return fmt.Errorf("event clock: %w", err)
	}
	if len(w.events) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO job_events (job_id, at, type, status, attempt, data) VALUES `)
	args := make([]any, 0, 6*len(w.events))
	for i, e := range w.events {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, e.jobID, w.now, e.typ, string(e.status), e.attempt, e.data)
	}
	if _, err := w.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("add events: %w", err)
	}
	w.events = nil
	if afterFlush != nil {
		afterFlush()
	}
	return nil
}

// afterFlush, set by tests only, runs after a transaction's events are inserted and
// before its COMMIT: a test holds a transaction open there.
var afterFlush func()

// lockClockSQL takes the event clock's row lock, counts the transaction, and raises the
// pruned mark to its parameter.
const lockClockSQL = `UPDATE event_clock SET n = n + 1, pruned = GREATEST(pruned, ?) WHERE one = 1`

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

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// text is s made storable in a utf8mb4 column: text a job's run produced (an error
// message, a warning) may quote bytes of its source that are not UTF-8, which the
// server would refuse; they become U+FFFD, as PostgreSQL's store does with a NUL.
func text(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
