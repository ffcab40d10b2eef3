package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// Retention removes a finished job's file after Retention (the job becomes EXPIRED) and
// the job itself, with its events and idempotency key, after twice that.
func TestJanitorExpiresFilesThenDeletesJobs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	e := h.start(t, h.config(), map[string]jobs.Handler{
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			w, err := run.Output()
			if err != nil {
				return err
			}
			_, err = w.Write(payload(run.JobID))
			return err
		}),
		"fail": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			return jobs.Permanentf("bad", "no")
		}),
	})
	ok, _, err := e.Enqueue(ctx, store.NewJob{Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "k1", RequestHash: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	bad := enqueue(t, e, "fail", 1)
	h.waitStatus(t, ok.ID, store.StatusSucceeded)
	h.waitStatus(t, bad.ID, store.StatusFailed)
	file := jobs.FilePath(h.exports, ok.ID)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("published file missing: %v", err)
	}

	// Retention is measured by the store's clock: the janitor's store, on the same file,
	// reads a clock the test moves.
	clock := storetest.ClockAt(time.Now())
	jan := jobs.NewJanitor(h.openStoreWith(t, sqlite.Options{Now: clock.Now}), jobs.JanitorConfig{Retention: time.Hour, ExportsDir: h.exports, Logger: testLogger()})

	if res, err := jan.Sweep(ctx); err != nil || res != (jobs.SweepResult{}) {
		t.Fatalf("fresh jobs: sweep = %+v, %v; want nothing removed", res, err)
	}

	clock.Advance(time.Hour + time.Minute)
	res, err := jan.Sweep(ctx)
	if err != nil || res.Expired != 1 || res.Deleted != 0 || res.BytesFreed != int64(len(payload(ok.ID))) {
		t.Fatalf("after retention: sweep = %+v, %v; want one file expired", res, err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file still there: %v", err)
	}
	if j, _ := h.st.Get(ctx, ok.ID); j.Status != store.StatusExpired {
		t.Fatalf("job is %s, want EXPIRED", j.Status)
	}
	if types := eventTypes(h.events(t, ok.ID)); types[len(types)-1] != store.EventExpired {
		t.Fatalf("events %v end without %q", types, store.EventExpired)
	}
	if j, _ := h.st.Get(ctx, bad.ID); j.Status != store.StatusFailed {
		t.Fatalf("failed job is %s, want it left alone until the row is due", j.Status)
	}

	clock.Advance(time.Hour)
	res, err = jan.Sweep(ctx)
	if err != nil || res.Deleted != 2 || res.Expired != 0 {
		t.Fatalf("after twice the retention: sweep = %+v, %v; want both rows deleted", res, err)
	}
	for _, id := range []string{ok.ID, bad.ID} {
		if _, err := h.st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("job %s still there: %v", id, err)
		}
		if evs := h.events(t, id); len(evs) != 0 {
			t.Fatalf("job %s left %d events", id, len(evs))
		}
	}
	// The idempotency key expired with its job: reusing it makes a new job.
	again, existed, err := e.Enqueue(ctx, store.NewJob{Kind: "test", Args: json.RawMessage(`{"other":1}`), IdempotencyKey: "k1", RequestHash: "h2"})
	if err != nil || existed || again.ID == ok.ID {
		t.Fatalf("reusing the expired key: %+v existed=%v err=%v; want a new job", again, existed, err)
	}
}

// With retention off, Start does nothing and Stop returns.
func TestJanitorOff(t *testing.T) {
	h := newHarness(t)
	jan := jobs.NewJanitor(h.st, jobs.JanitorConfig{ExportsDir: h.exports})
	if err := jan.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	jan.Stop()
}
