package jobs_test

import (
	"testing"

	"sheetq/jobs"
	"sheetq/store"
)

// A node that starts beside another on a shared store (several nodes on PostgreSQL) must
// not take back the other's live attempt: with Shared, its start-up sweep recovers only
// attempts whose heartbeat is stale, as the reaper does later. Without Shared (one process
// owns the store) every PROCESSING job at start is an orphan: TestStartRecoversOrphans.
func TestSharedStoreStartLeavesOtherNodesAttempts(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan string, 1), make(chan struct{})
	var c calls
	cfgA := h.config()
	cfgA.WorkerID, cfgA.Shared = "node-a", true
	a := h.start(t, cfgA, map[string]jobs.Handler{"x": gated(1, started, release, nil, &c)})
	j := enqueue(t, a, "x", 3)
	recv(t, "node a starts the job", started)

	// Node b opens its own store on the same database and starts while a runs the job;
	// each node has a data directory of its own, so its own tmp/.
	cfgB := h.config()
	cfgB.WorkerID, cfgB.Shared, cfgB.TmpDir = "node-b", true, t.TempDir()
	b := jobs.New(h.openStore(t), cfgB)
	b.Register("x", gated(1, started, release, nil, &c))
	if err := b.Start(t.Context()); err != nil {
		t.Fatalf("start node b: %v", err)
	}
	t.Cleanup(b.Stop)

	got, err := h.st.Get(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusProcessing || got.Attempt != 1 || got.Worker != "node-a" {
		t.Fatalf("after node b started: %s attempt %d on %q, want PROCESSING attempt 1 on node-a", got.Status, got.Attempt, got.Worker)
	}
	close(release)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	if done.Attempt != 1 {
		t.Fatalf("succeeded on attempt %d, want 1", done.Attempt)
	}
	if runs := c.of(j.ID); len(runs) != 1 {
		t.Fatalf("the job ran %d times (attempts %v), want once", len(runs), runs)
	}
}
