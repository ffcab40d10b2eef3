package mysql_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sheetq/store"
)

// TestClaimBatchNextAnswersWhatNextRunInWould: the read in the claim's transaction does
// not count the jobs the claim just took, counts a due job it left (limit reached) as due
// now, and a delayed one by its run_at; with nothing PENDING it says so. Only the
// claim's own queue counts.
func TestClaimBatchNextAnswersWhatNextRunInWould(t *testing.T) {
	st, _ := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	add := func(queue string, in time.Duration) store.Job {
		t.Helper()
		nj := store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`), Queue: queue}
		if in > 0 {
			nj.RunAt = time.Now().Add(in)
		}
		j, _, err := st.Enqueue(ctx, nj)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	claim := func(limit int) ([]store.Job, time.Duration, bool) {
		t.Helper()
		got, next, pending, err := st.ClaimBatchNext(ctx, "w", store.DefaultQueue, limit)
		if err != nil {
			t.Fatalf("ClaimBatchNext: %v", err)
		}
		return got, next, pending
	}
	if got, _, pending := claim(4); len(got) != 0 || pending {
		t.Fatalf("empty queue: claimed %d, pending %v; want 0, false", len(got), pending)
	}
	first, second := add("", 0), add("", 0)
	add("heavy", 0) // another queue's due job must not count
	add("", time.Hour)

	got, next, pending := claim(1)
	if len(got) != 1 || got[0].ID != first.ID || got[0].Status != store.StatusProcessing {
		t.Fatalf("claim(1) = %+v; want the first job, PROCESSING", got)
	}
	if !pending || next > 0 {
		t.Fatalf("claim(1) left a due job: next %v, pending %v; want <= 0, true", next, pending)
	}
	got, next, pending = claim(4)
	if len(got) != 1 || got[0].ID != second.ID {
		t.Fatalf("claim(4) = %+v; want the second job only", got)
	}
	if !pending || next < 50*time.Minute || next > time.Hour {
		t.Fatalf("claim(4) took every due job: next %v, pending %v; want the delayed job's hour", next, pending)
	}
	evs, err := st.Events(ctx, second.ID)
	if err != nil || len(evs) != 2 || evs[1].Type != "started" {
		t.Fatalf("claimed job's events: %+v, %v; want accepted, started", evs, err)
	}
}
