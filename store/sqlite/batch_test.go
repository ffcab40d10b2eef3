package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// waitTaken waits until n Enqueue calls have been taken into a transaction.
func waitTaken(t *testing.T, st *store.Store, base store.BatchStats, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for st.BatchStats().Calls-base.Calls < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d enqueues never started a transaction", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n Enqueue calls have been taken into a transaction or queued.
func waitQueued(t *testing.T, st *store.Store, base store.BatchStats, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := st.BatchStats()
		if int(s.Calls-base.Calls)+s.Waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d enqueues queued", int(s.Calls-base.Calls)+s.Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type enqueueResult struct {
	job     store.Job
	existed bool
	err     error
}

// enqueueAsync starts Enqueue in a goroutine; the channel yields its result.
func enqueueAsync(ctx context.Context, st *store.Store, nj store.NewJob) <-chan enqueueResult {
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	if nj.Args == nil {
		nj.Args = json.RawMessage(`{}`)
	}
	out := make(chan enqueueResult, 1)
	go func() {
		j, existed, err := st.Enqueue(ctx, nj)
		out <- enqueueResult{j, existed, err}
	}()
	return out
}

func countRows(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGroupCommitManyConcurrentEnqueues: every call gets its own job, each job has exactly
// one row and one accepted event, and the calls really shared transactions.
func TestGroupCommitManyConcurrentEnqueues(t *testing.T) {
	st, path := openStore(t, sqlite.Options{MaxBatch: 64})
	ctx := context.Background()
	const n = 200
	release := storetest.HoldWriteLock(t, path)
	base := st.BatchStats()
	results := make([]<-chan enqueueResult, n)
	for i := range n {
		results[i] = enqueueAsync(ctx, st, store.NewJob{ID: fmt.Sprintf("many%03d", i), IdempotencyKey: fmt.Sprintf("key%03d", i), RequestHash: "h"})
	}
	waitQueued(t, st, base, n)
	release()

	seen := map[string]bool{}
	for i, ch := range results {
		r := <-ch
		if r.err != nil || r.existed || r.job.ID != fmt.Sprintf("many%03d", i) || r.job.Status != store.StatusPending {
			t.Fatalf("call %d: job %q existed %v err %v", i, r.job.ID, r.existed, r.err)
		}
		seen[r.job.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct jobs for %d calls", len(seen), n)
	}
	db := rawDB(t, path)
	if got := countRows(t, db, `SELECT count(*) FROM jobs WHERE id LIKE 'many%'`); got != n {
		t.Fatalf("%d job rows, want %d", got, n)
	}
	if got := countRows(t, db, `SELECT count(*) FROM job_events WHERE job_id LIKE 'many%' AND type = 'accepted'`); got != n {
		t.Fatalf("%d accepted events, want %d", got, n)
	}
	if got := countRows(t, db, `SELECT count(*) FROM (SELECT job_id FROM job_events WHERE job_id LIKE 'many%' GROUP BY job_id HAVING count(*) <> 1)`); got != 0 {
		t.Fatalf("%d jobs without exactly one event", got)
	}
	// All n were waiting when the lock was released: the first transaction took what had
	// arrived when it started, the rest went in batches of at most 64.
	s := st.BatchStats()
	commits, calls := s.Commits-base.Commits, s.Calls-base.Calls
	if calls != n || commits > 1+(n+63)/64 {
		t.Fatalf("%d calls in %d commits; want %d calls in at most %d", calls, commits, n, 1+(n+63)/64)
	}
	t.Logf("%d enqueues in %d commits", calls, commits)
}

// TestGroupCommitIsolatesFailures: in one batch, a reused key gives the first job, a
// reused key with another body and a duplicate id fail alone, a job whose event cannot be
// written is rolled back alone, and the rest commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	st, path := openStore(t, sqlite.Options{})
	ctx := context.Background()
	enqueue(t, st, store.NewJob{ID: "taken"})
	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TRIGGER no_event_for_bad BEFORE INSERT ON job_events WHEN NEW.job_id = 'bad'
		BEGIN SELECT RAISE(ABORT, 'no events for bad'); END`); err != nil {
		t.Fatal(err)
	}

	release := storetest.HoldWriteLock(t, path)
	base := st.BatchStats()
	// A blocker takes the first transaction and waits for the lock; the calls below are
	// sent in order, each after the one before has queued, so they form the second
	// transaction in a known order.
	blocker := enqueueAsync(ctx, st, store.NewJob{ID: "blocker"})
	waitTaken(t, st, base, 1)
	calls := []store.NewJob{
		{ID: "ok1", IdempotencyKey: "same", RequestHash: "h1"},
		{ID: "ok1-replay", IdempotencyKey: "same", RequestHash: "h1"},
		{ID: "taken"}, // duplicate id
		{ID: "mismatch", IdempotencyKey: "same", RequestHash: "h2"},
		{ID: "bad"}, // its event insert fails after its job row was written
		{ID: "ok2"},
	}
	results := make([]<-chan enqueueResult, len(calls))
	for i, nj := range calls {
		results[i] = enqueueAsync(ctx, st, nj)
		waitQueued(t, st, base, i+2)
	}
	release()
	if r := <-blocker; r.err != nil {
		t.Fatal(r.err)
	}
	r := make([]enqueueResult, len(calls))
	for i := range results {
		r[i] = <-results[i]
	}
	if r[0].err != nil || r[0].existed || r[0].job.ID != "ok1" {
		t.Errorf("first with key: %+v", r[0])
	}
	if r[1].err != nil || !r[1].existed || r[1].job.ID != "ok1" {
		t.Errorf("same key, same body, same batch: job %q existed %v err %v; want ok1, existed", r[1].job.ID, r[1].existed, r[1].err)
	}
	if !errors.Is(r[2].err, store.ErrConflict) {
		t.Errorf("duplicate id: err = %v, want ErrConflict", r[2].err)
	}
	if !errors.Is(r[3].err, store.ErrIdempotencyMismatch) || !r[3].existed || r[3].job.ID != "ok1" {
		t.Errorf("same key, other body: job %q existed %v err %v; want ErrIdempotencyMismatch with ok1", r[3].job.ID, r[3].existed, r[3].err)
	}
	if r[4].err == nil {
		t.Errorf("job without its event: enqueue succeeded")
	}
	if r[5].err != nil || r[5].job.ID != "ok2" {
		t.Errorf("job after the failures: %+v", r[5])
	}
	for id, want := range map[string]int{"ok1": 1, "ok1-replay": 0, "mismatch": 0, "bad": 0, "ok2": 1, "taken": 1} {
		if got := countRows(t, db, `SELECT count(*) FROM jobs WHERE id = ?`, id); got != want {
			t.Errorf("%d rows for %s, want %d", got, id, want)
		}
		if got := countRows(t, db, `SELECT count(*) FROM job_events WHERE job_id = ?`, id); got != want {
			t.Errorf("%d events for %s, want %d", got, id, want)
		}
	}
	// One transaction: the blocker's, which took the others in before its COMMIT (rule
	// 31); "bad" was rolled back to their savepoint, and they ran again without it.
	if s := st.BatchStats(); s.Calls-base.Calls != int64(len(calls)+1) || s.Commits-base.Commits != 1 {
		t.Errorf("%d calls in %d batches; want %d calls in 1", s.Calls-base.Calls, s.Commits-base.Commits, len(calls)+1)
	}
}

// TestGroupCommitCallerGivesUp: a caller whose context ends while it waits gets the
// context's error and no job, and the others in its batch are not disturbed.
func TestGroupCommitCallerGivesUp(t *testing.T) {
	st, path := openStore(t, sqlite.Options{})
	ctx := context.Background()
	release := storetest.HoldWriteLock(t, path)
	base := st.BatchStats()
	first := enqueueAsync(ctx, st, store.NewJob{ID: "first"})
	waitTaken(t, st, base, 1) // in a transaction waiting for the lock: the next two queue
	cctx, cancel := context.WithCancel(ctx)
	quitter := enqueueAsync(cctx, st, store.NewJob{ID: "quitter"})
	last := enqueueAsync(ctx, st, store.NewJob{ID: "last"})
	waitQueued(t, st, base, 3)
	cancel()
	if r := <-quitter; !errors.Is(r.err, context.Canceled) || r.job.ID != "" {
		t.Fatalf("cancelled caller: job %q err %v; want context.Canceled and no job", r.job.ID, r.err)
	}
	release()
	for _, ch := range []<-chan enqueueResult{first, last} {
		if r := <-ch; r.err != nil {
			t.Fatalf("caller beside a cancelled one: %v", r.err)
		}
	}
	if _, err := st.Get(ctx, "quitter"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancelled caller's job: get err = %v, want ErrNotFound", err)
	}
	get(t, st, "first")
	get(t, st, "last")
}

// TestUnbatchedEnqueue: the unbatched mode (kept for comparison) still creates one job
// per call and never goes through the batcher.
func TestUnbatchedEnqueue(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{Unbatched: true})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, _, err := st.Enqueue(context.Background(), store.NewJob{ID: fmt.Sprintf("u%02d", i), Kind: "test", Args: json.RawMessage(`{}`)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	jobs, err := st.List(context.Background(), store.ListOptions{Limit: 100})
	if err != nil || len(jobs) != 20 {
		t.Fatalf("%d jobs, err %v; want 20", len(jobs), err)
	}
	if s := st.BatchStats(); s.Commits != 0 || s.Calls != 0 {
		t.Fatalf("unbatched store used the batcher: %+v", s)
	}
}

// BenchmarkEnqueueParallel is concurrent acceptance, as the HTTP server does it: many
// goroutines enqueueing at once, with and without group commit, in one run so the two
// can be compared as a ratio.
func BenchmarkEnqueueParallel(b *testing.B) {
	args := json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01","to":"2024-02-01"}}`)
	for _, mode := range []struct {
		name      string
		unbatched bool
		audit     bool // each job with its request's audit entry (NewJob.Audit, issue 39)
	}{{"batched", false, false}, {"batched-audit", false, true}, {"unbatched", true, false}} {
		b.Run(mode.name, func(b *testing.B) {
			st, _ := openStore(b, sqlite.Options{Unbatched: mode.unbatched})
			var seq sync.Mutex
			n := 0
			b.SetParallelism(16) // 32 callers on 2 cores: a burst of requests
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					seq.Lock()
					n++
					id := fmt.Sprintf("job%09d", n)
					seq.Unlock()
					nj := store.NewJob{ID: id, Kind: "export", Args: args, IdempotencyKey: "k" + id, RequestHash: "h"}
					if mode.audit {
						nj.Audit = &store.AuditEntry{Actor: "ann@example.com", Action: "export_requested", Report: "orders",
							IP: "192.0.2.7", Detail: "format xlsx"}
					}
					if _, _, err := st.Enqueue(context.Background(), nj); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			if s := st.BatchStats(); s.Commits > 0 {
				b.ReportMetric(float64(s.Calls)/float64(s.Commits), "jobs/commit")
			}
		})
	}
}

// TestCloseWaitsForGroupCommit: Close lets the group commit answer the calls it has
// taken (their jobs are committed and durable), and an Enqueue after Close gets
// ErrClosed instead of a write on a closed database.
func TestCloseWaitsForGroupCommit(t *testing.T) {
	st, path := openStore(t, sqlite.Options{})
	ctx := context.Background()
	release := storetest.HoldWriteLock(t, path)
	base := st.BatchStats()
	first := enqueueAsync(ctx, st, store.NewJob{ID: "first"})
	waitTaken(t, st, base, 1) // in a transaction waiting for the lock
	second := enqueueAsync(ctx, st, store.NewJob{ID: "second"})
	waitQueued(t, st, base, 2)
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	release()
	for _, ch := range []<-chan enqueueResult{first, second} {
		if r := <-ch; r.err != nil {
			t.Fatalf("a call taken before Close: %v", r.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	if r := <-enqueueAsync(ctx, st, store.NewJob{ID: "late"}); !errors.Is(r.err, store.ErrClosed) {
		t.Fatalf("enqueue after Close: %v, want ErrClosed", r.err)
	}
	again := openAt(t, path, sqlite.Options{})
	get(t, again, "first")
	get(t, again, "second")
}
