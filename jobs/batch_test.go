package jobs_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
)

// heldEnds is the real store with its first FinishBatch held until release says so, and
// the size of every batch it was given: a test lines several ends up behind one commit.
type heldEnds struct {
	jobs.Store
	// release is polled with the first batch's size until it says true, before that
	// batch goes on; nil: no hold.
	release func(first int) bool

	mu    sync.Mutex
	sizes []int
	held  bool
}

func (s *heldEnds) FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(fs))
	first := !s.held
	s.held = true
	s.mu.Unlock()
	if first && s.release != nil {
		deadline := time.Now().Add(waitTimeout)
		for !s.release(len(fs)) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	return s.Store.FinishBatch(ctx, fs)
}

func (s *heldEnds) batchSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sizes)
}

// blockers is a handler kind that writes a file and waits until the test lets it end.
type blockers struct {
	started chan string
	release chan struct{}
}

func newBlockers() *blockers {
	return &blockers{started: make(chan string, 100), release: make(chan struct{})}
}

func (b *blockers) handler() jobs.Handler {
	return jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
		w, err := run.Output()
		if err != nil {
			return err
		}
		if _, err := w.Write(payload(run.JobID)); err != nil {
			return err
		}
		b.started <- run.JobID
		select {
		case <-b.release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return nil
	})
}

// TestClaimTakesEveryFreeSlotInOneTransaction: with four slots free and four jobs
// waiting, the dispatcher claims all four in one transaction (rule 28), and each runs.
func TestClaimTakesEveryFreeSlotInOneTransaction(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for range 4 {
		ids = append(ids, enqueueStore(t, h.st, "block", store.NewJob{}).ID)
	}
	cfg := h.config()
	cfg.Workers = 4
	b := newBlockers()
	e := h.start(t, cfg, map[string]jobs.Handler{"block": b.handler()})
	var started []string
	for range 4 {
		started = append(started, recv(t, "handler start", b.started))
	}
	slices.Sort(started)
	slices.Sort(ids)
	if !slices.Equal(started, ids) {
		t.Fatalf("started %v, want %v", started, ids)
	}
	if s := e.BatchStats(); s.ClaimCommits != 1 || s.Claimed != 4 {
		t.Fatalf("claims: %+v; want one transaction that took 4 jobs", s)
	}
	close(b.release)
	for _, id := range ids {
		h.waitStatus(t, id, store.StatusSucceeded)
	}
}

// TestEndsThatArriveTogetherShareOneCommit: while one end's transaction is under way,
// the ends that arrive wait for it and then commit together in one transaction (rule
// 28); each job gets its own file and its own success.
func TestEndsThatArriveTogetherShareOneCommit(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 4
	var e *jobs.Engine
	var eMu sync.Mutex
	// Two ends may make the first transaction if they arrive before it starts: hold it
	// until every end is either in it or queued behind it.
	held := &heldEnds{Store: h.st, release: func(first int) bool {
		eMu.Lock()
		defer eMu.Unlock()
		return e != nil && first+e.BatchStats().FinishWaiting == 4
	}}
	h.st2 = held
	b := newBlockers()
	eng := h.start(t, cfg, map[string]jobs.Handler{"block": b.handler()})
	eMu.Lock()
	e = eng
	eMu.Unlock()
	var ids []string
	for range 4 {
		ids = append(ids, enqueue(t, eng, "block", 0).ID)
	}
	for range 4 {
		recv(t, "handler start", b.started)
	}
	close(b.release)
	for _, id := range ids {
		j := h.waitStatus(t, id, store.StatusSucceeded)
		if j.FileSize != int64(len(payload(id))) {
			t.Fatalf("%s: file size %d", id, j.FileSize)
		}
	}
	// However many made the first transaction, the rest went together into the second.
	if got := held.batchSizes(); len(got) != 2 || got[0]+got[1] != 4 {
		t.Fatalf("end transactions carried %v; want two that carry all 4", got)
	}
	if s := eng.BatchStats(); s.FinishCommits != 2 || s.Finished != 4 || s.FinishWaiting != 0 {
		t.Fatalf("ends: %+v", s)
	}
}

// TestBatchedEndNeverPublishesAStaleAttempt: two attempts end in one transaction, one
// of which lost its job while it ran (rule 3). The stale one publishes nothing and
// changes nothing; the other succeeds with its file.
func TestBatchedEndNeverPublishesAStaleAttempt(t *testing.T) {
	h := newHarness(t)
	cfg := h.config()
	cfg.Workers = 3
	cfg.Heartbeat = time.Hour // the fence at the end, not the heartbeat, must catch it
	cfg.StaleAfter = 2 * time.Hour
	var e *jobs.Engine
	var eMu sync.Mutex
	held := &heldEnds{Store: h.st, release: func(int) bool {
		eMu.Lock()
		defer eMu.Unlock()
		return e != nil && e.BatchStats().FinishWaiting == 2
	}}
	h.st2 = held
	b := newBlockers()
	first := make(chan struct{})
	eng := h.start(t, cfg, map[string]jobs.Handler{
		"block": b.handler(),
		// quick ends first, so that its end holds the commit the other two queue behind
		"quick": jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error { <-first; return nil }),
	})
	eMu.Lock()
	e = eng
	eMu.Unlock()
	quick := enqueue(t, eng, "quick", 0)
	stale, kept := enqueue(t, eng, "block", 0), enqueue(t, eng, "block", 0)
	recv(t, "handler start", b.started)
	recv(t, "handler start", b.started)
	// Take stale's job away, as a reaper elsewhere would; an hour keeps it from running
	// again here.
	rec, err := h.st.Recover(context.Background(), stale.ID, 1, "taken away by the test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	close(first)
	waitFor(t, "the quick end to hold the commit", func() bool { return len(held.batchSizes()) == 1 })
	close(b.release)
	h.waitStatus(t, kept.ID, store.StatusSucceeded)
	h.waitStatus(t, quick.ID, store.StatusSucceeded)
	waitFor(t, "every attempt to end", func() bool { return eng.Running() == 0 })

	if got := held.batchSizes(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("end transactions carried %v; want [1 2] (the stale end beside the kept one)", got)
	}
	h.wantAsRecovered(t, rec)
	if parts := h.partFiles(t); len(parts) > 0 {
		t.Fatalf("part files left: %v", parts)
	}
}

// wantAsRecovered checks that the attempt that lost rec's job (taken away with Recover
// on its first attempt) changed nothing after that: no file, the job PENDING as Recover
// left it, and no event after "recovered".
func (h *harness) wantAsRecovered(t *testing.T, rec store.Job) {
	t.Helper()
	h.noFile(t, rec.ID)
	got, err := h.st.Get(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusPending || got.Attempt != 1 || !got.RunAt.Equal(rec.RunAt) {
		t.Fatalf("job after the lost attempt = %+v, want it as Recover left it", got)
	}
	if types := eventTypes(h.events(t, rec.ID)); types[len(types)-1] != store.EventRecovered {
		t.Fatalf("events = %v, want nothing after recovered", types)
	}
}
