package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/storetest"
)

// deaf is a handler that writes a little, reports progress, then blocks until unblock is
// closed, ignoring its context, as a source blocked in a read of a FIFO that never
// delivers does. When it is let go it tries to go on: its write, its Output and its
// progress report, and what they returned, go to after.
func deaf(started chan<- string, unblock <-chan struct{}, after chan<- error) jobs.HandlerFunc {
	return func(ctx context.Context, run *jobs.Run) error {
		w, err := run.Output()
		if err != nil {
			return err
		}
		if _, err := w.Write(payload(run.JobID)); err != nil {
			return err
		}
		run.Progress(1, -1)
		started <- run.JobID
		<-unblock
		_, werr := w.Write([]byte("written after the engine gave up"))
		_, oerr := run.Output()
		run.Progress(2, 2)
		run.Warn("a warning after the engine gave up")
		after <- errors.Join(werr, oerr)
		return nil // as if it had finished its work
	}
}

// TestAbandonedHandlerFreesItsSlot: when the stall guard stops an attempt whose handler
// ignores its context, the engine waits AbandonAfter, then abandons the handler: the
// attempt ends FAILED "stalled" (not "lost"), its part file is removed, the one worker
// slot is free for the next job, and the abandoned handler is counted. When the handler
// returns at last, its writes are refused and nothing changes.
func TestAbandonedHandlerFreesItsSlot(t *testing.T) {
	const stall = 100 * time.Millisecond
	h := newHarness(t)
	clk := storetest.ClockAt(time.Now())
	cfg := h.config()
	cfg.Workers = 1
	cfg.Now = clk.Now
	cfg.StallAfter = stall
	cfg.Heartbeat = 5 * time.Millisecond
	cfg.StaleAfter = time.Hour // no reaper: the guard alone must free the slot
	cfg.AbandonAfter = 50 * time.Millisecond
	started := make(chan string, 10)
	unblock := make(chan struct{})
	after := make(chan error, 1)
	var calls calls
	e := h.start(t, cfg, map[string]jobs.Handler{
		"deaf": deaf(started, unblock, after),
		"quick": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			w, err := run.Output()
			if err != nil {
				return err
			}
			_, err = w.Write(payload(run.JobID))
			return err
		}),
	})
	defer close(unblock) // if the test fails early, let the handler go

	j := enqueue(t, e, "deaf", 1)
	recv(t, "the deaf handler to start", started)
	// The handler reported progress before it said so. The guard reads the progress
	// after each stamp, and takes the clock then as the time of the move; moved before
	// that read, the clock would never again be StallAfter past it. A stamp newer than
	// one that was read after the handler started was written after the progress, and
	// the stamp after that comes after its read.
	beat := func() time.Time {
		got, err := h.st.Get(context.Background(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.HeartbeatAt
	}
	seen := beat()
	for range 2 {
		waitFor(t, "a heartbeat", func() bool {
			b := beat()
			if b.After(seen) {
				seen = b
				return true
			}
			return false
		})
	}
	clk.Advance(stall + stall/10)

	failed := h.waitStatus(t, j.ID, store.StatusFailed)
	if failed.ErrorCode != "stalled" || !strings.Contains(failed.ErrorMessage, "abandoned") || failed.Attempt != 1 {
		t.Fatalf("abandoned attempt ended %+v, want FAILED stalled, saying it was abandoned", failed)
	}
	waitFor(t, "the slot to be free", func() bool { return e.Running() == 0 })
	if alive, total := e.Abandoned(); alive != 1 || total != 1 {
		t.Fatalf("abandoned = %d alive, %d in all; want 1, 1", alive, total)
	}
	h.noFile(t, j.ID)

	// The only worker takes the next job although the deaf handler still runs.
	q := enqueue(t, e, "quick", 1)
	h.waitStatus(t, q.ID, store.StatusSucceeded)
	if c := calls.of(q.ID); !slices.Equal(c, []int{1}) {
		t.Fatalf("quick job calls = %v", c)
	}

	unblock <- struct{}{} // let the deaf handler go on (the deferred close ends the test's hold)
	if err := recv(t, "the deaf handler to try to go on", after); err == nil {
		t.Fatal("the abandoned handler could still write or open its output")
	}
	waitFor(t, "the abandoned handler to be counted as gone", func() bool {
		alive, total := e.Abandoned()
		return alive == 0 && total == 1
	})
	got, err := h.st.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusFailed || got.ProgressRows != failed.ProgressRows || len(got.Warnings) != 0 {
		t.Fatalf("the abandoned handler's return changed its job: %+v", got)
	}
	h.noFile(t, j.ID)
	want := []string{store.EventAccepted, store.EventStarted, store.EventFailed}
	evs := h.events(t, j.ID)
	if types := eventTypes(evs); !slices.Equal(types, want) {
		t.Fatalf("events = %v, want %v", types, want)
	}
	if d := eventData(t, evs[2]); d["code"] != "stalled" {
		t.Fatalf("failed event data = %v, want code stalled", d)
	}
}

// TestShutdownAbandonsDeafHandler: Stop stops a handler that ignores its context the
// same way: after the grace period and AbandonAfter, the job is requeued without
// spending its attempt, and Stop returns.
func TestShutdownAbandonsDeafHandler(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.ShutdownGrace = 20 * time.Millisecond
	cfg.AbandonAfter = 20 * time.Millisecond
	started := make(chan string, 10)
	unblock := make(chan struct{})
	defer close(unblock)
	e := h.start(t, cfg, map[string]jobs.Handler{"deaf": deaf(started, unblock, make(chan error, 1))})
	j := enqueue(t, e, "deaf", 3)
	recv(t, "the deaf handler to start", started)
	stopped := make(chan struct{})
	go func() { e.Stop(); close(stopped) }()
	recv(t, "Stop to return", stopped)

	got, err := h.st.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusPending || got.Attempt != 0 {
		t.Fatalf("after Stop = %+v, want PENDING with attempt 0", got)
	}
	evs := h.events(t, j.ID)
	last := evs[len(evs)-1]
	if d := eventData(t, last); last.Type != store.EventRequeued || !strings.Contains(d["reason"].(string), "did not stop") {
		t.Fatalf("last event = %s %v, want requeued because the handler did not stop", last.Type, d)
	}
	h.noFile(t, j.ID)
	if alive, total := e.Abandoned(); alive != 1 || total != 1 {
		t.Fatalf("abandoned = %d alive, %d in all; want 1, 1", alive, total)
	}
}
