package pg_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/pg"
)

// The engine's dispatcher takes its next wake-up from the claim itself on PostgreSQL
// (jobs.ClaimNexter): the store must satisfy it.
var _ jobs.ClaimNexter = (*store.Store)(nil)

// TestClaimBatchNextAnswersWhatNextRunInWould: the read sent with the claim does not count
// the jobs the claim just took, counts a due job it left (limit reached) as due now, and a
// delayed one by its run_at; with nothing PENDING it says so. Only the claim's own queue
// counts.
func TestClaimBatchNextAnswersWhatNextRunInWould(t *testing.T) {
	st := openStore(t, freshSchema(t), pg.Options{})
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
	// What the two statements of one round trip committed is what ClaimBatch commits.
	if j, err := st.Get(ctx, second.ID); err != nil || j.Status != store.StatusProcessing || j.Attempt != 1 {
		t.Fatalf("claimed job read back: %+v, %v", j, err)
	}
	evs, err := st.Events(ctx, second.ID)
	if err != nil || len(evs) != 2 || evs[1].Type != "started" {
		t.Fatalf("claimed job's events: %+v, %v; want accepted, started", evs, err)
	}
	if _, _, _, err := st.ClaimBatchNext(ctx, "w", "", 1); err == nil {
		t.Fatal("ClaimBatchNext without a queue: no error")
	}
}

// TestDispatcherSleepsUntilTheDelayedJobFromTheClaim: on PostgreSQL the dispatcher learns
// the next run_at from its claim's round trip, not from NextRunIn. An engine that polls
// once an hour and hears no notification must still start a job delayed by a moment when
// it is due: only the claim's answer can wake it. It must not have asked NextRunIn.
func TestDispatcherSleepsUntilTheDelayedJobFromTheClaim(t *testing.T) {
	st := openStore(t, freshSchema(t), pg.Options{})
	j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`),
		RunAt: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 1)
	dir := t.TempDir()
	counted := &countNextRunIn{Store: st}
	e := jobs.New(counted, jobs.Config{
		Workers:      1,
		PollInterval: time.Hour,
		Heartbeat:    time.Hour,
		StaleAfter:   2 * time.Hour,
		TmpDir:       dir + "/tmp",
		ExportsDir:   dir + "/exports",
		WorkerID:     "node-a",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	e.Register("test", jobs.HandlerFunc(func(_ context.Context, r *jobs.Run) error {
		started <- r.JobID
		return nil
	}))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	if id := recv(t, "the delayed job to start", started); id != j.ID {
		t.Fatalf("started %s, want %s", id, j.ID)
	}
	if n := counted.calls.Load(); n != 0 {
		t.Fatalf("the dispatcher asked NextRunIn %d times; the claim answers it", n)
	}
}

// countNextRunIn is the PostgreSQL store, counting NextRunIn calls.
type countNextRunIn struct {
	*store.Store
	calls atomic.Int64
}

func (c *countNextRunIn) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	c.calls.Add(1)
	return c.Store.NextRunIn(ctx, queue)
}
