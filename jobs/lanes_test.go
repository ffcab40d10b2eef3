package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"sheetq/jobs"
	"sheetq/store"
)

// long is a handler that tells started when it runs and returns once release is closed
// (or its context ends): an hour-long export, as long as the test needs.
func long(started chan<- string, release <-chan struct{}) jobs.HandlerFunc {
	return func(ctx context.Context, run *jobs.Run) error {
		started <- run.JobID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func enqueueIn(t *testing.T, e *jobs.Engine, kind, queue string, priority int) store.Job {
	t.Helper()
	j, _, err := e.Enqueue(context.Background(), store.NewJob{Kind: kind, Queue: queue, Priority: priority, Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("enqueue %s in %q: %v", kind, queue, err)
	}
	return j
}

// lanes returns e.Lanes() by queue name.
func lanes(e *jobs.Engine) map[string]jobs.Lane {
	out := map[string]jobs.Lane{}
	for _, l := range e.Lanes() {
		out[l.Queue] = l
	}
	return out
}

// TestWebhookLaneRunsWhileExportsBusy (rule 27): every export worker runs a long export
// and another export waits, yet a webhook delivery enqueued after it starts and
// finishes in its own lane while the exports still run.
func TestWebhookLaneRunsWhileExportsBusy(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 2
	cfg.Queues = map[string]int{"webhooks": 1}
	started := make(chan string, 10)
	release := make(chan struct{})
	defer close(release)
	delivered := make(chan string, 1)
	e := h.start(t, cfg, map[string]jobs.Handler{
		"export": long(started, release),
		"webhook": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			delivered <- run.JobID
			return nil
		}),
	})
	for range cfg.Workers {
		enqueueIn(t, e, "export", "", 0)
	}
	for range cfg.Workers {
		recv(t, "an export to start", started)
	}
	waiting := enqueueIn(t, e, "export", "", 0) // ahead of the delivery in the old shared order
	d := enqueueIn(t, e, "webhook", "webhooks", 0)
	if got := recv(t, "the delivery to start while every export worker is busy", delivered); got != d.ID {
		t.Fatalf("delivered %s, want %s", got, d.ID)
	}
	h.waitStatus(t, d.ID, store.StatusSucceeded)
	if l := lanes(e); l["exports"].Busy != cfg.Workers || l["exports"].Workers != cfg.Workers || l["webhooks"].Workers != 1 {
		t.Fatalf("lanes while the exports run = %+v", e.Lanes())
	}
	if j := h.waitStatus(t, waiting.ID, store.StatusPending); j.Attempt != 0 {
		t.Fatalf("the waiting export ran: %+v", j)
	}
}

// TestHeavyLaneDoesNotDelayLightLane (rule 27): a heavy lane with more jobs than workers,
// all blocking and all first in priority and age, neither lends its work to the light
// lane nor takes the light lane's slot: the light job runs at once, and the heavy lane
// keeps to its one worker.
func TestHeavyLaneDoesNotDelayLightLane(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 1
	cfg.Queues = map[string]int{"heavy": 1, "light": 1}
	started := make(chan string, 10)
	release := make(chan struct{})
	lightRan := make(chan string, 1)
	e := h.start(t, cfg, map[string]jobs.Handler{
		"heavy": long(started, release),
		"light": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			lightRan <- run.JobID
			return nil
		}),
	})
	var heavy []store.Job
	for range 4 {
		heavy = append(heavy, enqueueIn(t, e, "heavy", "heavy", -10))
	}
	recv(t, "a heavy job to start", started)
	light := enqueueIn(t, e, "light", "light", 0)
	if got := recv(t, "the light job to run beside the heavy lane", lightRan); got != light.ID {
		t.Fatalf("light lane ran %s, want %s", got, light.ID)
	}
	h.waitStatus(t, light.ID, store.StatusSucceeded)
	// The light job's slot is freed just after its success is committed.
	waitFor(t, "the light lane's slot to be free", func() bool { return lanes(e)["light"].Busy == 0 })
	l := lanes(e)
	if l["heavy"].Busy != 1 || l["light"].Busy != 0 || l["exports"].Busy != 0 {
		t.Fatalf("lanes = %+v; want only the heavy lane's one worker busy", e.Lanes())
	}
	pending := 0
	for _, j := range heavy {
		if g, err := h.st.Get(context.Background(), j.ID); err != nil {
			t.Fatal(err)
		} else if g.Status == store.StatusPending {
			pending++
		}
	}
	if pending != len(heavy)-1 {
		t.Fatalf("%d heavy jobs still pending, want %d: another lane ran heavy work", pending, len(heavy)-1)
	}
	close(release)
	for _, j := range heavy {
		h.waitStatus(t, j.ID, store.StatusSucceeded)
	}
}

// TestEnqueueRefusesQueueWithoutLane: a job nothing would claim is refused, not left to sit.
func TestEnqueueRefusesQueueWithoutLane(t *testing.T) {
	h := newHarness(t)
	e := h.start(t, h.config(), map[string]jobs.Handler{"test": jobs.HandlerFunc(func(context.Context, *jobs.Run) error { return nil })})
	_, _, err := e.Enqueue(context.Background(), store.NewJob{Kind: "test", Queue: "nowhere", Args: json.RawMessage(`{}`)})
	if !errors.Is(err, jobs.ErrNoLane) {
		t.Fatalf("enqueue into a queue without a lane: err = %v, want ErrNoLane", err)
	}
	if got := e.Lanes(); len(got) != 1 || got[0].Queue != store.DefaultQueue || got[0].Workers != 2 {
		t.Fatalf("lanes of a default engine = %+v, want the exports lane of Workers", got)
	}
}
