package jobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

func TestPublishedFile(t *testing.T) {
	h := newHarness(t)
	var changes atomic.Int64
	cfg := h.config()
	cfg.OnChange = func() { changes.Add(1) }
	e := h.start(t, cfg, map[string]jobs.Handler{
		"file": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			w, err := run.Output()
			if err != nil {
				return err
			}
			// Two writes and a second Output call: one file, all the bytes.
			b := payload(run.JobID)
			if _, err := w.Write(b[:5]); err != nil {
				return err
			}
			w2, err := run.Output()
			if err != nil {
				return err
			}
			if _, err := w2.Write(b[5:]); err != nil {
				return err
			}
			run.Progress(3, 3)
			return nil
		}),
		"nofile": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error { return nil }),
	})

	j := enqueue(t, e, "file", 0)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	got, err := os.ReadFile(jobs.FilePath(h.exports, j.ID))
	if err != nil {
		t.Fatal(err)
	}
	if want := payload(j.ID); !bytes.Equal(got, want) {
		t.Fatalf("published %q, want %q", got, want)
	}
	sum := sha256.Sum256(got)
	if done.FileName != j.ID || // a kind that is no FileNamer publishes under the bare id
		done.FileSize != int64(len(got)) || done.FileSHA256 != hex.EncodeToString(sum[:]) ||
		done.Attempt != 1 || done.ProgressRows != 3 || done.Worker != "" {
		t.Fatalf("succeeded job = %+v", done)
	}
	if parts := h.partFiles(t); len(parts) > 0 {
		t.Fatalf("part files left: %v", parts)
	}
	evs := h.events(t, j.ID)
	if got, want := eventTypes(evs), []string{store.EventAccepted, store.EventStarted, store.EventSucceeded}; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if d := eventData(t, evs[2]); d["sha256"] != done.FileSHA256 || d["size"] != float64(done.FileSize) {
		t.Fatalf("succeeded event data = %v", d)
	}
	// OnChange hears accepted, started and succeeded; the last one after its commit, which
	// the poll above may have seen first.
	waitFor(t, "three change notifications", func() bool { return changes.Load() >= 3 })

	n := enqueue(t, e, "nofile", 0)
	nd := h.waitStatus(t, n.ID, store.StatusSucceeded)
	if nd.FileName != "" || nd.FileSize != 0 || nd.FileSHA256 != "" {
		t.Fatalf("a job without output has a file: %+v", nd)
	}
	h.noFile(t, n.ID)
}

// TestLostLeaseDuringRun: an attempt whose job was taken from it while it ran publishes
// nothing, whether the heartbeat notices first (the handler's ctx is cancelled) or the
// handler returns nil first (Succeed's fence refuses it).
func TestLostLeaseDuringRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
	}{
		{"heartbeat notices", 20 * time.Millisecond},
		{"succeed refused", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config()
			cfg.Heartbeat = tc.heartbeat
			cfg.StaleAfter = 2 * time.Hour // the test takes the job away itself
			started := make(chan string, 10)
			release := make(chan struct{})
			ctxDone := make(chan error, 1)
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
					started <- run.JobID
					select {
					case <-ctx.Done():
						ctxDone <- context.Cause(ctx)
					case <-release:
					}
					return nil // as if it finished its work regardless
				}),
			})
			j := enqueue(t, e, "test", 0)
			recv(t, "handler start", started)
			// An hour keeps the job from running again here.
			rec, err := h.st.Recover(context.Background(), j.ID, 1, "taken away by the test", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if tc.heartbeat < time.Hour {
				if cause := recv(t, "the handler's ctx to be cancelled", ctxDone); cause == nil {
					t.Fatal("ctx done without a cause")
				}
			} else {
				close(release)
			}
			waitFor(t, "the attempt to end", func() bool { return e.Running() == 0 })

			h.wantAsRecovered(t, rec)
			if c := calls.of(j.ID); len(c) != 1 {
				t.Fatalf("handler calls = %v", c)
			}
		})
	}
}

