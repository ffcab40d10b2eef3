package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// TestTransitionsSince: the metrics' tail reads the events after its cursor with their
// jobs' times, from EventHead on.
func TestTransitionsSince(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	if head, err := st.EventHead(ctx); err != nil || head != "0" {
		t.Fatalf("head of an empty store = %q, %v", head, err)
	}
	j := enqueue(t, st, store.NewJob{Kind: "report"})
	after, err := st.EventHead(ctx)
	if err != nil || after == "0" {
		t.Fatalf("head = %q, %v", after, err)
	}
	clk.Advance(time.Second)
	claim(t, st, "w")
	clk.Advance(time.Second)
	if _, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "upstream", Message: "boom"}, 0); err != nil {
		t.Fatal(err)
	}
	ts, next, err := st.TransitionsSince(ctx, after, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Fatalf("transitions = %+v, want started and attempt_failed", ts)
	}
	started, failed := ts[0], ts[1]
	if started.Type != store.EventStarted || started.Kind != "report" || started.JobID != j.ID || started.Attempt != 1 ||
		!started.CreatedAt.Equal(j.CreatedAt) || started.At.Sub(started.CreatedAt) != time.Second || store.CompareCursors(id(started.EventID), after) <= 0 {
		t.Errorf("started = %+v", started)
	}
	if failed.Type != store.EventAttemptFailed || failed.Code != "upstream" || failed.Status != store.StatusPending ||
		failed.EventID <= started.EventID || failed.StartedAt.Sub(j.CreatedAt) != time.Second {
		t.Errorf("attempt_failed = %+v", failed)
	}
	if next != id(failed.EventID) {
		t.Errorf("next = %q, want %d", next, failed.EventID)
	}
	if ts, next, err := st.TransitionsSince(ctx, after, 1); err != nil || len(ts) != 1 || ts[0].Type != store.EventStarted || next != id(ts[0].EventID) {
		t.Errorf("limit 1 = %+v, %q, %v", ts, next, err)
	}
	if ts, again, err := st.TransitionsSince(ctx, next, 10); err != nil || len(ts) != 0 || again != next {
		t.Errorf("after the last = %+v, %q, %v", ts, again, err)
	}
	if _, _, err := st.TransitionsSince(ctx, "x", 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("malformed cursor: %v", err)
	}
}
