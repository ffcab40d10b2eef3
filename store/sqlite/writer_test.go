package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// waitWrites waits until cond holds of the writer's queue.
func waitWrites(t *testing.T, d *sqlite.Store, what string, cond func(sqlite.WriteStats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(d.WriteStats()) {
		if time.Now().After(deadline) {
			t.Fatalf("the writer never %s: %+v", what, d.WriteStats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWritesOfEveryKindShareOneCommit (rule 31): an enqueue, a claim, a heartbeat, a
// checkpoint and ends that come while a transaction is under way go into it before its
// COMMIT, in the order they came, and each keeps its own answer: a lost lease, a failed publish and an enqueue
// whose event cannot be written fail alone, and everything else commits.
func TestWritesOfEveryKindShareOneCommit(t *testing.T) {
	st, path := openStore(t, sqlite.Options{})
	d := driverOf(st)
	ctx := context.Background()
	for _, id := range []string{"run1", "run2"} {
		enqueue(t, st, store.NewJob{ID: id})
		if j := claim(t, st, "w"); j.ID != id {
			t.Fatalf("claimed %s, want %s", j.ID, id)
		}
	}
	enqueue(t, st, store.NewJob{ID: "pend"})
	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TRIGGER no_event_for_bad BEFORE INSERT ON job_events WHEN NEW.job_id = 'bad'
		BEGIN SELECT RAISE(ABORT, 'no events for bad'); END`); err != nil {
		t.Fatal(err)
	}

	release := storetest.HoldWriteLock(t, path)
	base := d.WriteStats()
	// A heartbeat takes the first transaction and waits for the lock; the writes below
	// are sent one after another, each once the one before is queued, so that the
	// heartbeat's transaction takes them in before its COMMIT, in a known order.
	blocker := make(chan error, 1)
	go func() { _, err := st.Heartbeat(ctx, "run1", 1, 1, -1); blocker <- err }()
	waitWrites(t, d, "took the first write", func(s sqlite.WriteStats) bool { return s.Commits == base.Commits+1 })

	type answer struct {
		jobs []store.Job
		err  error
	}
	var (
		claimed, checkpoint, lost, newJob, bad = make(chan answer, 1), make(chan answer, 1), make(chan answer, 1), make(chan answer, 1), make(chan answer, 1)
		ends                                   = make(chan []store.Finished, 1)
	)
	published := 0
	send := []func(){
		func() { js, err := st.ClaimBatch(ctx, "w", store.DefaultQueue, 1); claimed <- answer{js, err} },
		// The claim before it in the same transaction made pend's attempt 1.
		func() {
			_, err := st.SaveCheckpoint(ctx, "pend", 1, 5, 10, []byte("cp"))
			checkpoint <- answer{nil, err}
		},
		func() { _, err := st.Heartbeat(ctx, "run2", 9, 1, -1); lost <- answer{nil, err} },
		func() {
			ends <- st.FinishBatch(ctx, []store.Finish{
				{ID: "run1", Attempt: 1, Outcome: store.Succeeded, Result: store.FileResult{Name: "run1.csv", Rows: 1},
					Publish: func() error { return errors.New("rename refused") }},
				{ID: "run2", Attempt: 1, Outcome: store.Succeeded, Result: store.FileResult{Name: "run2.csv", Rows: 2},
					Publish: func() error { published++; return nil }},
			})
		},
		func() {
			j, _, err := st.Enqueue(ctx, store.NewJob{ID: "bad", Kind: "test", Args: []byte(`{}`)})
			bad <- answer{[]store.Job{j}, err}
		},
		func() {
			j, _, err := st.Enqueue(ctx, store.NewJob{ID: "new1", Kind: "test", Args: []byte(`{}`)})
			newJob <- answer{[]store.Job{j}, err}
		},
	}
	for i, fn := range send {
		go fn()
		waitWrites(t, d, "queued every write", func(s sqlite.WriteStats) bool { return s.Waiting == i+1 })
	}
	release()
	if err := <-blocker; err != nil {
		t.Fatalf("heartbeat of the first transaction: %v", err)
	}
	if a := <-claimed; a.err != nil || len(a.jobs) != 1 || a.jobs[0].ID != "pend" || a.jobs[0].Attempt != 1 {
		t.Errorf("claim: %+v, want pend at attempt 1", a)
	}
	if a := <-checkpoint; a.err != nil {
		t.Errorf("checkpoint of the job claimed before it: %v", a.err)
	}
	if a := <-lost; !errors.Is(a.err, store.ErrLeaseLost) {
		t.Errorf("heartbeat of a lost attempt: %v, want ErrLeaseLost", a.err)
	}
	res := <-ends
	if res[0].Err == nil || res[1].Err != nil || res[1].Job.Status != store.StatusSucceeded {
		t.Errorf("ends: %+v, want the failed publish alone to fail", res)
	}
	if a := <-bad; a.err == nil {
		t.Errorf("enqueue without its event succeeded")
	}
	if a := <-newJob; a.err != nil || a.jobs[0].ID != "new1" {
		t.Errorf("enqueue beside the failures: %+v", a)
	}
	if s := d.WriteStats(); s.Commits-base.Commits != 1 || s.Writes-base.Writes != int64(len(send)+1) {
		t.Errorf("%d writes in %d commits; want %d in 1", s.Writes-base.Writes, s.Commits-base.Commits, len(send)+1)
	}
	if published != 1 {
		t.Errorf("run2 published %d times, want once", published)
	}

	for id, want := range map[string]store.Status{"run1": store.StatusProcessing, "run2": store.StatusSucceeded,
		"pend": store.StatusProcessing, "new1": store.StatusPending} {
		if j := get(t, st, id); j.Status != want {
			t.Errorf("%s is %s, want %s", id, j.Status, want)
		}
	}
	if _, err := st.Get(ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the enqueue that failed left its job: %v", err)
	}
	if cp, err := st.Checkpoint(ctx, "pend"); err != nil || string(cp) != "cp" {
		t.Errorf("pend's checkpoint = %q, %v", cp, err)
	}
	if j := get(t, st, "run1"); j.ProgressRows != 1 {
		t.Errorf("run1's heartbeat of the first transaction: progress %d, want 1", j.ProgressRows)
	}
	// The failed end wrote no event; each committed write wrote its own.
	for id, want := range map[string][]string{
		"run1": {store.EventAccepted, store.EventStarted},
		"run2": {store.EventAccepted, store.EventStarted, store.EventSucceeded},
		"pend": {store.EventAccepted, store.EventStarted},
		"new1": {store.EventAccepted},
	} {
		var got []string
		for _, e := range events(t, st, id) {
			got = append(got, e.Type)
		}
		if len(got) != len(want) {
			t.Errorf("%s events %v, want %v", id, got, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s events %v, want %v", id, got, want)
				break
			}
		}
	}
}

// TestUnqueuedWritesCommitAlone: with Options.Unbatched every write is a transaction of
// its own, and the queue counts nothing.
func TestUnqueuedWritesCommitAlone(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{Unbatched: true})
	d := driverOf(st)
	if d.QueuesWrites() || st.QueuesWrites() {
		t.Fatal("an unbatched store says it queues its writes")
	}
	enqueue(t, st, store.NewJob{ID: "a"})
	j := claim(t, st, "w")
	if _, err := st.Heartbeat(context.Background(), j.ID, j.Attempt, 1, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Succeed(context.Background(), j.ID, j.Attempt, store.FileResult{Name: "a.csv"}, nil); err != nil {
		t.Fatal(err)
	}
	if s := d.WriteStats(); s != (sqlite.WriteStats{}) {
		t.Fatalf("unbatched store's queue counted %+v", s)
	}
}