// TestReaperRecoversStaleJob: a job whose worker stops heartbeating is recovered by the
// periodic reaper after StaleAfter, and its next attempt runs here; a job that keeps
// heartbeating through the same reaper runs is left alone.
func TestReaperRecoversStaleJob(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 1 // the dispatcher waits for the slot, so the test can claim the job itself
	// Short enough to see recovery soon; 25 heartbeats long, so that the job which does
	// heartbeat survives a slow machine.
	cfg.StaleAfter = 500 * time.Millisecond
	started := make(chan string, 10)
	release := make(chan struct{})
	var calls calls
	e := h.start(t, cfg, map[string]jobs.Handler{
		"hold": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			started <- run.JobID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}),
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			return nil
		}),
	})
	hold := enqueue(t, e, "hold", 0)
	recv(t, "hold to start", started)

	// Another "process" claims a job and dies: no heartbeat ever comes.
	ghost := enqueueStore(t, h.st, "test", store.NewJob{})
	if c, err := h.st.Claim(context.Background(), "ghost/1", store.DefaultQueue); err != nil || c.ID != ghost.ID {
		t.Fatalf("ghost claim = %+v, %v", c, err)
	}
	rec := h.waitStatus(t, ghost.ID, store.StatusPending)
	if rec.ErrorCode != "lost" || rec.Attempt != 1 || !strings.Contains(rec.ErrorMessage, "ghost/1") {
		t.Fatalf("recovered job = %+v", rec)
	}
	if j, err := h.st.Get(context.Background(), hold.ID); err != nil || j.Status != store.StatusProcessing || j.Attempt != 1 {
		t.Fatalf("the heartbeating job was disturbed: %+v, %v", j, err)
	}

	close(release)
	done := h.waitStatus(t, ghost.ID, store.StatusSucceeded)
	if done.Attempt != 2 {
		t.Fatalf("recovered job succeeded on attempt %d, want 2", done.Attempt)
	}
	if c := calls.of(ghost.ID); !slices.Equal(c, []int{2}) {
		t.Fatalf("handler calls = %v, want one, attempt 2", c)
	}
	if j := h.waitStatus(t, hold.ID, store.StatusSucceeded); j.Attempt != 1 {
		t.Fatalf("hold = %+v", j)
	}
	want := []string{store.EventAccepted, store.EventStarted, store.EventRecovered, store.EventStarted, store.EventSucceeded}
	if got := eventTypes(h.events(t, ghost.ID)); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

