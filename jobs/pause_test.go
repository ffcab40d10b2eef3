package jobs_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// TestPausedEngineKeepsItsJobs: after a pause longer than StaleAfter (SIGSTOP, a frozen
// VM), the reaper finds this engine's own running attempt stale. It renews the lease
// instead of taking the job back, whether its pass comes before any heartbeat or races
// them, and the stall guard does not count the pause as a stall. The job runs once and
// succeeds. The clock the engine and its store share jumps to make the pause: after
// each jump the last stamp looks stale to the reaper, as after a real pause (with
// heartbeats racing it, a stamp may come first, as it may after a real pause).
func TestPausedEngineKeepsItsJobs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
	}{
		{"reaper before any heartbeat", time.Hour},
		{"reaper racing heartbeats", 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			clk := storetest.ClockAt(time.Now())
			h.st = h.openStoreWith(t, sqlite.Options{Now: clk.Now})
			cfg := h.config()
			cfg.Now = clk.Now
			cfg.Heartbeat = tc.heartbeat
			cfg.StaleAfter = 2 * time.Hour
			cfg.StallAfter = 90 * time.Minute // shorter than each pause
			cfg.ReapInterval = time.Hour      // the test runs the reaper's passes itself
			started := make(chan string, 10)
			release := make(chan struct{})
			stopped := make(chan error, 1)
			var calls calls
			e := h.start(t, cfg, map[string]jobs.Handler{
				"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
					calls.add(run)
					w, err := run.Output()
					if err != nil {
						return err
					}
					if _, err := w.Write(payload(run.JobID)); err != nil {
						return err
					}
					run.Progress(1, 1)
					started <- run.JobID
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						stopped <- context.Cause(ctx)
						return ctx.Err()
					}
				}),
			})
			j := enqueue(t, e, "test", 3)
			recv(t, "handler start", started)

			ctx := context.Background()
			for i := range 5 {
				clk.Advance(cfg.StaleAfter + time.Minute)
				if err := jobs.ReapOnce(ctx, e); err != nil {
					t.Fatal(err)
				}
				got, err := h.st.Get(ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != store.StatusProcessing || got.Attempt != 1 || got.Worker != cfg.WorkerID {
					t.Fatalf("after pause %d the job is %s (attempt %d, %s: %s), want still PROCESSING attempt 1 here",
						i+1, got.Status, got.Attempt, got.ErrorCode, got.ErrorMessage)
				}
				select {
				case cause := <-stopped:
					t.Fatalf("after pause %d the engine stopped its own live attempt: %v", i+1, cause)
				default:
				}
			}
			close(release)
			done := h.waitStatus(t, j.ID, store.StatusSucceeded)
			if done.Attempt != 1 {
				t.Fatalf("succeeded on attempt %d, want 1", done.Attempt)
			}
			want := []string{store.EventAccepted, store.EventStarted, store.EventSucceeded}
			if got := eventTypes(h.events(t, j.ID)); !slices.Equal(got, want) {
				t.Fatalf("events = %v, want %v", got, want)
			}
			if c := calls.of(j.ID); !slices.Equal(c, []int{1}) {
				t.Fatalf("handler calls = %v, want one", c)
			}
			if b, err := os.ReadFile(jobs.FilePath(h.exports, j.ID)); err != nil || !bytes.Equal(b, payload(j.ID)) {
				t.Fatalf("published file = %q, %v", b, err)
			}
		})
	}
}

// TestStaleAttemptIsNotAnError: an attempt whose job was taken from it (another node
// recovered it during a pause) and that then ends is refused by the fence. That is the
// fence working, so it is logged at INFO, never at ERROR, whatever the outcome the
// attempt tried to record.
func TestStaleAttemptIsNotAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		ret  error
	}{
		{"success", nil},
		{"failure", jobs.Retryable("upstream", os.ErrDeadlineExceeded)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			logs := newLogRecorder()
			cfg := h.config()
			cfg.Logger = slog.New(logs)
			cfg.Heartbeat = time.Hour // the attempt learns of the loss only from the fence
			cfg.StaleAfter = 2 * time.Hour
			started := make(chan string, 10)
			release := make(chan struct{})
			e := h.start(t, cfg, map[string]jobs.Handler{"test": gated(3, started, release, tc.ret, nil)})
			j := enqueue(t, e, "test", 3)
			recv(t, "handler start", started)
			// Another node's reaper takes the job while this process is paused.
			if _, err := h.openStore(t).Recover(context.Background(), j.ID, 1, "taken by another node", time.Hour); err != nil {
				t.Fatal(err)
			}
			close(release)
			waitFor(t, "the attempt to end", func() bool { return e.Running() == 0 })
			h.noFile(t, j.ID)
			if errs := logs.atLeast(slog.LevelError); len(errs) > 0 {
				for _, r := range errs {
					t.Errorf("logged at %s: %s", r.Level, r.Message)
				}
			}
			if len(logs.find("no longer owns the job")) != 1 {
				t.Errorf("want one INFO record saying the attempt no longer owns the job")
			}
		})
	}
}
