package sqlite_test

import (
	"context"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// TestEventDataDecodes: the events the store writes decode into their typed data, the
// shape pages and clients read (docs/api.md, "Live events").
func TestEventDataDecodes(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{})
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{ID: "a", MaxAttempts: 2})
	claim(t, st, "w1")
	if _, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "source", Message: "down"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Retry(ctx, j.ID, 0); err == nil {
		t.Fatal("retry of a PENDING job succeeded")
	}
	evs, err := st.Events(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	var started store.StartedData
	var failed store.FailureData
	for _, e := range evs {
		switch e.Type {
		case store.EventStarted:
			err = e.Decode(&started)
		case store.EventAttemptFailed:
			err = e.Decode(&failed)
		}
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
	}
	if started.Worker != "w1" {
		t.Errorf("started: %+v", started)
	}
	if failed.Code != "source" || failed.Message != "down" || failed.Permanent || failed.RetryAt == nil ||
		failed.RetryAt.Before(time.Now().Add(50*time.Second)) {
		t.Errorf("attempt_failed: %+v", failed)
	}
}
