package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
)

func TestEnqueueCommitsJobAndEvent(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	runAt := clk.Now().Add(time.Minute)
	j := enqueue(t, st, store.NewJob{Kind: "report", Args: json.RawMessage(`{"a":1}`), Priority: 3, RunAt: runAt, MaxAttempts: 5})
	if j.Status != store.StatusPending || j.Attempt != 0 || j.MaxAttempts != 5 || j.Priority != 3 ||
		!j.RunAt.Equal(runAt) || !j.CreatedAt.Equal(clk.Now()) || string(j.Args) != `{"a":1}` || j.Kind != "report" {
		t.Fatalf("enqueued job = %+v", j)
	}
	if got := get(t, st, j.ID); !reflect.DeepEqual(got, j) {
		t.Fatalf("get = %+v\nwant  %+v", got, j)
	}
	want := []evSummary{{store.EventAccepted, store.StatusPending, 0}}
	if got := summarize(events(t, st, j.ID)); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}

	d := enqueue(t, st, store.NewJob{})
	if d.MaxAttempts != 3 || !d.RunAt.Equal(clk.Now()) {
		t.Fatalf("defaults: max_attempts %d run_at %v, want 3 and now", d.MaxAttempts, d.RunAt)
	}
	if _, _, err := st.Enqueue(context.Background(), store.NewJob{ID: d.ID, Kind: "test", Args: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("enqueue with a used id: err = %v, want ErrConflict", err)
	}
	if _, _, err := st.Enqueue(context.Background(), store.NewJob{ID: "x", Kind: "test"}); err == nil {
		t.Fatal("enqueue without args succeeded")
	}
}

