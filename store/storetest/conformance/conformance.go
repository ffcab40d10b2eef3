// Package conformance is the test suite every job store driver must pass: it states the
// job table's rules (ARCHITECTURE.md, "State machine" and rules 1-11, 19-22, 29)
// through the core's *store.Store over the driver, as the engine, the API and the pages meet
// them, so that it runs unchanged against each driver. store/sqlite and store/pg run
// it in their conformance_test.go; a new driver adds a test of its own that calls Run,
// RunReads, RunSchedules and RunAudit with a Harness from Driven. store/mutants_test.go shows
// that it catches a driver or a core that breaks each rule.
//
// The suite never sleeps: the harness gives it the store's clock to read and to move.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// Harness is one empty store, migrated and ready, with its clock: the core's *store.Store over
// the driver under test, so that the suite states the rules as every caller meets them.
type Harness struct {
	Store *store.Store
	// Now reads the store's clock: the time it stamps rows with.
	Now func() time.Time
	// Advance moves the store's clock forward by d.
	Advance func(d time.Duration)
	// Reopen, if set, closes Store and opens a new one on the same database, as a new
	// process would; the suite then checks that what was acknowledged is still there.
	Reopen func(t *testing.T) *store.Store
}

// Driven is the Harness of the drivers open makes, each under store.New with what the
// case asks (o), on the clock now and advance read and move: the store is closed when
// the test ends, and Reopen closes it and opens another driver on the same database, as
// a new process would.
func Driven(t *testing.T, o Options, open func(t *testing.T) store.Driver, now func() time.Time, advance func(time.Duration)) Harness {
	mk := func(t *testing.T) *store.Store {
		return store.New(open(t), store.Config{FollowUps: o.FollowUps})
	}
	st := mk(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return Harness{
		Store:   st,
		Now:     now,
		Advance: advance,
		Reopen: func(t *testing.T) *store.Store {
			if err := st.Close(); err != nil {
				t.Fatalf("close store: %v", err)
			}
			st = mk(t)
			return st
		},
	}
}

// Run runs every case, each on a store of its own from open, made with o.
func Run(t *testing.T, open func(t *testing.T, o Options) Harness) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"EnqueueIsDurable", testEnqueueIsDurable},
		{"EnqueueReturnsTheStoredJob", testEnqueueReturnsTheStoredJob},
		{"EnqueueIdempotency", testEnqueueIdempotency},
		{"ClaimOrder", testClaimOrder},
		{"ClaimOnlyRunnable", testClaimOnlyRunnable},
		{"ClaimIsAtomic", testClaimIsAtomic},
		{"ClaimTakesOnlyItsQueue", testClaimTakesOnlyItsQueue},
		{"NextRunInIgnoresOtherQueues", testNextRunInIgnoresOtherQueues},
		{"Fencing", testFencing},
		{"Heartbeat", testHeartbeat},
		{"CheckpointOutlivesItsAttempt", testCheckpoint},
		{"SucceedPublishesInsideTheTransaction", testSucceedPublishes},
		{"SucceedPublishErrorCommitsNothing", testSucceedPublishError},
		{"CompleteFromFile", testCompleteFromFile},
		{"FailRetriesWithBackoff", testFailRetries},
		{"FailAtMaxAttempts", testFailAtMaxAttempts},
		{"FailPermanent", testFailPermanent},
		{"RecoverCountsTheAttempt", testRecover},
		{"RequeueDoesNotCountTheAttempt", testRequeue},
		{"CancelPending", testCancelPending},
		{"CancelProcessing", testCancelProcessing},
		{"CancelRequestedWins", testCancelRequestedWins},
		{"StaleByDuration", testStale},
		{"NextRunIn", testNextRunIn},
		{"RetryKeepsTheFence", testRetry},
		{"ExpireAndDelete", testExpireAndDelete},
		{"EventsAfterPaging", testEventsAfterPaging},
		{"ClaimBatchOrderAndLimit", testClaimBatchOrderAndLimit},
		{"ClaimBatchIsAtomic", testClaimBatchIsAtomic},
		{"FinishBatchIsolatesEachEnd", testFinishBatchIsolatesEachEnd},
		{"FinishBatchWithoutPublish", testFinishBatchWithoutPublish},
		{"FinishBatchSameAttemptTwice", testFinishBatchSameAttemptTwice},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t, Options{})) })
	}
	// The follow-up cases open stores with a hook of their own.
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, open func(*testing.T, Options) Harness)
	}{
		{"FollowUpsOfEveryFinalState", testFollowUpsOfEveryFinalState},
		{"NoFollowUpsWithoutAnEnd", testNoFollowUpsWithoutAnEnd},
		{"FollowUpsAreAtomic", testFollowUpsAreAtomic},
		{"DeleteStopsFollowUps", testDeleteStopsFollowUps},
		{"FollowUpsKeepTheirQueue", testFollowUpsKeepTheirQueue},
		{"FollowUpsInABatch", testFollowUpsInABatch},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	} // The rules the core keeps above the drivers (core.go).
	runCore(t, open)
}

var ctx = context.Background()