// TestStartRecoversOrphans: at Start every PROCESSING row is an orphan: recovered at once,
// or completed from its file when that was already published; stale part files go.
func TestStartRecoversOrphans(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	rerun := enqueueStore(t, h.st, "test", store.NewJob{})
	published := enqueueStore(t, h.st, "test", store.NewJob{})
	last := enqueueStore(t, h.st, "test", store.NewJob{MaxAttempts: 1})
	for range 3 {
		if _, err := h.st.Claim(ctx, "dead/1", store.DefaultQueue); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.st.Heartbeat(ctx, published.ID, 1, 42, 42); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{h.tmp, h.exports} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := []byte("published before the crash")
	if err := os.WriteFile(jobs.FilePath(h.exports, published.ID), file, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{rerun.ID + ".1.part", "other.3.part", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(h.tmp, name), []byte("debris"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cfg := h.config()
	cfg.StaleAfter = time.Hour // only the startup sweep can recover anything
	var calls calls
	h.start(t, cfg, map[string]jobs.Handler{
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			return nil
		}),
	})

	// All of this happened inside Start.
	if parts := h.partFiles(t); len(parts) > 0 {
		t.Fatalf("stale part files left after Start: %v", parts)
	}
	if _, err := os.Stat(filepath.Join(h.tmp, "keep.txt")); err != nil {
		t.Fatalf("Start removed a file that is not a part file: %v", err)
	}
	if types := eventTypes(h.events(t, rerun.ID)); !slices.Contains(types, store.EventRecovered) {
		t.Fatalf("orphan not recovered during Start: events %v", types)
	}
	fromFile, err := h.st.Get(ctx, published.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	if fromFile.Status != store.StatusSucceeded || fromFile.Attempt != 1 || fromFile.FileSize != int64(len(file)) ||
		fromFile.FileSHA256 != hex.EncodeToString(sum[:]) || fromFile.FileName != published.ID || fromFile.ProgressRows != 42 {
		t.Fatalf("orphan with a published file = %+v, want SUCCEEDED from that file", fromFile)
	}
	if got := eventTypes(h.events(t, published.ID)); got[len(got)-1] != store.EventCompletedFromFile {
		t.Fatalf("events = %v", got)
	}
	if j, err := h.st.Get(ctx, last.ID); err != nil || j.Status != store.StatusFailed || j.ErrorCode != "lost" {
		t.Fatalf("orphan on its last attempt = %+v, %v; want FAILED", j, err)
	}

	if j := h.waitStatus(t, rerun.ID, store.StatusSucceeded); j.Attempt != 2 {
		t.Fatalf("rerun orphan = %+v, want success on attempt 2", j)
	}
	if c := calls.of(rerun.ID); !slices.Equal(c, []int{2}) {
		t.Fatalf("rerun orphan handler calls = %v", c)
	}
	if c := calls.of(published.ID); len(c) != 0 {
		t.Fatalf("handler ran for a job completed from its file: %v", c)
	}
	if c := calls.of(last.ID); len(c) != 0 {
		t.Fatalf("handler ran for a job out of attempts: %v", c)
	}
	if got, _ := os.ReadFile(jobs.FilePath(h.exports, published.ID)); !bytes.Equal(got, file) {
		t.Fatalf("published file changed: %q", got)
	}
}

// A run asked for by hand (Engine.Retry) of an export that failed 3 times starts fresh:
// its next failure waits the first backoff (at most base), not the fourth attempt's
// (base*8), while the attempt number keeps growing for the fences.
func TestManualRetryBacksOffFromTheStart(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.BackoffBase, cfg.BackoffMax = 40*time.Millisecond, 10*time.Second
	e := h.start(t, cfg, map[string]jobs.Handler{
		"flaky": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			return jobs.Retryable("upstream", fmt.Errorf("no on attempt %d", run.Attempt))
		}),
	})
	j := enqueue(t, e, "flaky", 3)
	h.waitStatus(t, j.ID, store.StatusFailed)
	r, err := e.Retry(context.Background(), j.ID, 2)
	if err != nil || r.Attempt != 3 || r.AttemptBase != 3 || r.MaxAttempts != 5 {
		t.Fatalf("retry = %+v, %v; want attempt 3, base 3, max 5", r, err)
	}
	done := h.waitStatus(t, j.ID, store.StatusFailed)
	if done.Attempt != 5 {
		t.Fatalf("after the manual run: attempt %d, want 5", done.Attempt)
	}
	var gaps []time.Duration
	for _, ev := range h.events(t, j.ID) {
		if ev.Type != store.EventAttemptFailed {
			continue
		}
		retryAt, err := time.Parse(time.RFC3339Nano, eventData(t, ev)["retry_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		gap := retryAt.Sub(ev.At)
		gaps = append(gaps, gap)
		// Attempts 1 and 2 of the first run, then attempt 4 (the first of the manual
		// one): each waits its place in its own run.
		n := ev.Attempt
		if ev.Attempt > 3 {
			n = ev.Attempt - 3
		}
		if ceiling := cfg.BackoffBase << (n - 1); gap > ceiling+time.Millisecond {
			t.Fatalf("attempt %d waited %s before its retry, more than %s (attempt %d of its run)", ev.Attempt, gap, ceiling, n)
		}
	}
	if len(gaps) != 3 {
		t.Fatalf("%d retries scheduled (%v), want 3: attempts 1, 2 and 4", len(gaps), gaps)
	}
}

func TestRetriesWithBackoffThenFail(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	var calls calls
	e := h.start(t, cfg, map[string]jobs.Handler{
		"flaky": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			return jobs.Retryable("upstream", fmt.Errorf("upstream said no on attempt %d", run.Attempt))
		}),
		"plain": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			return errors.New("unmarked")
		}),
	})
	j := enqueue(t, e, "flaky", 3)
	done := h.waitStatus(t, j.ID, store.StatusFailed)
	if done.Attempt != 3 || done.ErrorCode != "upstream" || done.ErrorMessage != "upstream said no on attempt 3" || done.FinishedAt.IsZero() {
		t.Fatalf("failed job = %+v", done)
	}
	if c := calls.of(j.ID); !slices.Equal(c, []int{1, 2, 3}) {
		t.Fatalf("attempts run = %v", c)
	}
	evs := h.events(t, j.ID)
	want := []string{store.EventAccepted,
		store.EventStarted, store.EventAttemptFailed,
		store.EventStarted, store.EventAttemptFailed,
		store.EventStarted, store.EventFailed}
	if got := eventTypes(evs); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i, ev := range evs {
		switch ev.Type {
		case store.EventAttemptFailed:
			d := eventData(t, ev)
			if d["code"] != "upstream" || d["message"] != fmt.Sprintf("upstream said no on attempt %d", ev.Attempt) || d["permanent"] != false {
				t.Fatalf("attempt %d failed event data = %v", ev.Attempt, d)
			}
			retryAt, err := time.Parse(time.RFC3339Nano, d["retry_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			// The delay is at most base*2^(attempt-1) after the failure was recorded (the
			// exact jitter range is TestBackoff's); and no retry starts before it is due.
			ceiling := cfg.BackoffBase << (ev.Attempt - 1)
			if gap := retryAt.Sub(ev.At); gap > ceiling+time.Millisecond {
				t.Fatalf("attempt %d: retry %s after the failure, more than %s", ev.Attempt, gap, ceiling)
			}
			next := evs[i+1]
			if next.Type != store.EventStarted || next.At.Before(retryAt.Truncate(time.Millisecond)) {
				t.Fatalf("attempt %d started at %v, before its retry_at %v", next.Attempt, next.At, retryAt)
			}
		case store.EventFailed:
			if d := eventData(t, ev); d["code"] != "upstream" || d["message"] != "upstream said no on attempt 3" || d["retry_at"] != nil {
				t.Fatalf("final failed event data = %v", d)
			}
		}
	}

	p := enqueue(t, e, "plain", 1)
	if pf := h.waitStatus(t, p.ID, store.StatusFailed); pf.ErrorCode != "error" || pf.ErrorMessage != "unmarked" {
		t.Fatalf("unmarked error = %+v, want code error", pf)
	}
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	h := newHarness(t)
	var calls calls
	e := h.start(t, h.config(), map[string]jobs.Handler{
		"bad": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			if _, err := run.Output(); err != nil {
				return err
			}
			return fmt.Errorf("wrapped: %w", jobs.Permanentf("bad_params", "from must be before to"))
		}),
	})
	j := enqueue(t, e, "bad", 5)
	done := h.waitStatus(t, j.ID, store.StatusFailed)
	if done.Attempt != 1 || done.ErrorCode != "bad_params" || !strings.Contains(done.ErrorMessage, "from must be before to") {
		t.Fatalf("failed job = %+v", done)
	}
	if c := calls.of(j.ID); len(c) != 1 {
		t.Fatalf("handler calls = %v, want 1", c)
	}
	evs := h.events(t, j.ID)
	if got := eventTypes(evs); !slices.Equal(got, []string{store.EventAccepted, store.EventStarted, store.EventFailed}) {
		t.Fatalf("events = %v", got)
	}
	if d := eventData(t, evs[2]); d["permanent"] != true || d["code"] != "bad_params" {
		t.Fatalf("failed event data = %v", d)
	}
	h.noFile(t, j.ID)
}

