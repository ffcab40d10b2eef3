package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
)

// TestWakeQueueRunsAJobAnotherNodeEnqueued: a job put in through the store alone, as
// another node does, waits for the poll (an hour here) until WakeQueue names its queue,
// as the PostgreSQL store's Listener does on a notification.
func TestWakeQueueRunsAJobAnotherNodeEnqueued(t *testing.T) {
	h := newHarness(t)
	idle := make(chan struct{}, 1)
	h.st2 = idleSignal{Store: h.st, queue: "reports", idle: idle}
	cfg := h.config()
	cfg.Queues = map[string]int{"reports": 1}
	ran := make(chan string, 1)
	e := h.start(t, cfg, map[string]jobs.Handler{"noop": jobs.HandlerFunc(func(_ context.Context, run *jobs.Run) error {
		ran <- run.JobID
		return nil
	})})
	recv(t, "the reports lane to go idle", idle)
	j := enqueueStore(t, h.st, "noop", store.NewJob{Queue: "reports"})
	e.WakeQueue("other") // no lane here: ignored
	e.WakeQueue("reports")
	if got := recv(t, "the job to run", ran); got != j.ID {
		t.Fatalf("ran %s, want %s", got, j.ID)
	}
	h.waitStatus(t, j.ID, store.StatusSucceeded)
}

// TestCheckCancelStopsAJobCancelledElsewhere: a cancel requested through the store alone,
// as on another node, reaches the running attempt at its next heartbeat (an hour here);
// CheckCancel makes that heartbeat now, and the job ends CANCELED. A CheckCancel for
// another job, or for every job before the request, stops nothing: the heartbeat's
// answer decides, not the call.
func TestCheckCancelStopsAJobCancelledElsewhere(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Heartbeat, cfg.StaleAfter = time.Hour, 2*time.Hour
	started := make(chan string, 1)
	stopped := make(chan error, 1)
	e := h.start(t, cfg, map[string]jobs.Handler{"block": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
		started <- run.JobID
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return ctx.Err()
	})})
	j := enqueue(t, e, "block", 1)
	recv(t, "the job to start", started)
	e.CheckCancel("")
	e.CheckCancel("some-other-job")
	if _, err := h.st.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	e.CheckCancel(j.ID)
	if cause := recv(t, "the handler's context to end", stopped); cause == nil || errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("handler stopped with %v", cause)
	}
	h.waitStatus(t, j.ID, store.StatusCanceled)
}

// idleSignal is a store that signals when queue's dispatcher found nothing to claim and
// asked when to look again (NextRunIn), which it does right before it sleeps: a job
// stored after the signal is claimed only after a wake-up (or the poll).
type idleSignal struct {
	jobs.Store
	queue string
	idle  chan<- struct{}
}

func (s idleSignal) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	d, err := s.Store.NextRunIn(ctx, queue)
	if queue == s.queue {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
	return d, err
}
