package store_test

import (
	"context"
	"testing"
	"time"

	"sheetq/store"
)

func TestTransitionsAfter(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	st, _ := openStore(t, store.Options{Now: clk.Now})
	if id, err := st.LastEventID(ctx); err != nil || id != 0 {
		t.Fatalf("last event id of an empty store = %d, %v", id, err)
	}
	j := enqueue(t, st, store.NewJob{Kind: "report"})
	after, err := st.LastEventID(ctx)
	if err != nil || after == 0 {
		t.Fatalf("last event id = %d, %v", after, err)
	}
	clk.Advance(time.Second)
	claim(t, st, "w")
	clk.Advance(time.Second)
	if _, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "upstream", Message: "boom"}, 0); err != nil {
		t.Fatal(err)
	}
	ts, err := st.TransitionsAfter(ctx, after, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Fatalf("transitions = %+v, want started and attempt_failed", ts)
	}
	started, failed := ts[0], ts[1]
	if started.Type != store.EventStarted || started.Kind != "report" || started.JobID != j.ID || started.Attempt != 1 ||
		!started.CreatedAt.Equal(j.CreatedAt) || started.At.Sub(started.CreatedAt) != time.Second || started.EventID <= after {
		t.Errorf("started = %+v", started)
	}
	if failed.Type != store.EventAttemptFailed || failed.Code != "upstream" || failed.Status != store.StatusPending ||
		failed.EventID <= started.EventID || failed.StartedAt.Sub(j.CreatedAt) != time.Second {
		t.Errorf("attempt_failed = %+v", failed)
	}
	if ts, err := st.TransitionsAfter(ctx, after, 1); err != nil || len(ts) != 1 || ts[0].Type != store.EventStarted {
		t.Errorf("limit 1 = %+v, %v", ts, err)
	}
}