func TestPanicIsAFailedAttempt(t *testing.T) {
	h := newHarness(t)
	var calls calls
	e := h.start(t, h.config(), map[string]jobs.Handler{
		"panicky": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			if run.Attempt == 1 {
				w, _ := run.Output()
				w.Write([]byte("half a file"))
				panic("boom")
			}
			return nil
		}),
	})
	j := enqueue(t, e, "panicky", 3)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	if done.Attempt != 2 {
		t.Fatalf("job = %+v, want success on attempt 2", done)
	}
	evs := h.events(t, j.ID)
	if got := eventTypes(evs); !slices.Equal(got, []string{store.EventAccepted, store.EventStarted, store.EventAttemptFailed, store.EventStarted, store.EventSucceeded}) {
		t.Fatalf("events = %v", got)
	}
	if d := eventData(t, evs[2]); d["code"] != "panic" || !strings.Contains(d["message"].(string), "boom") {
		t.Fatalf("panic event data = %v", d)
	}
	h.noFile(t, j.ID) // the panicking attempt's part file is gone; attempt 2 wrote none
}

// TestStallGuard uses the engine's clock: the stall guard measures time since the last
// progress with it, so advancing it decides the outcome without racing real time.
func TestStallGuard(t *testing.T) {
	const stall = 100 * time.Millisecond
	newEngine := func(t *testing.T, h *harness, clk *storetest.Clock, hd jobs.Handler) *jobs.Engine {
		cfg := h.config()
		cfg.Now = clk.Now
		cfg.StallAfter = stall
		cfg.Heartbeat = 5 * time.Millisecond
		cfg.StaleAfter = time.Hour
		return h.start(t, cfg, map[string]jobs.Handler{"test": hd})
	}

	t.Run("silent handler is stalled", func(t *testing.T) {
		h := newHarness(t)
		clk := storetest.ClockAt(time.Now())
		started := make(chan string, 10)
		e := newEngine(t, h, clk, blocker(true, started))
		j := enqueue(t, e, "test", 1)
		recv(t, "handler start", started)
		// A stamped heartbeat means the guard has read the clock as its starting point;
		// only then does moving it past StallAfter (once, and not further) mean anything.
		waitFor(t, "a heartbeat", func() bool {
			got, err := h.st.Get(context.Background(), j.ID)
			return err == nil && got.HeartbeatAt.After(got.StartedAt)
		})
		clk.Advance(stall + stall/10)
		got := h.waitStatus(t, j.ID, store.StatusFailed)
		if got.ErrorCode != "stalled" || got.Attempt != 1 {
			t.Fatalf("stalled job = %+v", got)
		}
		h.noFile(t, j.ID)
	})

	t.Run("progressing handler is not", func(t *testing.T) {
		h := newHarness(t)
		clk := storetest.ClockAt(time.Now())
		const steps = 8 // each step moves the clock half of StallAfter: 4x StallAfter in all
		e := newEngine(t, h, clk, jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			for i := int64(1); i <= steps; i++ {
				run.Progress(i, steps)
				clk.Advance(stall / 2)
				// Let a heartbeat (and its stall check) see this step before the next.
				deadline := time.Now().Add(waitTimeout)
				for {
					j, err := h.st.Get(ctx, run.JobID)
					if err != nil {
						return err
					}
					if j.ProgressRows >= i {
						break
					}
					if time.Now().After(deadline) {
						return jobs.Permanentf("test", "no heartbeat carried progress %d", i)
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(time.Millisecond):
					}
				}
			}
			return nil
		}))
		j := enqueue(t, e, "test", 1)
		if done := h.waitStatus(t, j.ID, store.StatusSucceeded); done.Attempt != 1 || done.ProgressRows != steps {
			t.Fatalf("progressing job = %+v", done)
		}
	})
}

