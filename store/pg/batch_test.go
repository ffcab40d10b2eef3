package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
	"sheetq/store/pg"
)

// waitStats waits until the store's group commit reaches cond.
func waitStats(t *testing.T, st *store.Store, what string, cond func(store.BatchStats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(st.BatchStats()) {
		if time.Now().After(deadline) {
			t.Fatalf("group commit never %s: %+v", what, st.BatchStats())
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
func enqueueAsync(st *store.Store, nj store.NewJob) <-chan enqueueResult {
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

// queueInOrder starts each Enqueue once the one before it is queued, so that they wait
// in that order for the next group.
func queueInOrder(t *testing.T, st *store.Store, njs ...store.NewJob) []<-chan enqueueResult {
	t.Helper()
	out := make([]<-chan enqueueResult, len(njs))
	for i, nj := range njs {
		out[i] = enqueueAsync(st, nj)
		waitStats(t, st, fmt.Sprintf("queued call %d", i+1), func(s store.BatchStats) bool { return s.Waiting == i+1 })
	}
	return out
}

// blockGroupCommit holds idempotency key "holder" in an open transaction of another
// connection and sends an Enqueue with that key, whose insert waits for that
// transaction: the store's committer is busy, and the Enqueues that follow queue up for
// one group. release rolls the holder back; the blocked Enqueue then gets a new job.
func blockGroupCommit(t *testing.T, dsn string, st *store.Store) (release func()) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO jobs (id, kind, args, status, run_at, created_at, idempotency_key)
		VALUES ('holder', 'test', '{}', 'PENDING', now(), now(), 'holder')`); err != nil {
		t.Fatal(err)
	}
	base := st.BatchStats()
	blocked := enqueueAsync(st, store.NewJob{ID: "blocked", IdempotencyKey: "holder", RequestHash: "h"})
	waitStats(t, st, "took the blocked call", func(s store.BatchStats) bool { return s.Calls == base.Calls+1 && s.Waiting == 0 })
	return func() {
		t.Helper()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if r := <-blocked; r.err != nil || r.existed {
			t.Fatalf("blocked enqueue: existed %v, err %v", r.existed, r.err)
		}
	}
}

// acceptedEvents counts each job's "accepted" events and reports how many distinct
// transactions wrote them.
func acceptedEvents(t *testing.T, dsn string, ids []string) (perJob map[string]int, xacts int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT job_id, xid::text FROM job_events WHERE type = 'accepted' AND job_id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	perJob = map[string]int{}
	xids := map[string]bool{}
	for rows.Next() {
		var id, xid string
		if err := rows.Scan(&id, &xid); err != nil {
			t.Fatal(err)
		}
		perJob[id]++
		xids[xid] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return perJob, len(xids)
}

// TestGroupCommitPastSubtransactionCache: 100 concurrent Enqueues (more than the 64
// subtransactions a backend caches) go into one statement, in one transaction, and
// each gets its job with exactly one "accepted" event.
func TestGroupCommitPastSubtransactionCache(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	release := blockGroupCommit(t, dsn, st)
	const n = 100
	results := make([]<-chan enqueueResult, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("job-%03d", i)
		results[i] = enqueueAsync(st, store.NewJob{ID: ids[i], IdempotencyKey: "key-" + ids[i], RequestHash: "h"})
	}
	waitStats(t, st, "queued 100 calls", func(s store.BatchStats) bool { return s.Waiting == n })
	base := st.BatchStats()
	release()
	for i, ch := range results {
		r := <-ch
		if r.err != nil || r.existed || r.job.ID != ids[i] || r.job.Status != store.StatusPending {
			t.Fatalf("enqueue %s: job %s %s, existed %v, err %v", ids[i], r.job.ID, r.job.Status, r.existed, r.err)
		}
	}
	if s := st.BatchStats(); s.Commits-base.Commits != 1 || s.Calls-base.Calls != n {
		t.Fatalf("%d calls in %d statements, want %d in 1", s.Calls-base.Calls, s.Commits-base.Commits, n)
	}
	perJob, xacts := acceptedEvents(t, dsn, ids)
	for _, id := range ids {
		if perJob[id] != 1 {
			t.Fatalf("job %s has %d accepted events, want 1", id, perJob[id])
		}
	}
	if xacts != 1 {
		t.Fatalf("the group's events were written by %d transactions, want 1", xacts)
	}
}

// TestGroupCommitConflictsInOneGroup: one group holds a repeated key, a reused key with
// another body, an id used earlier in the same group, an id and a key of committed jobs,
// and plain jobs. Each refused call is answered alone, as a call alone would be, and
// the others commit.
func TestGroupCommitConflictsInOneGroup(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	old, _, err := st.Enqueue(ctx, store.NewJob{ID: "old", Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "old-key", RequestHash: "h"})
	if err != nil {
		t.Fatal(err)
	}
	release := blockGroupCommit(t, dsn, st)
	rs := queueInOrder(t, st,
		store.NewJob{ID: "a", IdempotencyKey: "k1", RequestHash: "h1"}, // 0: new
		store.NewJob{ID: "b", IdempotencyKey: "k1", RequestHash: "h1"}, // 1: a's key, same body: existed
		store.NewJob{ID: "c", IdempotencyKey: "k1", RequestHash: "h2"}, // 2: a's key, another body: mismatch
		store.NewJob{ID: "a", Args: json.RawMessage(`{"other":1}`)},    // 3: a's id: conflict
		store.NewJob{ID: "old"}, // 4: a committed job's id: conflict
		store.NewJob{ID: "d", IdempotencyKey: "old-key", RequestHash: "h"}, // 5: a committed job's key: existed
		store.NewJob{ID: "e"}, // 6: new
		store.NewJob{ID: "f", IdempotencyKey: "k2", RequestHash: "h"}, // 7: new
	)
	base, baseStatements := st.BatchStats(), pg.InsertStatements(st)
	release()
	got := make([]enqueueResult, len(rs))
	for i, ch := range rs {
		got[i] = <-ch
	}
	for _, i := range []int{0, 6, 7} {
		if r := got[i]; r.err != nil || r.existed || r.job.Status != store.StatusPending {
			t.Errorf("call %d: job %s %s, existed %v, err %v; want a new job", i, r.job.ID, r.job.Status, r.existed, r.err)
		}
	}
	if r := got[1]; r.err != nil || !r.existed || r.job.ID != "a" {
		t.Errorf("repeated key: job %q, existed %v, err %v; want a, existed", r.job.ID, r.existed, r.err)
	}
	if r := got[2]; !errors.Is(r.err, store.ErrIdempotencyMismatch) || r.job.ID != "a" {
		t.Errorf("reused key, other body: job %q, err %v; want a, ErrIdempotencyMismatch", r.job.ID, r.err)
	}
	for _, i := range []int{3, 4} {
		if r := got[i]; !errors.Is(r.err, store.ErrConflict) {
			t.Errorf("call %d (id in use): err %v, want ErrConflict", i, r.err)
		}
	}
	if r := got[5]; r.err != nil || !r.existed || r.job.ID != old.ID {
		t.Errorf("committed key: job %q, existed %v, err %v; want %s, existed", r.job.ID, r.existed, r.err, old.ID)
	}
	// One group: everything but the repeated id went in one statement; "a" again went
	// in a second.
	if s := st.BatchStats(); s.Commits-base.Commits != 1 || s.Calls-base.Calls != int64(len(rs)) {
		t.Errorf("%d calls in %d groups, want %d in 1", s.Calls-base.Calls, s.Commits-base.Commits, len(rs))
	}
	if n := pg.InsertStatements(st) - baseStatements; n != 2 {
		t.Errorf("%d insert statements, want 2", n)
	}
	a, err := st.Get(ctx, "a")
	if err != nil || string(a.Args) != `{}` {
		t.Errorf("job a: args %s, err %v; want the first call's", a.Args, err)
	}
	for _, id := range []string{"b", "c", "d"} {
		if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused call %s left a job: err %v", id, err)
		}
	}
	perJob, _ := acceptedEvents(t, dsn, []string{"a", "b", "c", "d", "e", "f", "old"})
	want := map[string]int{"a": 1, "e": 1, "f": 1, "old": 1}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "old"} {
		if perJob[id] != want[id] {
			t.Errorf("job %s has %d accepted events, want %d", id, perJob[id], want[id])
		}
	}
}

// TestGroupCommitBadJobFailsAlone: a job the server refuses (arguments that are not
// JSON) fails its own call; the calls that shared its group still commit. (A NUL, which
// the server refuses too, is refused before the job joins a group:
// TestEnqueueRefusesUnstorableValues.)
func TestGroupCommitBadJobFailsAlone(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	release := blockGroupCommit(t, dsn, st)
	rs := queueInOrder(t, st,
		store.NewJob{ID: "good-1"},
		store.NewJob{ID: "bad-args", Args: json.RawMessage(`{"open":`)},
		store.NewJob{ID: "good-2", IdempotencyKey: "k", RequestHash: "h"},
		store.NewJob{ID: "bad-json", Args: json.RawMessage(`not json`)},
		store.NewJob{ID: "good-3"},
	)
	release()
	for i, ch := range rs {
		r := <-ch
		bad := i == 1 || i == 3
		switch {
		case bad && (r.err == nil || errors.Is(r.err, store.ErrConflict)):
			t.Errorf("call %d: err %v, want the server's refusal", i, r.err)
		case !bad && (r.err != nil || r.existed):
			t.Errorf("call %d: existed %v, err %v; want a new job", i, r.existed, r.err)
		}
	}
	for _, id := range []string{"bad-args", "bad-json"} {
		if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused job %s: get err %v, want ErrNotFound", id, err)
		}
	}
}

// TestGroupCommitCallerGivesUp: a caller whose context ends while its call is queued
// gets the context's error, and its job is never written; the call queued after it still
// commits.
func TestGroupCommitCallerGivesUp(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	release := blockGroupCommit(t, dsn, st)
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		_, _, err := st.Enqueue(cctx, store.NewJob{ID: "gone", Kind: "test", Args: json.RawMessage(`{}`)})
		gone <- err
	}()
	waitStats(t, st, "queued the call that gives up", func(s store.BatchStats) bool { return s.Waiting == 1 })
	kept := enqueueAsync(st, store.NewJob{ID: "kept"})
	waitStats(t, st, "queued the call that stays", func(s store.BatchStats) bool { return s.Waiting == 2 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller that gave up: %v, want context.Canceled", err)
	}
	release()
	if r := <-kept; r.err != nil {
		t.Fatalf("call queued after it: %v", r.err)
	}
	if _, err := st.Get(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job of the caller that gave up: get err %v, want ErrNotFound", err)
	}
}

// TestGroupCommitClose: Close answers the calls already taken into a group (their jobs
// are committed) and refuses later ones with ErrClosed.
func TestGroupCommitClose(t *testing.T) {
	dsn := freshSchema(t)
	st, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := blockGroupCommit(t, dsn, st)
	queued := enqueueAsync(st, store.NewJob{ID: "queued"})
	waitStats(t, st, "queued a call", func(s store.BatchStats) bool { return s.Waiting == 1 })
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	release()
	if r := <-queued; r.err != nil {
		t.Fatalf("queued call: %v", r.err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Enqueue(ctx, store.NewJob{ID: "late", Kind: "test", Args: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("enqueue after close: %v, want ErrClosed", err)
	}
}

// BenchmarkEnqueue compares Enqueue alone (one statement per job, as before group
// commit) with the group commit, from one caller and from 16 per core at once (a burst
// of requests), in one run so that the figures can be read as ratios.
func BenchmarkEnqueue(b *testing.B) {
	args := json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01","to":"2024-02-01"}}`)
	for _, parallel := range []bool{false, true} {
		for _, mode := range []string{"alone", "grouped"} {
			b.Run(fmt.Sprintf("%s/parallel=%v", mode, parallel), func(b *testing.B) {
				st, err := pg.Open(ctx, freshSchema(b), pg.Options{Unbatched: mode == "alone"})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				var n atomic.Int64
				enqueue := func() {
					id := fmt.Sprintf("job%09d", n.Add(1))
					if _, _, err := st.Enqueue(ctx, store.NewJob{ID: id, Kind: "export", Args: args,
						IdempotencyKey: "k" + id, RequestHash: "h"}); err != nil {
						b.Error(err)
					}
				}
				b.ResetTimer()
				if parallel {
					b.SetParallelism(16)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							enqueue()
						}
					})
				} else {
					for range b.N {
						enqueue()
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
				if s := st.BatchStats(); s.Commits > 0 {
					b.ReportMetric(float64(s.Calls)/float64(s.Commits), "jobs/stmt")
				}
			})
		}
	}
}