func newJob(mods ...func(*store.NewJob)) store.NewJob {
	nj := store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{"n":1}`)}
	for _, m := range mods {
		m(&nj)
	}
	return nj
}

func inQueue(q string) func(*store.NewJob) { return func(nj *store.NewJob) { nj.Queue = q } }

func maxAttempts(n int) func(*store.NewJob) { return func(nj *store.NewJob) { nj.MaxAttempts = n } }

func enqueue(t *testing.T, h Harness, mods ...func(*store.NewJob)) store.Job {
	t.Helper()
	j, existed, err := h.Store.Enqueue(ctx, newJob(mods...))
	if err != nil || existed {
		t.Fatalf("enqueue: existed=%v err=%v", existed, err)
	}
	return j
}

func claim(t *testing.T, h Harness) store.Job {
	t.Helper()
	j, err := claimOne(h.Store, "w1", store.DefaultQueue)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return j
}

// claimID claims and checks that the claim took id.
func claimID(t *testing.T, h Harness, id string) store.Job {
	t.Helper()
	j := claim(t, h)
	if j.ID != id {
		t.Fatalf("claimed %s, want %s", j.ID, id)
	}
	return j
}

func noClaim(t *testing.T, h Harness) {
	t.Helper()
	if j, err := claimOne(h.Store, "w1", store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim = %s (%s), %v; want ErrNotFound", j.ID, j.Status, err)
	}
}

func get(t *testing.T, h Harness, id string) store.Job {
	t.Helper()
	j, err := h.Store.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

// events reads the whole log, a page at a time, and returns the events of id.
func events(t *testing.T, h Harness, id string) []store.Event {
	t.Helper()
	var out []store.Event
	for _, e := range allEvents(t, h, 100) {
		if e.JobID == id {
			out = append(out, e)
		}
	}
	return out
}

func allEvents(t *testing.T, h Harness, page int) []store.Event {
	t.Helper()
	var all []store.Event
	var after int64
	for {
		evs, err := h.Store.EventsAfter(ctx, after, page)
		if err != nil {
			t.Fatalf("events after %d: %v", after, err)
		}
		if len(evs) > page {
			t.Fatalf("EventsAfter(%d, %d) returned %d events", after, page, len(evs))
		}
		if len(evs) == 0 {
			return all
		}
		for _, e := range evs {
			if e.ID <= after {
				t.Fatalf("EventsAfter(%d) returned event %d: ids must increase past the cursor", after, e.ID)
			}
			after = e.ID
		}
		all = append(all, evs...)
	}
}

func types(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// wantEvents checks the job's event types, in order, and that the last one carries the
// job's status and the attempt it is about (a requeued one is no longer the job's).
func wantEvents(t *testing.T, h Harness, id string, want ...string) {
	t.Helper()
	evs := events(t, h, id)
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events of %s = %v, want %v", id, got, want)
	}
	j := get(t, h, id)
	last, attempt := evs[len(evs)-1], j.Attempt
	if last.Type == store.EventRequeued {
		attempt++
	}
	if last.Status != j.Status || last.Attempt != attempt {
		t.Fatalf("last event %s says %s attempt %d; the job is %s attempt %d", last.Type, last.Status, last.Attempt, j.Status, j.Attempt)
	}
}

func wantStatus(t *testing.T, j store.Job, status store.Status, attempt int) {
	t.Helper()
	if j.Status != status || j.Attempt != attempt {
		t.Fatalf("job %s is %s attempt %d, want %s attempt %d", j.ID, j.Status, j.Attempt, status, attempt)
	}
}

var file = store.FileResult{Name: "out.xlsx", Size: 42, SHA256: "0f1e2d", Rows: 7, Warnings: []string{"a warning"}}

// Rule 1: Enqueue returns a PENDING job with its "accepted" event, and a new store on the
// same database still has both.
func testEnqueueIsDurable(t *testing.T, h Harness) {
	j := enqueue(t, h)
	if j.Status != store.StatusPending || j.Attempt != 0 || j.MaxAttempts != store.DefaultMaxAttempts ||
		j.Kind != "test" || string(j.Args) != `{"n":1}` || j.CreatedAt.IsZero() || j.RunAt.IsZero() {
		t.Fatalf("enqueued job = %+v", j)
	}
	wantEvents(t, h, j.ID, store.EventAccepted)
	if h.Reopen == nil {
		return
	}
	h.Store = h.Reopen(t)
	if got := get(t, h, j.ID); got.Status != store.StatusPending || got.ID != j.ID {
		t.Fatalf("after reopening: %+v", got)
	}
	wantEvents(t, h, j.ID, store.EventAccepted)
}

// The job Enqueue returns (which the API answers with) is the row as stored, field for
// field: with every NewJob field given, and with none of the optional ones.
func testEnqueueReturnsTheStoredJob(t *testing.T, h Harness) {
	full := enqueue(t, h, func(nj *store.NewJob) {
		nj.Priority = -3
		nj.RunAt = h.Now().Add(90*time.Second + 1234567*time.Nanosecond) // sub-millisecond part
		nj.MaxAttempts = 7
		nj.IdempotencyKey = "key-" + nj.ID
		nj.RequestHash = "hash-" + nj.ID
		nj.NotifyURL = "https://example.com/hook"
		nj.CreatedBy = "ci"
		nj.Queue = "heavy"
	})
	bare := enqueue(t, h)
	for _, j := range []store.Job{full, bare} {
		if got := get(t, h, j.ID); !reflect.DeepEqual(got, j) {
			t.Errorf("Enqueue returned\n%+v\nGet reads\n%+v", j, got)
		}
	}
	if full.Seq <= 0 || bare.Seq <= full.Seq {
		t.Errorf("Seq %d then %d, want increasing from 1", full.Seq, bare.Seq)
	}
}

// Rule 11: one job per idempotency key; the same body returns it, another is refused.
// An id in use is a conflict.
func testEnqueueIdempotency(t *testing.T, h Harness) {
	keyed := func(hash string) func(*store.NewJob) {
		return func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = "key-1", hash }
	}
	first := enqueue(t, h, keyed("h1"))
	again, existed, err := h.Store.Enqueue(ctx, newJob(keyed("h1")))
	if err != nil || !existed || again.ID != first.ID {
		t.Fatalf("same key, same body: %s existed=%v err=%v; want %s", again.ID, existed, err, first.ID)
	}
	other, existed, err := h.Store.Enqueue(ctx, newJob(keyed("h2")))
	if !errors.Is(err, store.ErrIdempotencyMismatch) || !existed || other.ID != first.ID {
		t.Fatalf("same key, other body: %s existed=%v err=%v; want ErrIdempotencyMismatch with %s", other.ID, existed, err, first.ID)
	}
	dup := newJob()
	dup.ID = first.ID
	if _, _, err := h.Store.Enqueue(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("id in use: err = %v, want ErrConflict", err)
	}
	wantEvents(t, h, first.ID, store.EventAccepted)
	if n := len(allEvents(t, h, 100)); n != 1 {
		t.Fatalf("%d events, want the one accepted", n)
	}
	// Concurrent callers with one key get one job between them.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			j, _, err := h.Store.Enqueue(ctx, newJob(func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = "key-2", "h" }))
			if err != nil {
				t.Errorf("concurrent enqueue: %v", err)
			}
			ids[i] = j.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent enqueues with one key made jobs %v", ids)
		}
	}
}

// Rule 2: a claim takes priority first, then run_at, then insertion order, makes the job
// PROCESSING with attempt+1, and stamps worker, start and heartbeat.
func testClaimOrder(t *testing.T, h Harness) {
	now := h.Now()
	at := func(prio int, runAt time.Time) func(*store.NewJob) {
		return func(nj *store.NewJob) { nj.Priority, nj.RunAt = prio, runAt }
	}
	a := enqueue(t, h, at(0, now))
	b := enqueue(t, h, at(1, now.Add(-time.Hour)))
	c := enqueue(t, h, at(0, now.Add(-time.Minute)))
	d := enqueue(t, h, at(-1, now))
	e := enqueue(t, h, at(0, now))
	want := []string{d.ID, c.ID, a.ID, e.ID, b.ID}
	var got []string
	for range want {
		j := claim(t, h)
		got = append(got, j.ID)
		if j.Status != store.StatusProcessing || j.Attempt != 1 || j.Worker != "w1" || j.StartedAt.IsZero() || j.HeartbeatAt.IsZero() {
			t.Fatalf("claimed job = %+v", j)
		}
		wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order = %v, want %v", got, want)
	}
	noClaim(t, h)
}

// Rule 2: only a PENDING job whose run_at has come is claimed.
func testClaimOnlyRunnable(t *testing.T, h Harness) {
	later := enqueue(t, h, func(nj *store.NewJob) { nj.RunAt = h.Now().Add(time.Minute) })
	canceled := enqueue(t, h)
	if _, err := h.Store.Cancel(ctx, canceled.ID); err != nil {
		t.Fatal(err)
	}
	running := enqueue(t, h)
	claimID(t, h, running.ID)
	noClaim(t, h)
	h.Advance(time.Minute)
	claimID(t, h, later.ID)
	noClaim(t, h)
}

// Rule 2: concurrent claims take each job once.
func testClaimIsAtomic(t *testing.T, h Harness) {
	const n = 12
	for range n {
		enqueue(t, h)
	}
	var (
		mu  sync.Mutex
		got = map[string]int{}
		wg  sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for {
				j, err := claimOne(h.Store, fmt.Sprintf("w%d", w), store.DefaultQueue)
				if errors.Is(err, store.ErrNotFound) {
					return
				}
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				got[j.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != n {
		t.Fatalf("%d jobs claimed, want %d", len(got), n)
	}
	for id, c := range got {
		if c != 1 {
			t.Fatalf("job %s claimed %d times", id, c)
		}
	}
}

// fenced are every write an execution of attempt makes; each must be refused with
// ErrLeaseLost, changing nothing, unless the job is PROCESSING with that attempt.
func fenced(h Harness, id string, attempt int, published *bool) map[string]func() error {
	return map[string]func() error{
		"Heartbeat": func() error { _, err := h.Store.Heartbeat(ctx, id, attempt, 1, 1); return err },
		"SaveCheckpoint": func() error {
			_, err := h.Store.SaveCheckpoint(ctx, id, attempt, 1, 1, []byte(`{"stale":true}`))
			return err
		},
		"Succeed": func() error {
			_, err := succeed(h.Store, id, attempt, file, func() error { *published = true; return nil })
			return err
		},
		"CompleteFromFile": func() error { _, err := h.Store.CompleteFromFile(ctx, id, attempt, file); return err },
		"Fail": func() error {
			_, err := fail(h.Store, id, attempt, store.AttemptError{Code: "x", Message: "x"}, 0)
			return err
		},
		"Recover":        func() error { _, err := h.Store.Recover(ctx, id, attempt, "x", 0); return err },
		"Requeue":        func() error { _, err := requeue(h.Store, id, attempt, "x"); return err },
		"FinishCanceled": func() error { _, err := finishCanceled(h.Store, id, attempt); return err },
	}
}

func refusedAll(t *testing.T, h Harness, id string, attempts ...int) {
	t.Helper()
	before, evs := get(t, h, id), len(events(t, h, id))
	for _, attempt := range attempts {
		published := false
		for name, call := range fenced(h, id, attempt, &published) {
			if err := call(); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("%s with attempt %d on a %s job at attempt %d: err = %v, want ErrLeaseLost",
					name, attempt, before.Status, before.Attempt, err)
			}
		}
		if published {
			t.Fatalf("a refused Succeed (attempt %d) published", attempt)
		}
	}
	after := get(t, h, id)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused writes changed the job:\n%+v\nto\n%+v", before, after)
	}
	if n := len(events(t, h, id)); n != evs {
		t.Fatalf("refused writes added %d events", n-evs)
	}
}

// Rule 3: attempt is a fencing token.
func testFencing(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(5))
	refusedAll(t, h, j.ID, 0, 1) // PENDING: no attempt owns it
	claim(t, h)
	refusedAll(t, h, j.ID, 0, 2) // PROCESSING attempt 1: others are stale
	if _, err := h.Store.Recover(ctx, j.ID, 1, "lost", 0); err != nil {
		t.Fatal(err)
	}
	claim(t, h)
	refusedAll(t, h, j.ID, 1) // attempt 1 was recovered; 2 owns the job now
	if _, err := succeed(h.Store, j.ID, 2, file, nil); err != nil {
		t.Fatal(err)
	}
	refusedAll(t, h, j.ID, 2) // final: even the last owner is refused
	if _, err := h.Store.Heartbeat(ctx, "no-such-job", 1, 0, 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat of an unknown job: err = %v, want ErrLeaseLost", err)
	}
}

// Rule 4: a heartbeat stamps time and progress, adds no event, and reports a cancel
// request.
func testHeartbeat(t *testing.T, h Harness) {
	j := enqueue(t, h)
	c := claim(t, h)
	h.Advance(10 * time.Second)
	cancel, err := h.Store.Heartbeat(ctx, j.ID, 1, 5, 10)
	if err != nil || cancel {
		t.Fatalf("heartbeat = %v, %v", cancel, err)
	}
	got := get(t, h, j.ID)
	if !got.HeartbeatAt.After(c.HeartbeatAt) || got.ProgressRows != 5 || got.ProgressTotal != 10 {
		t.Fatalf("after heartbeat: heartbeat %v (claimed %v), progress %d/%d", got.HeartbeatAt, c.HeartbeatAt, got.ProgressRows, got.ProgressTotal)
	}
	if _, err := h.Store.Heartbeat(ctx, j.ID, 1, 6, -1); err != nil {
		t.Fatal(err)
	}
	if got := get(t, h, j.ID); got.ProgressRows != 6 || got.ProgressTotal != -1 {
		t.Fatalf("unknown total: progress %d/%d, want 6/-1", got.ProgressRows, got.ProgressTotal)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted)
	if _, err := h.Store.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if cancel, err := h.Store.Heartbeat(ctx, j.ID, 1, 7, -1); err != nil || !cancel {
		t.Fatalf("heartbeat after a cancel request = %v, %v; want true", cancel, err)
	}
}

// Rule 30: a checkpoint is written with a heartbeat, fenced like one; it outlives the
// attempt that wrote it (a recovery, a requeue, a retryable failure) for the next one to
// read, and a success or a cancel clears it.
func testCheckpoint(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(5))
	if cp, err := h.Store.Checkpoint(ctx, j.ID); err != nil || cp != nil {
		t.Fatalf("a new job's checkpoint = %q, %v; want none", cp, err)
	}
	if _, err := h.Store.Checkpoint(ctx, "no-such-job"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("checkpoint of an unknown job: %v, want ErrNotFound", err)
	}
	claim(t, h)
	h.Advance(time.Second)
	cp := []byte(`{"rows":1234,"token":"\u0000 and bytes"}`)
	if cancel, err := h.Store.SaveCheckpoint(ctx, j.ID, 1, 1234, 5000, cp); err != nil || cancel {
		t.Fatalf("save checkpoint = %v, %v", cancel, err)
	}
	got := get(t, h, j.ID)
	if got.ProgressRows != 1234 || got.ProgressTotal != 5000 {
		t.Fatalf("a checkpoint's progress: %d/%d, want 1234/5000", got.ProgressRows, got.ProgressTotal)
	}
	// A plain heartbeat keeps it.
	if _, err := h.Store.Heartbeat(ctx, j.ID, 1, 1300, 5000); err != nil {
		t.Fatal(err)
	}
	if c, err := h.Store.Checkpoint(ctx, j.ID); err != nil || string(c) != string(cp) {
		t.Fatalf("checkpoint after a heartbeat = %q, %v; want %q", c, err, cp)
	}
	big := make([]byte, store.MaxCheckpoint+1)
	if _, err := h.Store.SaveCheckpoint(ctx, j.ID, 1, 1, 1, big); !errors.Is(err, store.ErrCheckpointTooLarge) {
		t.Fatalf("an oversized checkpoint: %v, want ErrCheckpointTooLarge", err)
	}
	// The attempt is lost; the next one reads what the last wrote, and a stale write of
	// the lost attempt changes nothing.
	if _, err := h.Store.Recover(ctx, j.ID, 1, "heartbeat lost", 0); err != nil {
		t.Fatal(err)
	}
	if c, err := h.Store.Checkpoint(ctx, j.ID); err != nil || string(c) != string(cp) {
		t.Fatalf("checkpoint after a recovery = %q, %v; want %q", c, err, cp)
	}
	if c := claimID(t, h, j.ID); c.Attempt != 2 {
		t.Fatalf("claimed attempt %d, want 2", c.Attempt)
	}
	if _, err := h.Store.SaveCheckpoint(ctx, j.ID, 1, 9, 9, []byte(`{"stale":true}`)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the lost attempt's checkpoint: %v, want ErrLeaseLost", err)
	}
	if c, _ := h.Store.Checkpoint(ctx, j.ID); string(c) != string(cp) {
		t.Fatalf("a lost attempt's checkpoint landed: %q", c)
	}
	// A retryable failure keeps it for the next attempt.
	cp2 := []byte(`{"rows":2000}`)
	if _, err := h.Store.SaveCheckpoint(ctx, j.ID, 2, 2000, 5000, cp2); err != nil {
		t.Fatal(err)
	}
	if _, err := fail(h.Store, j.ID, 2, store.AttemptError{Code: "upstream", Message: "x"}, 0); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.Store.Checkpoint(ctx, j.ID); string(c) != string(cp2) {
		t.Fatalf("checkpoint after a retryable failure = %q, want %q", c, cp2)
	}
	claimID(t, h, j.ID)
	// Empty data clears it.
	if _, err := h.Store.SaveCheckpoint(ctx, j.ID, 3, 0, -1, nil); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.Store.Checkpoint(ctx, j.ID); c != nil {
		t.Fatalf("checkpoint after clearing = %q, want none", c)
	}
	if _, err := h.Store.SaveCheckpoint(ctx, j.ID, 3, 10, -1, cp); err != nil {
		t.Fatal(err)
	}
	if _, err := succeed(h.Store, j.ID, 3, file, nil); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.Store.Checkpoint(ctx, j.ID); c != nil {
		t.Fatalf("a succeeded job's checkpoint = %q, want none", c)
	}
	// A cancel clears it too.
	k := enqueue(t, h)
	claimID(t, h, k.ID)
	if _, err := h.Store.SaveCheckpoint(ctx, k.ID, 1, 10, -1, cp); err != nil {
		t.Fatal(err)
	}
	if _, err := finishCanceled(h.Store, k.ID, 1); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.Store.Checkpoint(ctx, k.ID); c != nil {
		t.Fatalf("a canceled job's checkpoint = %q, want none", c)
	}
}

// Rule 7: publish runs once, after the fence matched and before the commit: meanwhile a
// reader still sees the job PROCESSING.
func testSucceedPublishes(t *testing.T, h Harness) {
	j := enqueue(t, h)
	claim(t, h)
	calls := 0
	var during store.Job
	done, err := succeed(h.Store, j.ID, 1, file, func() error {
		calls++
		var err error
		during, err = h.Store.Get(ctx, j.ID)
		return err
	})
	if err != nil || calls != 1 {
		t.Fatalf("succeed: %v, publish called %d times", err, calls)
	}
	if during.Status != store.StatusProcessing {
		t.Fatalf("during publish a reader saw %s, want PROCESSING (not yet committed)", during.Status)
	}
	wantStatus(t, done, store.StatusSucceeded, 1)
	got := get(t, h, j.ID)
	if got.Status != store.StatusSucceeded || got.FileName != file.Name || got.FileSize != file.Size ||
		got.FileSHA256 != file.SHA256 || got.ProgressRows != file.Rows || got.FinishedAt.IsZero() ||
		!slices.Equal(got.Warnings, file.Warnings) || got.Worker != "" {
		t.Fatalf("succeeded job = %+v", got)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventSucceeded)
	noClaim(t, h)
}

// Rule 7: a publish error commits nothing, and the attempt may try again.
func testSucceedPublishError(t *testing.T, h Harness) {
	j := enqueue(t, h)
	claim(t, h)
	boom := errors.New("rename failed")
	if _, err := succeed(h.Store, j.ID, 1, file, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("succeed with a failing publish: err = %v, want it to wrap the publish error", err)
	}
	got := get(t, h, j.ID)
	wantStatus(t, got, store.StatusProcessing, 1)
	if got.FileName != "" || !got.FinishedAt.IsZero() {
		t.Fatalf("a failed publish left %+v", got)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted)
	if _, err := succeed(h.Store, j.ID, 1, file, func() error { return nil }); err != nil {
		t.Fatalf("second try: %v", err)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventSucceeded)
}

// Rule 5: an orphan whose file was published is completed from it.
func testCompleteFromFile(t *testing.T, h Harness) {
	j := enqueue(t, h)
	claim(t, h)
	done, err := h.Store.CompleteFromFile(ctx, j.ID, 1, file)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, store.StatusSucceeded, 1)
	if got := get(t, h, j.ID); got.FileName != file.Name || got.FileSize != file.Size || got.FileSHA256 != file.SHA256 {
		t.Fatalf("completed job = %+v", got)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventCompletedFromFile)
}

// Rule 6: a retryable failure goes back to PENDING, runnable retryIn later, and keeps
// its error.
func testFailRetries(t *testing.T, h Harness) {
	j := enqueue(t, h)
	claim(t, h)
	f, err := fail(h.Store, j.ID, 1, store.AttemptError{Code: "upstream", Message: "502"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, store.StatusPending, 1)
	if f.ErrorCode != "upstream" || f.ErrorMessage != "502" || !f.FinishedAt.IsZero() || f.Worker != "" {
		t.Fatalf("failed attempt = %+v", f)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventAttemptFailed)
	noClaim(t, h)
	if in, err := h.Store.NextRunIn(ctx, store.DefaultQueue); err != nil || in <= 0 || in > 30*time.Second {
		t.Fatalf("NextRunIn = %v, %v; want in (0, 30s]", in, err)
	}
	h.Advance(29 * time.Second)
	noClaim(t, h)
	h.Advance(time.Second)
	c := claimID(t, h, j.ID)
	if c.Attempt != 2 || c.ErrorCode != "" {
		t.Fatalf("next attempt = %+v, want attempt 2 with the error cleared", c)
	}
}

// Rule 6: the attempt that spends the last of max_attempts makes the job FAILED.
func testFailAtMaxAttempts(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(2))
	for attempt := 1; attempt <= 2; attempt++ {
		claimID(t, h, j.ID)
		f, err := fail(h.Store, j.ID, attempt, store.AttemptError{Code: "upstream", Message: "502"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := store.StatusPending
		if attempt == 2 {
			want = store.StatusFailed
		}
		wantStatus(t, f, want, attempt)
	}
	got := get(t, h, j.ID)
	if got.FinishedAt.IsZero() || got.ErrorCode != "upstream" {
		t.Fatalf("failed job = %+v", got)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventAttemptFailed, store.EventStarted, store.EventFailed)
	noClaim(t, h)
}

// Rule 6: a permanent error fails the job at once.
func testFailPermanent(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(5))
	claim(t, h)
	f, err := fail(h.Store, j.ID, 1, store.AttemptError{Code: "bad_params", Message: "no", Permanent: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, store.StatusFailed, 1)
	if f.ErrorCode != "bad_params" || f.FinishedAt.IsZero() {
		t.Fatalf("failed job = %+v", f)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventFailed)
}

// Rule 5: a recovered attempt counts as spent: the job runs again with the next attempt,
// and fails once none is left.
func testRecover(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(2))
	claim(t, h)
	r, err := h.Store.Recover(ctx, j.ID, 1, "heartbeat lost", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, store.StatusPending, 1)
	if r.ErrorCode != "lost" || r.ErrorMessage != "heartbeat lost" || r.Worker != "" {
		t.Fatalf("recovered job = %+v", r)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventRecovered)
	if c := claimID(t, h, j.ID); c.Attempt != 2 {
		t.Fatalf("claimed attempt %d after recovery, want 2", c.Attempt)
	}
	r, err = h.Store.Recover(ctx, j.ID, 2, "heartbeat lost", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, store.StatusFailed, 2)
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventRecovered, store.EventStarted, store.EventFailed)
	noClaim(t, h)
}

// Rule 9: a requeued attempt is not spent: the next claim has the same number.
func testRequeue(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(1))
	claim(t, h)
	r, err := requeue(h.Store, j.ID, 1, "shutdown")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, store.StatusPending, 0)
	if r.Worker != "" || r.ErrorCode != "" {
		t.Fatalf("requeued job = %+v", r)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventRequeued)
	if c := claimID(t, h, j.ID); c.Attempt != 1 {
		t.Fatalf("claimed attempt %d after requeue, want 1 again", c.Attempt)
	}
	// The one attempt it has is still there to fail with.
	f, err := fail(h.Store, j.ID, 1, store.AttemptError{Code: "x", Message: "x"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, store.StatusFailed, 1)
}

// Rule 8: a PENDING job is canceled at once; a final one cannot be.
func testCancelPending(t *testing.T, h Harness) {
	j := enqueue(t, h)
	c, err := h.Store.Cancel(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, c, store.StatusCanceled, 0)
	if c.FinishedAt.IsZero() {
		t.Fatalf("canceled job = %+v", c)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventCanceled)
	if _, err := h.Store.Cancel(ctx, j.ID); !errors.Is(err, store.ErrFinished) {
		t.Fatalf("second cancel: err = %v, want ErrFinished", err)
	}
	if _, err := h.Store.Cancel(ctx, "no-such-job"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel of an unknown job: err = %v, want ErrNotFound", err)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventCanceled)
	noClaim(t, h)
}

// Rule 8: a PROCESSING job gets a cancel request (once); its attempt ends CANCELED.
func testCancelProcessing(t *testing.T, h Harness) {
	j := enqueue(t, h)
	claim(t, h)
	for range 2 {
		c, err := h.Store.Cancel(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, c, store.StatusProcessing, 1)
		if !c.CancelRequested {
			t.Fatalf("cancel of a running job = %+v, want cancel requested", c)
		}
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventCancelRequested)
	done, err := finishCanceled(h.Store, j.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, store.StatusCanceled, 1)
	if done.FinishedAt.IsZero() || done.Worker != "" {
		t.Fatalf("finished canceled job = %+v", done)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventCancelRequested, store.EventCanceled)
}

// Rule 8: a requested cancel wins over retry, recovery and requeue.
func testCancelRequestedWins(t *testing.T, h Harness) {
	for name, end := range map[string]func(id string) (store.Job, error){
		"Fail": func(id string) (store.Job, error) {
			return fail(h.Store, id, 1, store.AttemptError{Code: "upstream", Message: "x"}, 0)
		},
		"Recover": func(id string) (store.Job, error) { return h.Store.Recover(ctx, id, 1, "lost", 0) },
		"Requeue": func(id string) (store.Job, error) { return requeue(h.Store, id, 1, "shutdown") },
	} {
		j := enqueue(t, h, maxAttempts(3))
		claimID(t, h, j.ID)
		if _, err := h.Store.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		got, err := end(j.ID)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Status != store.StatusCanceled || got.Attempt != 1 || got.FinishedAt.IsZero() {
			t.Fatalf("%s after a cancel request: %s attempt %d, want CANCELED attempt 1", name, got.Status, got.Attempt)
		}
		wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventCancelRequested, store.EventCanceled)
	}
	noClaim(t, h)
}

// Rule 5: Stale lists PROCESSING jobs by heartbeat age, by the store's clock, oldest
// first; zero lists them all.
func testStale(t *testing.T, h Harness) {
	old := enqueue(t, h)
	claim(t, h)
	h.Advance(time.Minute)
	fresh := enqueue(t, h)
	claim(t, h)
	enqueue(t, h) // PENDING: never stale
	ids := func(js []store.Job, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	if got := ids(h.Store.Stale(ctx, 30*time.Second)); !slices.Equal(got, []string{old.ID}) {
		t.Fatalf("stale after 30s = %v, want [%s]", got, old.ID)
	}
	if got := ids(h.Store.Stale(ctx, 0)); !slices.Equal(got, []string{old.ID, fresh.ID}) {
		t.Fatalf("every running job = %v, want [%s %s]", got, old.ID, fresh.ID)
	}
	h.Advance(time.Second)
	if _, err := h.Store.Heartbeat(ctx, old.ID, 1, 1, -1); err != nil {
		t.Fatal(err)
	}
	if got := ids(h.Store.Stale(ctx, 30*time.Second)); len(got) != 0 {
		t.Fatalf("stale after a heartbeat = %v, want none", got)
	}
	h.Advance(31 * time.Second)
	if got := ids(h.Store.Stale(ctx, 30*time.Second)); !slices.Equal(got, []string{fresh.ID, old.ID}) {
		t.Fatalf("stale 31s later = %v, want [%s %s] (oldest heartbeat first)", got, fresh.ID, old.ID)
	}
}

// Rule 27: a claim takes the next job of its own queue only, in the usual order within
// it; a job enqueued without a queue is in store.DefaultQueue.
func testClaimTakesOnlyItsQueue(t *testing.T, h Harness) {
	plain := enqueue(t, h)
	if plain.Queue != store.DefaultQueue {
		t.Fatalf("queue of a job enqueued without one = %q, want %q", plain.Queue, store.DefaultQueue)
	}
	light := enqueue(t, h, inQueue("light"))
	urgent := enqueue(t, h, inQueue("light"), func(nj *store.NewJob) { nj.Priority = -5 })
	if light.Queue != "light" || get(t, h, urgent.ID).Queue != "light" {
		t.Fatalf("queues = %q, %q; want light", light.Queue, get(t, h, urgent.ID).Queue)
	}
	claimID(t, h, plain.ID)
	noClaim(t, h) // light's jobs are due and ahead by priority, but not in this queue
	for _, want := range []store.Job{urgent, light} {
		j, err := claimOne(h.Store, "w1", "light")
		if err != nil || j.ID != want.ID || j.Queue != "light" {
			t.Fatalf("claim from light = %s (queue %q), %v; want %s", j.ID, j.Queue, err, want.ID)
		}
	}
	if j, err := claimOne(h.Store, "w1", "empty"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim from a queue without jobs = %s, %v; want ErrNotFound", j.ID, err)
	}
}

// NextRunIn looks only at the queue it is given: a due job of a full lane must not make
// another lane's dispatcher spin.
func testNextRunInIgnoresOtherQueues(t *testing.T, h Harness) {
	enqueue(t, h, inQueue("heavy"))
	if _, err := h.Store.NextRunIn(ctx, store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("NextRunIn(exports) with only a heavy job: err = %v, want ErrNotFound", err)
	}
	enqueue(t, h, func(nj *store.NewJob) { nj.RunAt = h.Now().Add(time.Minute) })
	if in, err := h.Store.NextRunIn(ctx, store.DefaultQueue); err != nil || in <= 0 || in > time.Minute {
		t.Fatalf("NextRunIn(exports) = %v, %v; want in (0, 1m], the heavy job not counted", in, err)
	}
	if in, err := h.Store.NextRunIn(ctx, "heavy"); err != nil || in > 0 {
		t.Fatalf("NextRunIn(heavy) = %v, %v; want <= 0", in, err)
	}
}

// NextRunIn says how long until the earliest PENDING job is due.
func testNextRunIn(t *testing.T, h Harness) {
	if _, err := h.Store.NextRunIn(ctx, store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("NextRunIn with nothing pending: err = %v, want ErrNotFound", err)
	}
	enqueue(t, h, func(nj *store.NewJob) { nj.RunAt = h.Now().Add(time.Hour) })
	j := enqueue(t, h, func(nj *store.NewJob) { nj.RunAt = h.Now().Add(time.Minute) })
	if in, err := h.Store.NextRunIn(ctx, store.DefaultQueue); err != nil || in <= 0 || in > time.Minute {
		t.Fatalf("NextRunIn = %v, %v; want in (0, 1m]", in, err)
	}
	h.Advance(2 * time.Minute)
	if in, err := h.Store.NextRunIn(ctx, store.DefaultQueue); err != nil || in > 0 {
		t.Fatalf("NextRunIn with a job overdue = %v, %v; want <= 0", in, err)
	}
	claimID(t, h, j.ID)
	if in, err := h.Store.NextRunIn(ctx, store.DefaultQueue); err != nil || in <= 0 || in > time.Hour {
		t.Fatalf("NextRunIn = %v, %v; want in (0, 1h]", in, err)
	}
}

// Rule 20: a retry gives a FAILED or CANCELED job a new budget and keeps its attempt,
// so no earlier execution matches the fence.
func testRetry(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(1))
	claim(t, h)
	if _, err := fail(h.Store, j.ID, 1, store.AttemptError{Code: "x", Message: "x"}, 0); err != nil {
		t.Fatal(err)
	}
	r, err := h.Store.Retry(ctx, j.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, store.StatusPending, 1)
	if r.MaxAttempts != 3 || r.ErrorCode != "" || !r.FinishedAt.IsZero() {
		t.Fatalf("retried job = %+v, want max_attempts 3 and no error", r)
	}
	if j.AttemptBase != 0 || r.AttemptBase != 1 {
		t.Fatalf("attempt base %d before the retry and %d after, want 0 and 1 (the attempt it had)", j.AttemptBase, r.AttemptBase)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted, store.EventFailed, store.EventRetried)
	refusedAll(t, h, j.ID, 1)
	if c := claimID(t, h, j.ID); c.Attempt != 2 || c.AttemptBase != 1 {
		t.Fatalf("claimed attempt %d (base %d) after retry, want 2 (base 1)", c.Attempt, c.AttemptBase)
	}
	refusedAll(t, h, j.ID, 1)
	if _, err := h.Store.Retry(ctx, j.ID, 0); !errors.Is(err, store.ErrNotRetryable) {
		t.Fatalf("retry of a running job: err = %v, want ErrNotRetryable", err)
	}
	if _, err := h.Store.Retry(ctx, "no-such-job", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retry of an unknown job: err = %v, want ErrNotFound", err)
	}
}

// Rules 21, 22: retention lists finished jobs by age, expires SUCCEEDED ones, and
// deletes only final jobs, with their events.
func testExpireAndDelete(t *testing.T, h Harness) {
	ok := enqueue(t, h)
	claim(t, h)
	if _, err := succeed(h.Store, ok.ID, 1, file, nil); err != nil {
		t.Fatal(err)
	}
	failed := enqueue(t, h, maxAttempts(1))
	claim(t, h)
	if _, err := fail(h.Store, failed.ID, 1, store.AttemptError{Code: "x", Message: "x"}, 0); err != nil {
		t.Fatal(err)
	}
	pending := enqueue(t, h)
	ids := func(statuses []store.Status, age time.Duration) []string {
		t.Helper()
		js, err := h.Store.FinishedOlderThan(ctx, statuses, age, 10)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	succeeded := []store.Status{store.StatusSucceeded}
	final := []store.Status{store.StatusSucceeded, store.StatusFailed, store.StatusCanceled, store.StatusExpired}
	if got := ids(final, time.Hour); len(got) != 0 {
		t.Fatalf("finished more than an hour ago, at once: %v", got)
	}
	h.Advance(time.Hour + time.Second)
	if got := ids(succeeded, time.Hour); !slices.Equal(got, []string{ok.ID}) {
		t.Fatalf("succeeded over an hour ago = %v, want [%s]", got, ok.ID)
	}
	if got := ids(final, time.Hour); !slices.Equal(got, []string{ok.ID, failed.ID}) {
		t.Fatalf("finished over an hour ago = %v, want [%s %s] (oldest first)", got, ok.ID, failed.ID)
	}
	if js, err := h.Store.FinishedOlderThan(ctx, final, time.Hour, 1); err != nil || len(js) != 1 {
		t.Fatalf("limit 1: %d jobs, %v", len(js), err)
	}

	exp, err := h.Store.Expire(ctx, ok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Status != store.StatusExpired || exp.FileName != file.Name {
		t.Fatalf("expired job = %+v, want EXPIRED keeping its file's record", exp)
	}
	wantEvents(t, h, ok.ID, store.EventAccepted, store.EventStarted, store.EventSucceeded, store.EventExpired)
	if _, err := h.Store.Expire(ctx, ok.ID); !errors.Is(err, store.ErrNotSucceeded) {
		t.Fatalf("second expire: err = %v, want ErrNotSucceeded", err)
	}
	if _, err := h.Store.Expire(ctx, failed.ID); !errors.Is(err, store.ErrNotSucceeded) {
		t.Fatalf("expire of a FAILED job: err = %v, want ErrNotSucceeded", err)
	}

	if _, err := h.Store.Delete(ctx, pending.ID); !errors.Is(err, store.ErrNotFinished) {
		t.Fatalf("delete of a PENDING job: err = %v, want ErrNotFinished", err)
	}
	for _, id := range []string{ok.ID, failed.ID} {
		if _, err := h.Store.Delete(ctx, id); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
		if _, err := h.Store.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted job %s: get err = %v, want ErrNotFound", id, err)
		}
		if evs := events(t, h, id); len(evs) != 0 {
			t.Fatalf("deleted job %s left events %v", id, types(evs))
		}
	}
	if _, err := h.Store.Delete(ctx, ok.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: err = %v, want ErrNotFound", err)
	}
	wantEvents(t, h, pending.ID, store.EventAccepted)
}

// Rule 10: every change appends its event; EventsAfter pages through the log in id
// order from any cursor, and a page never repeats or skips an event.
func testEventsAfterPaging(t *testing.T, h Harness) {
	var want []string
	for range 3 {
		j := enqueue(t, h)
		want = append(want, j.ID+" "+store.EventAccepted)
	}
	for range 3 {
		j := claim(t, h)
		want = append(want, j.ID+" "+store.EventStarted)
		if _, err := succeed(h.Store, j.ID, 1, file, nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, j.ID+" "+store.EventSucceeded)
	}
	whole := allEvents(t, h, 1000)
	var got []string
	for _, e := range whole {
		got = append(got, e.JobID+" "+e.Type)
		if e.At.IsZero() || e.Status == "" {
			t.Fatalf("event %+v lacks its time or status", e)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events =\n%v\nwant\n%v", got, want)
	}
	for _, page := range []int{1, 2, 4} {
		paged := allEvents(t, h, page)
		if fmt.Sprint(paged) != fmt.Sprint(whole) {
			t.Fatalf("pages of %d differ from one read:\n%v\n%v", page, paged, whole)
		}
	}
	// From a cursor in the middle: exactly the events after it.
	mid := whole[len(whole)/2].ID
	rest, err := h.Store.EventsAfter(ctx, mid, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rest) != fmt.Sprint(whole[len(whole)/2+1:]) {
		t.Fatalf("events after %d = %v", mid, rest)
	}
	last := whole[len(whole)-1].ID
	if rest, err := h.Store.EventsAfter(ctx, last, 10); err != nil || len(rest) != 0 {
		t.Fatalf("events after the last: %v, %v", rest, err)
	}
}