func TestBoundedPool(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 2
	// All ten are runnable before the engine starts: only the pool's bound holds them back.
	var ids []string
	for range 10 {
		ids = append(ids, enqueueStore(t, h.st, "slow", store.NewJob{MaxAttempts: 1}).ID)
	}
	var cur, peak atomic.Int64
	both := make(chan struct{})
	var bothOnce sync.Once
	h.start(t, cfg, map[string]jobs.Handler{
		"slow": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			n := cur.Add(1)
			defer cur.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if n == 2 {
				bothOnce.Do(func() { close(both) })
			}
			// The first jobs wait for a second to run beside them, proving two workers;
			// every job then holds its slot a little, as slow work would.
			select {
			case <-both:
			case <-time.After(waitTimeout):
				return jobs.Permanentf("test", "never two jobs at once")
			}
			time.Sleep(5 * time.Millisecond)
			return nil
		}),
	})
	for _, id := range ids {
		h.waitStatus(t, id, store.StatusSucceeded)
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("at most %d handlers ran at once, want exactly 2", p)
	}
}

// TestWakeStartsJobPromptly: with an hour-long poll, only the wake-up from Enqueue can
// start a job on an idle engine within the deadline.
func TestWakeStartsJobPromptly(t *testing.T) {
	h := newHarness(t)
	// A job due tomorrow makes the idle dispatcher read the engine's store's clock (its
	// failed claim, then NextRunIn) right before it sleeps: that read tells the test the
	// engine is idle (no job has run, so nothing else reads it; the start-up sweep does
	// not, and the reaper's first tick is twenty minutes away). A read a little before
	// the sleep is as good: the wake-up waits in its channel.
	enqueueStore(t, h.st, "test", store.NewJob{RunAt: time.Now().Add(24 * time.Hour)})
	idle := make(chan struct{}, 1)
	h.st = h.openStoreWith(t, sqlite.Options{Now: func() time.Time {
		select {
		case idle <- struct{}{}:
		default:
		}
		return time.Now()
	}})
	cfg := h.config()
	cfg.StaleAfter = time.Hour
	started := make(chan string, 10)
	e := h.start(t, cfg, map[string]jobs.Handler{
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			started <- run.JobID
			return nil
		}),
	})
	recv(t, "the dispatcher to go idle", idle)
	j := enqueue(t, e, "test", 0)
	select {
	case id := <-started:
		if id != j.ID {
			t.Fatalf("started %s, want %s", id, j.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an enqueued job did not start on an idle engine: the wake-up was lost")
	}
	h.waitStatus(t, j.ID, store.StatusSucceeded)
}

func TestCancelPending(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 1
	started := make(chan string, 10)
	var calls calls
	e := h.start(t, cfg, map[string]jobs.Handler{
		"hold": blocker(false, started),
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			return nil
		}),
	})
	hold := enqueue(t, e, "hold", 0)
	recv(t, "hold to start", started)
	j := enqueue(t, e, "test", 0)
	got, err := e.Cancel(context.Background(), j.ID)
	if err != nil || got.Status != store.StatusCanceled || got.FinishedAt.IsZero() {
		t.Fatalf("cancel pending = %+v, %v", got, err)
	}
	if _, err := e.Cancel(context.Background(), j.ID); !errors.Is(err, store.ErrFinished) {
		t.Fatalf("second cancel: err = %v, want ErrFinished", err)
	}
	if _, err := e.Cancel(context.Background(), hold.ID); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(t, hold.ID, store.StatusCanceled)
	// A job enqueued after the canceled one runs after it would have: it never will.
	later := enqueue(t, e, "test", 0)
	h.waitStatus(t, later.ID, store.StatusSucceeded)
	if c := calls.of(j.ID); len(c) != 0 {
		t.Fatalf("canceled pending job ran: %v", c)
	}
	if got := eventTypes(h.events(t, j.ID)); !slices.Equal(got, []string{store.EventAccepted, store.EventCanceled}) {
		t.Fatalf("events = %v", got)
	}
}

