package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"sheetq/jobs"
	"sheetq/store"
)

// A handler that answers the engine's checkpoint requests has its checkpoints written,
// fenced, at the heartbeat; the next attempt reads the last one in Run.Resume, and its
// Resumed call puts "resumed" on the timeline and reaches OnResumed. The first attempt
// fails after its checkpoint reached the store; the checkpoint it made after that (not
// yet written by a heartbeat) is saved with the failure, so the second attempt starts
// from the very last one. A success clears it.
func TestCheckpointsReachTheNextAttempt(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	var (
		mu      sync.Mutex
		resumes []string
		seen    = map[int]string{}
	)
	cfg.OnResumed = func(kind string, rows int64) {
		mu.Lock()
		defer mu.Unlock()
		resumes = append(resumes, kind+":"+strconv.FormatInt(rows, 10))
	}
	e := h.start(t, cfg, map[string]jobs.Handler{
		"long": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			mu.Lock()
			seen[run.Attempt] = string(run.Resume)
			mu.Unlock()
			if run.Attempt == 2 {
				var cp struct{ Rows int64 }
				if err := json.Unmarshal(run.Resume, &cp); err != nil {
					return jobs.Permanent("bad_checkpoint", err)
				}
				run.Resumed(cp.Rows)
				return nil
			}
			// Attempt 1: answer requests until one checkpoint is in the store.
			for n := int64(1); ; n++ {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-run.CheckpointWanted():
				}
				run.Progress(n*100, -1)
				run.Checkpoint(fmt.Appendf(nil, `{"rows":%d}`, n*100))
				if cp, err := h.st.Checkpoint(ctx, run.JobID); err == nil && cp != nil {
					break
				}
			}
			// A last one that no heartbeat carries: the failure saves it.
			run.Checkpoint([]byte(`{"rows":999}`))
			return jobs.Retryable("upstream", fmt.Errorf("the upstream went away"))
		}),
	})
	j := enqueue(t, e, "long", 3)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	if done.Attempt != 2 {
		t.Fatalf("succeeded on attempt %d, want 2", done.Attempt)
	}
	mu.Lock()
	if seen[1] != "" || seen[2] != `{"rows":999}` {
		t.Fatalf("Resume seen by attempt 1 = %q, by attempt 2 = %q; want none, then the last checkpoint", seen[1], seen[2])
	}
	if !slices.Equal(resumes, []string{"long:999"}) {
		t.Fatalf("OnResumed calls = %v", resumes)
	}
	mu.Unlock()
	evs := h.events(t, j.ID)
	want := []string{store.EventAccepted, store.EventStarted, store.EventAttemptFailed, store.EventStarted, store.EventResumed, store.EventSucceeded}
	if got := eventTypes(evs); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	var rd store.ResumedData
	if err := evs[4].Decode(&rd); err != nil || rd.Rows != 999 || evs[4].Attempt != 2 {
		t.Fatalf("resumed event = %+v (%v), data %+v", evs[4], err, rd)
	}
	if cp, err := h.st.Checkpoint(context.Background(), j.ID); err != nil || cp != nil {
		t.Fatalf("checkpoint after success = %q, %v; want none", cp, err)
	}
}
