package jobs_test

import (
	"context"
	"errors"
	"runtime"
	"syscall"
	"testing"

	"sheetq/jobs"
	"sheetq/store"
)

// threadNice is the nice value of the calling goroutine's OS thread. The raw
// getpriority system call answers 20 - nice, so that it is never negative.
func threadNice(t testing.TB) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		t.Fatalf("getpriority: %v", err)
	}
	return 20 - p
}

// With Nice set, a handler runs on a thread of that nice value, and so does what it
// starts with run.Go; a panicking handler is
// still caught, and the lowered priority stays with the handlers' threads: the engine's
// own goroutines and the rest of the process keep theirs.
func TestNiceRunsHandlersAtLowerPriority(t *testing.T) {
	before := threadNice(t)
	if before >= 15 {
		t.Skipf("the test process already runs at nice %d", before)
	}
	h := newHarness(t)
	cfg := h.config()
	cfg.Nice = 15
	seen := make(chan int, 4)
	e := h.start(t, cfg, map[string]jobs.Handler{
		"nice": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			seen <- threadNice(t)
			// Work the handler spreads over goroutines with run.Go runs at its priority.
			done := make(chan struct{})
			run.Go(func() {
				defer close(done)
				seen <- threadNice(t)
			})
			<-done
			return nil
		}),
		"panics": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
			panic("boom")
		}),
	})
	for range 3 {
		j := enqueue(t, e, "nice", 1)
		if got := recv(t, "handler's nice value", seen); got != 15 {
			t.Fatalf("handler ran at nice %d, want 15", got)
		}
		if got := recv(t, "nice value of the handler's run.Go", seen); got != 15 {
			t.Fatalf("run.Go ran at nice %d, want 15", got)
		}
		h.waitStatus(t, j.ID, store.StatusSucceeded)
	}
	p := enqueue(t, e, "panics", 1)
	if j := h.waitStatus(t, p.ID, store.StatusFailed); j.ErrorCode != "panic" {
		t.Fatalf("panicking handler: error code %q, want panic", j.ErrorCode)
	}
	// Every thread that ran a handler ended with it; new goroutines get normal threads.
	for range 50 {
		if n := threadNice(t); n != before {
			t.Fatalf("a thread of the process runs at nice %d after the jobs, want %d", n, before)
		}
		runtime.Gosched()
	}
}

// Nice outside 0..19 is refused at Start.
func TestNiceOutOfRangeIsRefused(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Nice = 20
	e := jobs.New(h.st, cfg)
	if err := e.Start(context.Background()); err == nil || errors.Is(err, context.Canceled) {
		e.Stop()
		t.Fatalf("Start with Nice 20: err = %v, want a refusal", err)
	}
}