func TestCancelRunning(t *testing.T) {
	for _, tc := range []struct {
		name       string
		heartbeat  time.Duration
		viaStore   bool // as another process would: only the next heartbeat tells
		returnsNil bool // the handler ignores the cancel's error
	}{
		{"engine", time.Hour, false, false},
		{"engine, handler returns nil", time.Hour, false, true},
		{"store", 20 * time.Millisecond, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			cfg := h.config()
			cfg.Heartbeat = tc.heartbeat
			cfg.StaleAfter = 2 * time.Hour
			started := make(chan string, 10)
			var sawDone atomic.Bool
			e := h.start(t, cfg, map[string]jobs.Handler{
				"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
					w, err := run.Output()
					if err != nil {
						return err
					}
					w.Write(payload(run.JobID))
					started <- run.JobID
					<-ctx.Done()
					sawDone.Store(true)
					if tc.returnsNil {
						return nil
					}
					return ctx.Err()
				}),
			})
			j := enqueue(t, e, "test", 3)
			recv(t, "handler start", started)
			var got store.Job
			var err error
			if tc.viaStore {
				got, err = h.openStore(t).Cancel(context.Background(), j.ID)
			} else {
				got, err = e.Cancel(context.Background(), j.ID)
			}
			if err != nil || got.Status != store.StatusProcessing || !got.CancelRequested {
				t.Fatalf("cancel = %+v, %v", got, err)
			}
			done := h.waitStatus(t, j.ID, store.StatusCanceled)
			if !sawDone.Load() || done.Attempt != 1 || done.FileName != "" {
				t.Fatalf("canceled job = %+v (handler saw ctx done: %v)", done, sawDone.Load())
			}
			waitFor(t, "the attempt to end", func() bool { return e.Running() == 0 })
			h.noFile(t, j.ID)
			want := []string{store.EventAccepted, store.EventStarted, store.EventCancelRequested, store.EventCanceled}
			if got := eventTypes(h.events(t, j.ID)); !slices.Equal(got, want) {
				t.Fatalf("events = %v, want %v", got, want)
			}
		})
	}
}