// TestEnqueueAndClaimAreAtomicWithTheirEvents: a job row and its event commit together (rule 10): when the
// event cannot be written, no job is left behind.
func TestEnqueueAndClaimAreAtomicWithTheirEvents(t *testing.T) {
	st, path := openStore(t, sqlite.Options{})
	ctx := context.Background()
	pending := enqueue(t, st, store.NewJob{})

	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TRIGGER no_events BEFORE INSERT ON job_events BEGIN SELECT RAISE(ABORT, 'no events'); END`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Enqueue(ctx, store.NewJob{ID: "orphan-row", Kind: "test", Args: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("enqueue succeeded although its event could not be written")
	}
	if _, err := st.Get(ctx, "orphan-row"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job row without its event: get err = %v", err)
	}
	if _, err := st.Claim(ctx, "w", store.DefaultQueue); err == nil {
		t.Fatal("claim succeeded although its event could not be written")
	}
	if j := get(t, st, pending.ID); j.Status != store.StatusPending || j.Attempt != 0 {
		t.Fatalf("claim without its event changed the job: %+v", j)
	}
}

func TestIdempotencyKey(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{})
	ctx := context.Background()
	first := enqueue(t, st, store.NewJob{ID: "first", IdempotencyKey: "k1", RequestHash: "h1"})

	again, existed, err := st.Enqueue(ctx, store.NewJob{ID: "second", Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "k1", RequestHash: "h1"})
	if err != nil || !existed || again.ID != "first" {
		t.Fatalf("replay: job %q existed %v err %v; want the first job, existed", again.ID, existed, err)
	}
	other, existed, err := st.Enqueue(ctx, store.NewJob{ID: "third", Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "k1", RequestHash: "h2"})
	if !errors.Is(err, store.ErrIdempotencyMismatch) || !existed || other.ID != "first" {
		t.Fatalf("mismatch: job %q existed %v err %v; want ErrIdempotencyMismatch with the first job", other.ID, existed, err)
	}
	for _, id := range []string{"second", "third"} {
		if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("get %s: err = %v, want ErrNotFound", id, err)
		}
	}
	if got := summarize(events(t, st, first.ID)); len(got) != 1 {
		t.Fatalf("replays added events: %+v", got)
	}

	// Many callers racing with one key still make one job.
	var wg sync.WaitGroup
	ids := make(chan string, 16)
	for i := range 16 {
		wg.Go(func() {
			j, _, err := st.Enqueue(ctx, store.NewJob{ID: fmt.Sprintf("race%d", i), Kind: "test", Args: json.RawMessage(`{}`), IdempotencyKey: "k2", RequestHash: "h"})
			if err != nil {
				t.Errorf("racing enqueue: %v", err)
				return
			}
			ids <- j.ID
		})
	}
	wg.Wait()
	close(ids)
	var winner string
	for id := range ids {
		if winner == "" {
			winner = id
		}
		if id != winner {
			t.Fatalf("one key made jobs %s and %s", winner, id)
		}
	}
	jobs, err := st.List(ctx, store.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs for two keys", len(jobs))
	}
}

func TestClaimOrder(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	t0 := clk.Now()
	a := enqueue(t, st, store.NewJob{RunAt: t0.Add(2 * time.Second)})
	b := enqueue(t, st, store.NewJob{RunAt: t0.Add(1 * time.Second)})
	c := enqueue(t, st, store.NewJob{RunAt: t0.Add(3 * time.Second), Priority: -1})
	d := enqueue(t, st, store.NewJob{RunAt: t0.Add(1 * time.Second)}) // ties with b, inserted later
	e := enqueue(t, st, store.NewJob{RunAt: t0.Add(time.Hour), Priority: -5})
	f := enqueue(t, st, store.NewJob{RunAt: t0.Add(1 * time.Second), Priority: 1})
	// Ids that sort against insertion order: insertion order, not id, breaks ties.
	g := enqueue(t, st, store.NewJob{ID: "zzz", RunAt: t0.Add(4 * time.Second)})
	h := enqueue(t, st, store.NewJob{ID: "aaa", RunAt: t0.Add(4 * time.Second)})

	if _, err := st.Claim(ctx, "w", store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim before any run_at: err = %v, want ErrNotFound", err)
	}
	clk.Advance(10 * time.Second)
	var order []string
	for {
		j, err := st.Claim(ctx, "w", store.DefaultQueue)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, j.ID)
	}
	want := []string{c.ID, b.ID, d.ID, a.ID, g.ID, h.ID, f.ID}
	if !slices.Equal(order, want) {
		t.Fatalf("claim order = %v, want %v (e, due in an hour, must wait)", order, want)
	}
	if j := get(t, st, e.ID); j.Status != store.StatusPending {
		t.Fatalf("future job claimed: %+v", j)
	}
	next, err := st.NextRunIn(ctx, store.DefaultQueue)
	if want := e.RunAt.Sub(clk.Now()); err != nil || next != want {
		t.Fatalf("NextRunIn = %v, %v; want %v", next, err, want)
	}
	clk.Advance(time.Hour)
	if j := claim(t, st, "w"); j.ID != e.ID {
		t.Fatalf("claimed %s, want %s once due", j.ID, e.ID)
	}
	if _, err := st.NextRunIn(ctx, store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("NextRunIn with nothing pending: err = %v", err)
	}
}

// TestClaimContention has several stores on one file (as several pools would) and many
// goroutines in each claim at once: every job is claimed exactly once.
func TestClaimContention(t *testing.T) {
	const (
		nJobs       = 300
		nStores     = 4
		perStore    = 4
		busyTimeout = 30 * time.Second
	)
	first, path := openStore(t, sqlite.Options{BusyTimeout: busyTimeout})
	for range nJobs {
		enqueue(t, first, store.NewJob{})
	}
	stores := []*store.Store{first}
	for range nStores - 1 {
		stores = append(stores, openAt(t, path, sqlite.Options{BusyTimeout: busyTimeout}))
	}

	ctx := context.Background()
	start := make(chan struct{})
	claimed := make([][]store.Job, nStores*perStore)
	var wg sync.WaitGroup
	for si, st := range stores {
		for g := range perStore {
			slot := si*perStore + g
			worker := fmt.Sprintf("store%d/g%d", si, g)
			wg.Go(func() {
				<-start
				for {
					j, err := st.Claim(ctx, worker, store.DefaultQueue)
					if errors.Is(err, store.ErrNotFound) {
						return
					}
					if err != nil {
						t.Errorf("%s: claim: %v", worker, err)
						return
					}
					if j.Worker != worker || j.Attempt != 1 || j.Status != store.StatusProcessing {
						t.Errorf("%s: claimed %+v", worker, j)
					}
					claimed[slot] = append(claimed[slot], j)
				}
			})
		}
	}
	close(start)
	wg.Wait()

	seen := map[string]string{}
	for slot, js := range claimed {
		for _, j := range js {
			if prev, dup := seen[j.ID]; dup {
				t.Fatalf("job %s claimed by %s and by slot %d", j.ID, prev, slot)
			}
			seen[j.ID] = j.Worker
		}
	}
	if len(seen) != nJobs {
		t.Fatalf("%d jobs claimed, want %d", len(seen), nJobs)
	}
	for id, worker := range seen {
		j := get(t, first, id)
		if j.Status != store.StatusProcessing || j.Attempt != 1 || j.Worker != worker {
			t.Fatalf("job %s after the race: %+v, want PROCESSING attempt 1 by %s", id, j, worker)
		}
		if got := summarize(events(t, first, id)); len(got) != 2 || got[1].Type != store.EventStarted {
			t.Fatalf("job %s events = %+v, want accepted then one started", id, got)
		}
	}
	busy := 0
	for _, js := range claimed {
		if len(js) > 0 {
			busy++
		}
	}
	t.Logf("%d of %d claimers got work", busy, len(claimed))
}

// TestEventsForEveryTransition walks jobs through every transition and checks each row
// change and the event it appended (rule 10).
func TestEventsForEveryTransition(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	type E = evSummary

	// One job through claim, heartbeat, retryable failure, recovery, requeue, cancel.
	j := enqueue(t, st, store.NewJob{MaxAttempts: 5})
	c := claim(t, st, "w1")
	if c.ID != j.ID || c.Attempt != 1 || c.Status != store.StatusProcessing || c.Worker != "w1" ||
		!c.StartedAt.Equal(clk.Now()) || !c.HeartbeatAt.Equal(clk.Now()) {
		t.Fatalf("claimed = %+v", c)
	}
	clk.Advance(time.Second)
	if cancel, err := st.Heartbeat(ctx, j.ID, 1, 10, 100); err != nil || cancel {
		t.Fatalf("heartbeat = %v, %v", cancel, err)
	}
	if got := get(t, st, j.ID); got.ProgressRows != 10 || got.ProgressTotal != 100 || !got.HeartbeatAt.Equal(clk.Now()) {
		t.Fatalf("after heartbeat = %+v", got)
	}
	if _, err := st.Heartbeat(ctx, j.ID, 1, 11, -1); err != nil {
		t.Fatal(err)
	}
	if got := get(t, st, j.ID); got.ProgressTotal != -1 {
		t.Fatalf("unknown total stored as %d", got.ProgressTotal)
	}
	retryAt := clk.Now().Add(time.Minute)
	f, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "upstream", Message: "502"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if f.Status != store.StatusPending || !f.RunAt.Equal(retryAt) || f.ErrorCode != "upstream" || f.ErrorMessage != "502" ||
		f.Worker != "" || !f.FinishedAt.IsZero() || f.Attempt != 1 {
		t.Fatalf("after retryable failure = %+v", f)
	}
	clk.Advance(time.Minute)
	if c := claim(t, st, "w2"); c.Attempt != 2 || c.ErrorCode != "" || c.ProgressRows != 0 {
		t.Fatalf("second claim = %+v, want attempt 2 with error and progress reset", c)
	}
	r, err := st.Recover(ctx, j.ID, 2, "heartbeat lost", 0)
	if err != nil || r.Status != store.StatusPending || r.ErrorCode != "lost" || r.Attempt != 2 {
		t.Fatalf("recover = %+v, %v", r, err)
	}
	claim(t, st, "w3")
	q, err := st.Requeue(ctx, j.ID, 3, "shutdown")
	if err != nil || q.Status != store.StatusPending || q.Attempt != 2 || q.Worker != "" {
		t.Fatalf("requeue = %+v, %v; want PENDING with attempt back to 2", q, err)
	}
	if c := claim(t, st, "w4"); c.Attempt != 3 {
		t.Fatalf("claim after requeue: attempt %d, want 3", c.Attempt)
	}
	cr, err := st.Cancel(ctx, j.ID)
	if err != nil || cr.Status != store.StatusProcessing || !cr.CancelRequested {
		t.Fatalf("cancel running = %+v, %v", cr, err)
	}
	if again, err := st.Cancel(ctx, j.ID); err != nil || !again.CancelRequested {
		t.Fatalf("second cancel = %+v, %v", again, err)
	}
	if cancel, err := st.Heartbeat(ctx, j.ID, 3, 0, -1); err != nil || !cancel {
		t.Fatalf("heartbeat after cancel = %v, %v; want cancel requested", cancel, err)
	}
	fc, err := st.FinishCanceled(ctx, j.ID, 3)
	if err != nil || fc.Status != store.StatusCanceled || fc.FinishedAt.IsZero() {
		t.Fatalf("finish canceled = %+v, %v", fc, err)
	}
	if _, err := st.Cancel(ctx, j.ID); !errors.Is(err, store.ErrFinished) {
		t.Fatalf("cancel finished job: err = %v, want ErrFinished", err)
	}
	want := []E{
		{store.EventAccepted, store.StatusPending, 0},
		{store.EventStarted, store.StatusProcessing, 1},
		{store.EventAttemptFailed, store.StatusPending, 1},
		{store.EventStarted, store.StatusProcessing, 2},
		{store.EventRecovered, store.StatusPending, 2},
		{store.EventStarted, store.StatusProcessing, 3},
		{store.EventRequeued, store.StatusPending, 3},
		{store.EventStarted, store.StatusProcessing, 3},
		{store.EventCancelRequested, store.StatusProcessing, 3},
		{store.EventCanceled, store.StatusCanceled, 3},
	}
	evs := events(t, st, j.ID)
	if got := summarize(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events =\n%+v\nwant\n%+v", got, want)
	}
	af := eventData(t, evs[2])
	if af["code"] != "upstream" || af["message"] != "502" || af["retry_at"] != retryAt.Format(time.RFC3339Nano) {
		t.Fatalf("attempt_failed data = %v", af)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID || evs[i].At.Before(evs[i-1].At) {
			t.Fatalf("events out of order: %+v then %+v", evs[i-1], evs[i])
		}
	}

	// Success publishes inside the transaction and records the file.
	s := enqueue(t, st, store.NewJob{})
	claim(t, st, "w")
	published := 0
	res := store.FileResult{Name: s.ID + ".xlsx", Size: 42, SHA256: "abc", Rows: 7}
	done, err := st.Succeed(ctx, s.ID, 1, res, func() error { published++; return nil })
	if err != nil || published != 1 || done.Status != store.StatusSucceeded || done.FileName != res.Name ||
		done.FileSize != 42 || done.FileSHA256 != "abc" || done.ProgressRows != 7 || done.Worker != "" || done.FinishedAt.IsZero() {
		t.Fatalf("succeed = %+v, %v (published %d)", done, err, published)
	}
	if got := summarize(events(t, st, s.ID)); !reflect.DeepEqual(got[2:], []E{{store.EventSucceeded, store.StatusSucceeded, 1}}) {
		t.Fatalf("success events = %+v", got)
	}

	// A failed publish commits nothing.
	p := enqueue(t, st, store.NewJob{})
	claim(t, st, "w")
	if _, err := st.Succeed(ctx, p.ID, 1, res, func() error { return errors.New("disk full") }); err == nil {
		t.Fatal("succeed with a failing publish returned nil")
	}
	if got := get(t, st, p.ID); got.Status != store.StatusProcessing || got.FileName != "" {
		t.Fatalf("after failed publish = %+v", got)
	}
	if got := events(t, st, p.ID); len(got) != 2 {
		t.Fatalf("failed publish left events: %+v", summarize(got))
	}

	// Completing an orphan from its file.
	o := enqueue(t, st, store.NewJob{})
	claim(t, st, "dead")
	if got, err := st.CompleteFromFile(ctx, o.ID, 1, res); err != nil || got.Status != store.StatusSucceeded || got.FileSHA256 != "abc" {
		t.Fatalf("complete from file = %+v, %v", got, err)
	}

	// Permanent failure; last attempt recovered; last attempt failed; pending canceled.
	pf := enqueue(t, st, store.NewJob{})
	claim(t, st, "w")
	if got, err := st.Fail(ctx, pf.ID, 1, store.AttemptError{Code: "bad_params", Message: "no", Permanent: true}, 0); err != nil ||
		got.Status != store.StatusFailed || got.FinishedAt.IsZero() || got.ErrorCode != "bad_params" {
		t.Fatalf("permanent failure = %+v, %v", got, err)
	}
	lr := enqueue(t, st, store.NewJob{MaxAttempts: 1})
	claim(t, st, "w")
	if got, err := st.Recover(ctx, lr.ID, 1, "gone", 0); err != nil || got.Status != store.StatusFailed || got.ErrorCode != "lost" {
		t.Fatalf("recover last attempt = %+v, %v", got, err)
	}
	lf := enqueue(t, st, store.NewJob{MaxAttempts: 1})
	claim(t, st, "w")
	if got, err := st.Fail(ctx, lf.ID, 1, store.AttemptError{Code: "upstream", Message: "x"}, 0); err != nil || got.Status != store.StatusFailed {
		t.Fatalf("fail last attempt = %+v, %v", got, err)
	}
	pc := enqueue(t, st, store.NewJob{})
	if got, err := st.Cancel(ctx, pc.ID); err != nil || got.Status != store.StatusCanceled || got.FinishedAt.IsZero() {
		t.Fatalf("cancel pending = %+v, %v", got, err)
	}
	if _, err := st.Claim(ctx, "w", store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a canceled job was claimable: %v", err)
	}

	for _, tc := range []struct {
		id   string
		want []E
	}{
		{o.ID, []E{{store.EventAccepted, store.StatusPending, 0}, {store.EventStarted, store.StatusProcessing, 1}, {store.EventCompletedFromFile, store.StatusSucceeded, 1}}},
		{pf.ID, []E{{store.EventAccepted, store.StatusPending, 0}, {store.EventStarted, store.StatusProcessing, 1}, {store.EventFailed, store.StatusFailed, 1}}},
		{lr.ID, []E{{store.EventAccepted, store.StatusPending, 0}, {store.EventStarted, store.StatusProcessing, 1}, {store.EventFailed, store.StatusFailed, 1}}},
		{lf.ID, []E{{store.EventAccepted, store.StatusPending, 0}, {store.EventStarted, store.StatusProcessing, 1}, {store.EventFailed, store.StatusFailed, 1}}},
		{pc.ID, []E{{store.EventAccepted, store.StatusPending, 0}, {store.EventCanceled, store.StatusCanceled, 0}}},
	} {
		if got := summarize(events(t, st, tc.id)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("job %s events = %+v, want %+v", tc.id, got, tc.want)
		}
	}
	counts, err := st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[store.Status]int{store.StatusCanceled: 2, store.StatusSucceeded: 2, store.StatusFailed: 3, store.StatusProcessing: 1}; !reflect.DeepEqual(counts, want) {
		t.Fatalf("counts = %v, want %v", counts, want)
	}
}

// TestCancelRequestedWinsOverRetry: a job whose cancel was requested while it ran does
// not go back to PENDING to run again, whichever way its attempt ends.
func TestCancelRequestedWinsOverRetry(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		end  func(id string) (store.Job, error)
	}{
		{"fail", func(id string) (store.Job, error) {
			return st.Fail(ctx, id, 1, store.AttemptError{Code: "upstream", Message: "x"}, 0)
		}},
		{"recover", func(id string) (store.Job, error) { return st.Recover(ctx, id, 1, "lost", 0) }},
		{"requeue", func(id string) (store.Job, error) { return st.Requeue(ctx, id, 1, "shutdown") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := enqueue(t, st, store.NewJob{})
			claim(t, st, "w")
			if _, err := st.Cancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			got, err := tc.end(j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != store.StatusCanceled || got.FinishedAt.IsZero() || got.Attempt != 1 {
				t.Fatalf("job = %+v, want CANCELED", got)
			}
			evs := summarize(events(t, st, j.ID))
			if last := evs[len(evs)-1]; last != (evSummary{store.EventCanceled, store.StatusCanceled, 1}) {
				t.Fatalf("last event = %+v", last)
			}
			if _, err := st.Claim(ctx, "w", store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("canceled job claimable again: %v", err)
			}
		})
	}
}

// TestFencing: once an attempt lost its lease (recovered, then claimed again), every
// update it tries is refused and changes nothing (rule 3).
func TestFencing(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{MaxAttempts: 5})
	claim(t, st, "old")
	if _, err := st.Recover(ctx, j.ID, 1, "heartbeat lost", 0); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, st, "new"); c.Attempt != 2 {
		t.Fatalf("reclaim attempt = %d, want 2", c.Attempt)
	}
	if _, err := st.Heartbeat(ctx, j.ID, 2, 5, 10); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	before := get(t, st, j.ID)
	beforeEv := events(t, st, j.ID)

	published := false
	stale := []struct {
		name string
		call func() error
	}{
		{"heartbeat", func() error { _, err := st.Heartbeat(ctx, j.ID, 1, 99, 99); return err }},
		{"succeed", func() error {
			_, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: "x", Size: 1}, func() error { published = true; return nil })
			return err
		}},
		{"fail", func() error {
			_, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "x", Message: "x"}, 0)
			return err
		}},
		{"fail permanent", func() error {
			_, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "x", Message: "x", Permanent: true}, 0)
			return err
		}},
		{"finish canceled", func() error { _, err := st.FinishCanceled(ctx, j.ID, 1); return err }},
		{"requeue", func() error { _, err := st.Requeue(ctx, j.ID, 1, "shutdown"); return err }},
		{"recover", func() error { _, err := st.Recover(ctx, j.ID, 1, "x", 0); return err }},
		{"complete from file", func() error {
			_, err := st.CompleteFromFile(ctx, j.ID, 1, store.FileResult{Name: "x"})
			return err
		}},
	}
	for _, s := range stale {
		if err := s.call(); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("%s by the old attempt: err = %v, want ErrLeaseLost", s.name, err)
		}
	}
	if published {
		t.Error("the old attempt's publish callback ran")
	}
	if after := get(t, st, j.ID); !reflect.DeepEqual(after, before) {
		t.Errorf("row changed by a fenced-out attempt:\n%+v\nwas\n%+v", after, before)
	}
	if afterEv := events(t, st, j.ID); !reflect.DeepEqual(afterEv, beforeEv) {
		t.Errorf("events changed by a fenced-out attempt: %+v", summarize(afterEv[len(beforeEv):]))
	}

	// The fence also holds for a finished job: the owner's own second write is refused.
	if _, err := st.Succeed(ctx, j.ID, 2, store.FileResult{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Heartbeat(ctx, j.ID, 2, 1, 1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat after success: err = %v, want ErrLeaseLost", err)
	}
	if _, err := st.Fail(ctx, j.ID, 2, store.AttemptError{Code: "x"}, 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fail after success: err = %v, want ErrLeaseLost", err)
	}
}

func TestRunningByHeartbeatAge(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	old := enqueue(t, st, store.NewJob{})
	claim(t, st, "w")
	clk.Advance(time.Minute)
	fresh := enqueue(t, st, store.NewJob{})
	claim(t, st, "w")
	enqueue(t, st, store.NewJob{}) // pending: never "running"

	stale, err := st.Stale(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0].ID != old.ID {
		t.Fatalf("stale = %+v, want only %s", stale, old.ID)
	}
	all, err := st.Stale(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != old.ID || all[1].ID != fresh.ID {
		t.Fatalf("all running = %+v, want %s then %s", all, old.ID, fresh.ID)
	}
}

// TestWritesReturnTheStoredJob: the job an enqueue, a claim and a success return is the
// row as committed. The store builds each from what it read and what it wrote rather
// than by RETURNING (claimTx, finishTx, enqueueTx), so a column it forgets to set would
// show here. A claim of several jobs returns them in claim order.
func TestWritesReturnTheStoredJob(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	t0 := clk.Now()
	for i, nj := range []store.NewJob{
		{RunAt: t0.Add(2 * time.Second), IdempotencyKey: "a", RequestHash: "h", CreatedBy: "ann", NotifyURL: "https://example.com/h"},
		{RunAt: t0.Add(time.Second), Priority: -1, MaxAttempts: 5},
		{RunAt: t0.Add(time.Second)},
		{RunAt: t0.Add(time.Hour)},
	} {
		nj.ID, nj.Kind, nj.Args = fmt.Sprintf("job%d", i), "test", json.RawMessage(`{"report":"r"}`)
		r, existed, err := st.Enqueue(ctx, nj)
		if err != nil || existed {
			t.Fatalf("enqueue %d: %v, existed %v", i, err, existed)
		}
		if got := get(t, st, r.ID); !reflect.DeepEqual(got, r) {
			t.Fatalf("enqueued job:\n%+v\nstored:\n%+v", r, got)
		}
	}
	// A job that failed once comes back with its error cleared and its checkpoint kept.
	clk.Advance(10 * time.Second)
	j := claim(t, st, "w0")
	if _, err := st.Fail(ctx, j.ID, j.Attempt, store.AttemptError{Code: "x", Message: "m"}, 0); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.ClaimBatch(ctx, "w1", store.DefaultQueue, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range claimed {
		ids = append(ids, c.ID)
		if got := get(t, st, c.ID); !reflect.DeepEqual(got, c) {
			t.Fatalf("claimed job:\n%+v\nstored:\n%+v", c, got)
		}
		if c.Status != store.StatusProcessing || c.Worker != "w1" || c.ErrorCode != "" || !c.StartedAt.Equal(clk.Now()) {
			t.Fatalf("claimed job: %+v", c)
		}
	}
	if want := []string{"job1", "job2", "job0"}; !slices.Equal(ids, want) {
		t.Fatalf("claimed %v, want %v in claim order (job3 is not due)", ids, want)
	}
	if claimed[0].Attempt != 2 || claimed[1].Attempt != 1 {
		t.Fatalf("attempts %d, %d; want 2 (claimed before), 1", claimed[0].Attempt, claimed[1].Attempt)
	}
	clk.Advance(time.Second)
	for i, res := range []store.FileResult{
		{Name: "a.csv", Size: 10, SHA256: "abc", Rows: 7, Warnings: []string{"w"}},
		{}, // no file, no rows: progress stays as the heartbeats left it
	} {
		c := claimed[i]
		if i == 1 {
			if _, err := st.Heartbeat(ctx, c.ID, c.Attempt, 3, 9); err != nil {
				t.Fatal(err)
			}
		}
		r, err := st.Succeed(ctx, c.ID, c.Attempt, res, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, st, c.ID); !reflect.DeepEqual(got, r) {
			t.Fatalf("succeeded job:\n%+v\nstored:\n%+v", r, got)
		}
		if _, err := st.Succeed(ctx, c.ID, c.Attempt, res, nil); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("second success: %v, want ErrLeaseLost", err)
		}
	}
	// A stale attempt's success is fenced out and changes nothing.
	c := claimed[2]
	if _, err := st.Succeed(ctx, c.ID, c.Attempt-1, store.FileResult{Name: "x"}, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale success: %v, want ErrLeaseLost", err)
	}
	if got := get(t, st, c.ID); !reflect.DeepEqual(got, c) {
		t.Fatalf("stale success changed the job:\n%+v\nwas:\n%+v", got, c)
	}
}

// TestListFindsEveryState: every filter of List, alone and together, finds the jobs of
// every state, newest first, whichever index holds them (running jobs are in none of the
// listing indexes of ended jobs since migration 0015).
func TestListFindsEveryState(t *testing.T) {
	s, _ := openStore(t, sqlite.Options{})
	ctx := context.Background()
	var all []string
	for i := range 12 {
		id := fmt.Sprintf("job%02d", i)
		args := fmt.Sprintf(`{"report":"r%d"}`, i%2)
		if _, _, err := s.Enqueue(ctx, store.NewJob{ID: id, Kind: "export", Args: []byte(args), CreatedBy: fmt.Sprintf("p%d", i%3)}); err != nil {
			t.Fatal(err)
		}
		all = append([]string{id}, all...)
	}
	for range 8 {
		claim(t, s, "w")
	}
	for _, id := range []string{"job00", "job03"} {
		j := get(t, s, id)
		if _, err := s.Succeed(ctx, id, j.Attempt, store.FileResult{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(ctx, "job10"); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]store.Job{}
	for _, id := range all {
		jobs[id] = get(t, s, id)
	}
	for _, st := range []store.Status{"", store.StatusPending, store.StatusProcessing, store.StatusSucceeded, store.StatusCanceled} {
		for _, report := range []string{"", "r1"} {
			for _, by := range []string{"", "p1"} {
				o := store.ListOptions{Kind: "export", Status: st, Report: report, CreatedBy: by}
				var want []string
				for _, id := range all {
					j := jobs[id]
					if (st == "" || j.Status == st) && (report == "" || strings.Contains(string(j.Args), report)) && (by == "" || j.CreatedBy == by) {
						want = append(want, id)
					}
				}
				js, err := s.List(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, j := range js {
					got = append(got, j.ID)
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("List(%+v) = %v, want %v", o, got, want)
				}
			}
		}
	}
}
