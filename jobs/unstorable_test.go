package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
)

// refusing is a store that refuses some ends for good, as PostgreSQL refuses to end a
// job whose args an earlier version stored with a NUL (issue 36): store.ErrUnstorable.
type refusing struct {
	jobs.Store
	refuse func(store.Finish) bool
}

func (r refusing) FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished {
	out := make([]store.Finished, len(fs))
	var pass []store.Finish
	var at []int
	for i, f := range fs {
		if r.refuse(f) {
			out[i] = store.Finished{Err: fmt.Errorf("%s %s: %w", f.Outcome, f.ID, store.ErrUnstorable)}
			continue
		}
		pass, at = append(pass, f), append(at, i)
	}
	if len(pass) > 0 {
		for k, res := range r.Store.FinishBatch(ctx, pass) {
			out[at[k]] = res
		}
	}
	return out
}

// An end the store refuses for good is not retried with the worker's slot held
// (rule 14 retries only what may pass): a refused success is recorded as the attempt's
// permanent failure, with the store's reason; when that is refused too, the worker lets
// the job go, PROCESSING, for a reaper, and takes the next job.
func TestEndTheStoreRefusesForGood(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse func(store.Finish) bool
	}{
		{"success", func(f store.Finish) bool { return f.Outcome == store.Succeeded }},
		{"every end", func(store.Finish) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var poisoned string
			var mu sync.Mutex
			h.st2 = refusing{Store: h.st, refuse: func(f store.Finish) bool {
				mu.Lock()
				defer mu.Unlock()
				return f.ID == poisoned && tc.refuse(f)
			}}
			cfg := h.config()
			cfg.Workers = 1
			started := make(chan string, 10)
			release := make(chan struct{})
			close(release)
			var c calls
			e := h.start(t, cfg, map[string]jobs.Handler{"test": gated(3, started, release, nil, &c)})
			mu.Lock()
			j := enqueueStore(t, h.st, "test", store.NewJob{MaxAttempts: 3})
			poisoned = j.ID
			mu.Unlock()
			e.Stored(store.DefaultQueue)
			recv(t, "the job to run", started)

			if tc.name == "success" {
				done := h.waitStatus(t, j.ID, store.StatusFailed)
				if done.ErrorCode != "unstorable" || !strings.Contains(done.ErrorMessage, store.ErrUnstorable.Error()) || done.Attempt != 1 {
					t.Fatalf("job = %+v; want FAILED on attempt 1 with the store's reason", done)
				}
			} else {
				waitFor(t, "the worker to let the job go", func() bool { return e.Running() == 0 })
				if got, err := h.st.Get(context.Background(), j.ID); err != nil || got.Status != store.StatusProcessing {
					t.Fatalf("job = %s, %v; want PROCESSING, for a reaper", got.Status, err)
				}
			}
			// The job's row can read FAILED a moment before its worker has removed the
			// part file: wait for that, as for any end.
			waitFor(t, "the attempt's part file to be removed", func() bool { return len(h.partFiles(t)) == 0 })
			next := enqueue(t, e, "test", 1)
			h.waitStatus(t, next.ID, store.StatusSucceeded)
			if got := c.of(j.ID); !slices.Equal(got, []int{1}) {
				t.Errorf("handler calls of the refused job = %v, want one", got)
			}
		})
	}
}

// recoverRefusing is a store whose Recover fails for one job.
type recoverRefusing struct {
	jobs.Store
	id string
}

func (r recoverRefusing) Recover(ctx context.Context, id string, attempt int, reason string, retryIn time.Duration) (store.Job, error) {
	if id == r.id {
		return store.Job{}, fmt.Errorf("recover %s: %w", id, store.ErrUnstorable)
	}
	return r.Store.Recover(ctx, id, attempt, reason, retryIn)
}

// One orphan the store will not take back does not stop a node's start (issue 36: "recover
// orphans" failed every node's start): it is logged by its id and left for the next
// pass, and the other orphans are recovered.
func TestStartLeavesAnOrphanItCannotRecover(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	stuck := enqueueStore(t, h.st, "test", store.NewJob{})
	other := enqueueStore(t, h.st, "test", store.NewJob{})
	for range 2 {
		if _, err := h.st.Claim(ctx, "dead/1", store.DefaultQueue); err != nil {
			t.Fatal(err)
		}
	}
	h.st2 = recoverRefusing{Store: h.st, id: stuck.ID}
	var logs lockedBuffer
	cfg := h.config()
	cfg.StaleAfter = time.Hour // only the start-up sweep recovers anything
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	h.start(t, cfg, map[string]jobs.Handler{"test": jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Run) error {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return ctx.Err()
	})})
	if j, err := h.st.Get(ctx, other.ID); err != nil || j.Status == store.StatusProcessing && j.Attempt == 1 {
		t.Fatalf("the other orphan = %s attempt %d, %v; want it recovered during Start", j.Status, j.Attempt, err)
	}
	if j, err := h.st.Get(ctx, stuck.ID); err != nil || j.Status != store.StatusProcessing || j.Attempt != 1 {
		t.Fatalf("the stuck orphan = %s attempt %d, %v; want it left PROCESSING", j.Status, j.Attempt, err)
	}
	out := logs.String()
	if !strings.Contains(out, "job_id="+stuck.ID) || !strings.Contains(out, "level=ERROR") ||
		!strings.Contains(out, store.ErrUnstorable.Error()) {
		t.Errorf("the log does not name the stuck orphan and why:\n%s", out)
	}
}

// lockedBuffer is a bytes.Buffer that a logger and a test may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