func TestShutdownRequeuesWithoutSpendingAnAttempt(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.ShutdownGrace = 50 * time.Millisecond
	started := make(chan string, 10)
	e := h.start(t, cfg, map[string]jobs.Handler{"test": blocker(true, started)})
	j := enqueue(t, e, "test", 3)
	recv(t, "handler start", started)
	e.Stop()

	got, err := h.st.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusPending || got.Attempt != 0 || got.Worker != "" {
		t.Fatalf("after Stop = %+v, want PENDING with attempt 0", got)
	}
	evs := h.events(t, j.ID)
	if last := evs[len(evs)-1]; last.Type != store.EventRequeued || last.Attempt != 1 {
		t.Fatalf("last event = %+v, want requeued for attempt 1", last)
	}
	h.noFile(t, j.ID)

	var calls calls
	h.start(t, h.config(), map[string]jobs.Handler{
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			return nil
		}),
	})
	if done := h.waitStatus(t, j.ID, store.StatusSucceeded); done.Attempt != 1 {
		t.Fatalf("after restart = %+v, want success on attempt 1", done)
	}
	if c := calls.of(j.ID); !slices.Equal(c, []int{1}) {
		t.Fatalf("handler calls = %v", c)
	}
}

func TestShutdownLetsRunningJobFinish(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.ShutdownGrace = waitTimeout
	started := make(chan string, 10)
	release := make(chan struct{})
	var calls calls
	e := h.start(t, cfg, map[string]jobs.Handler{
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			w, err := run.Output()
			if err != nil {
				return err
			}
			started <- run.JobID
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			_, err = w.Write(payload(run.JobID))
			return err
		}),
	})
	j := enqueue(t, e, "test", 0)
	recv(t, "handler start", started)
	stopped := make(chan struct{})
	go func() { e.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a job was still running inside its grace period")
	case <-time.After(50 * time.Millisecond):
	}
	// Stop has stopped claiming: a job enqueued now waits for the next start.
	late := enqueue(t, e, "test", 0)
	close(release)
	recv(t, "Stop to return", stopped)

	done, err := h.st.Get(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != store.StatusSucceeded || done.Attempt != 1 {
		t.Fatalf("job finishing during Stop = %+v", done)
	}
	if b, err := os.ReadFile(jobs.FilePath(h.exports, j.ID)); err != nil || !bytes.Equal(b, payload(j.ID)) {
		t.Fatalf("published file = %q, %v", b, err)
	}
	if l, err := h.st.Get(context.Background(), late.ID); err != nil || l.Status != store.StatusPending || l.Attempt != 0 {
		t.Fatalf("job enqueued during Stop = %+v, %v; want untouched", l, err)
	}
	if c := calls.of(late.ID); len(c) != 0 {
		t.Fatalf("a job was claimed during Stop: %v", c)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	h := newHarness(t)
	for name, mod := range map[string]func(*jobs.Config){
		"no dirs":              func(c *jobs.Config) { c.TmpDir, c.ExportsDir = "", "" },
		"stale before beat":    func(c *jobs.Config) { c.StaleAfter = c.Heartbeat },
		"stale before 2 beats": func(c *jobs.Config) { c.StaleAfter = 2*c.Heartbeat - time.Millisecond },
		"negative workers":     func(c *jobs.Config) { c.Workers = -1 },
		"negative poll":        func(c *jobs.Config) { c.PollInterval = -time.Second },
		"backoff max < base":   func(c *jobs.Config) { c.BackoffMax = c.BackoffBase / 2 },
		"negative stallafter":  func(c *jobs.Config) { c.StallAfter = -time.Second },
		"lane without workers": func(c *jobs.Config) { c.Queues = map[string]int{"heavy": 0} },
		"exports in Queues":    func(c *jobs.Config) { c.Queues = map[string]int{store.DefaultQueue: 4} },
		"lane without a name":  func(c *jobs.Config) { c.Queues = map[string]int{"": 1} },
	} {
		cfg := h.config()
		mod(&cfg)
		e := jobs.New(h.st, cfg)
		if err := e.Start(context.Background()); err == nil {
			e.Stop()
			t.Errorf("%s: Start accepted %+v", name, cfg)
		}
	}
	// Exactly two heartbeats is the shortest staleness allowed, and Validate, which the
	// command line calls before anything starts, applies the same rule as Start.
	ok := h.config()
	ok.StaleAfter = 2 * ok.Heartbeat
	if err := ok.Validate(); err != nil {
		t.Errorf("stale-after = 2 heartbeats rejected: %v", err)
	}
	ok.StaleAfter--
	if err := ok.Validate(); err == nil {
		t.Error("Validate accepted stale-after under 2 heartbeats")
	}
	// The zero value with directories is valid: every other field has a default.
	e := jobs.New(h.st, jobs.Config{TmpDir: h.tmp, ExportsDir: h.exports, Logger: testLogger()})
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	e.Stop()
	if c := e.Config(); c.Workers != 2 || c.Heartbeat != 5*time.Second || c.StaleAfter != 30*time.Second || c.StallAfter != 0 {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestEnqueueUnknownKind(t *testing.T) {
	h := newHarness(t)
	e := h.start(t, h.config(), map[string]jobs.Handler{"test": jobs.HandlerFunc(func(context.Context, *jobs.Run) error { return nil })})
	if _, _, err := e.Enqueue(context.Background(), store.NewJob{Kind: "nope", Args: []byte(`{}`)}); err == nil {
		t.Fatal("enqueued a job of an unregistered kind")
	}
	// One put in behind the engine's back fails permanently instead of looping.
	j := enqueueStore(t, h.st, "nope", store.NewJob{})
	e.Wake()
	if f := h.waitStatus(t, j.ID, store.StatusFailed); f.ErrorCode != "unknown_kind" || f.Attempt != 1 {
		t.Fatalf("unknown kind = %+v", f)
	}
}

// TestStartRunsAgainWhenPublishedFileIsALink: an orphan whose exports/<id> is a
// link (to a file outside, planted while no server ran) was not published by us: it is
// recovered and run again, never completed from what the link points at, and its new
// file replaces the link.
func TestStartRunsAgainWhenPublishedFileIsALink(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	orphan := enqueueStore(t, h.st, "test", store.NewJob{})
	if _, err := h.st.Claim(ctx, "dead/1", store.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.exports, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("not an export"), 0o644); err != nil {
		t.Fatal(err)
	}
	final := jobs.FilePath(h.exports, orphan.ID)
	if err := os.Symlink(outside, final); err != nil {
		t.Fatal(err)
	}
	cfg := h.config()
	cfg.StaleAfter = time.Hour
	var calls calls
	h.start(t, cfg, map[string]jobs.Handler{
		"test": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			calls.add(run)
			w, err := run.Output()
			if err != nil {
				return err
			}
			_, err = w.Write(payload(run.JobID))
			return err
		}),
	})
	j := h.waitStatus(t, orphan.ID, store.StatusSucceeded)
	if j.Attempt != 2 || !slices.Equal(calls.of(orphan.ID), []int{2}) {
		t.Fatalf("job %+v, calls %v: want a second attempt that ran", j, calls.of(orphan.ID))
	}
	if types := eventTypes(h.events(t, orphan.ID)); slices.Contains(types, store.EventCompletedFromFile) {
		t.Fatalf("completed from a link: events %v", types)
	}
	fi, err := os.Lstat(final)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(payload(orphan.ID))) {
		t.Fatalf("published file %v (%v): want the new regular file", fi, err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "not an export" {
		t.Fatalf("the link's target was changed: %q", b)
	}
}
