package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// failed returns a job that ran attempt 1 of max 1 and FAILED permanently.
func failed(t *testing.T, st *store.Store, clk *clock) store.Job {
	t.Helper()
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{MaxAttempts: 1})
	c, err := st.Claim(ctx, "w", store.DefaultQueue)
	if err != nil || c.ID != j.ID {
		t.Fatalf("claim: %v (got %q, want %q)", err, c.ID, j.ID)
	}
	if _, err := st.Heartbeat(ctx, j.ID, 1, 40, 100); err != nil {
		t.Fatal(err)
	}
	f, err := st.Fail(ctx, j.ID, 1, store.AttemptError{Code: "bad", Message: "boom", Permanent: true}, 0)
	if err != nil || f.Status != store.StatusFailed {
		t.Fatalf("fail: %v, status %s", err, f.Status)
	}
	return f
}

// succeeded returns a job whose first attempt SUCCEEDED with a file.
func succeeded(t *testing.T, st *store.Store) store.Job {
	t.Helper()
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{})
	if c := claim(t, st, "w"); c.ID != j.ID {
		t.Fatalf("claimed %s, want %s", c.ID, j.ID)
	}
	s, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: j.ID + ".xlsx", Size: 10, SHA256: "abc", Rows: 3,
		Warnings: []string{"cut"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// staleCalls are every fenced update an execution of attempt can make.
func staleCalls(st *store.Store, id string, attempt int, published *bool) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"heartbeat": func() error { _, err := st.Heartbeat(ctx, id, attempt, 1, 1); return err },
		"succeed": func() error {
			_, err := st.Succeed(ctx, id, attempt, store.FileResult{Name: "x"}, func() error { *published = true; return nil })
			return err
		},
		"fail":               func() error { _, err := st.Fail(ctx, id, attempt, store.AttemptError{Code: "x"}, 0); return err },
		"finish canceled":    func() error { _, err := st.FinishCanceled(ctx, id, attempt); return err },
		"requeue":            func() error { _, err := st.Requeue(ctx, id, attempt, "shutdown"); return err },
		"recover":            func() error { _, err := st.Recover(ctx, id, attempt, "x", 0); return err },
		"complete from file": func() error { _, err := st.CompleteFromFile(ctx, id, attempt, store.FileResult{Name: "x"}); return err },
	}
}

// TestRetryKeepsAttemptMonotonic: a retried job gets a fresh budget on top of the attempts
// it spent, keeps its history, and the old attempt stays fenced out.
func TestRetryKeepsAttemptMonotonic(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	j := failed(t, st, clk)
	before := events(t, st, j.ID)

	clk.Advance(time.Minute)
	r, err := st.Retry(ctx, j.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := j
	want.Status, want.RunAt, want.Attempt, want.MaxAttempts, want.AttemptBase = store.StatusPending, clk.Now(), 1, 3, 1
	want.Worker, want.StartedAt, want.HeartbeatAt, want.FinishedAt = "", time.Time{}, time.Time{}, time.Time{}
	want.ProgressRows, want.ProgressTotal, want.ErrorCode, want.ErrorMessage = 0, -1, "", ""
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("retried job:\n%+v\nwant\n%+v", r, want)
	}
	if got := get(t, st, j.ID); !reflect.DeepEqual(got, r) {
		t.Fatalf("stored job differs from the returned one:\n%+v\n%+v", got, r)
	}

	evs := events(t, st, j.ID)
	if !reflect.DeepEqual(evs[:len(before)], before) {
		t.Fatalf("history changed by retry: %+v", summarize(evs))
	}
	if got := summarize(evs[len(before):]); !reflect.DeepEqual(got, []evSummary{{store.EventRetried, store.StatusPending, 1}}) {
		t.Fatalf("events added by retry = %+v", got)
	}
	if d := eventData(t, evs[len(evs)-1]); d["from"] != "FAILED" || d["max_attempts"] != 3.0 {
		t.Fatalf("retried event data = %v", d)
	}

	// The attempt that failed must not touch the job again, before or after the re-claim.
	published := false
	for name, call := range staleCalls(st, j.ID, 1, &published) {
		if err := call(); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("%s by attempt 1 while PENDING again: err = %v, want ErrLeaseLost", name, err)
		}
	}
	if c := claim(t, st, "w2"); c.ID != j.ID || c.Attempt != 2 {
		t.Fatalf("claim after retry: job %s attempt %d, want %s attempt 2", c.ID, c.Attempt, j.ID)
	}
	running := get(t, st, j.ID)
	runningEv := events(t, st, j.ID)
	for name, call := range staleCalls(st, j.ID, 1, &published) {
		if err := call(); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("%s by attempt 1 while attempt 2 runs: err = %v, want ErrLeaseLost", name, err)
		}
	}
	if published {
		t.Error("a fenced-out attempt published")
	}
	if got := get(t, st, j.ID); !reflect.DeepEqual(got, running) {
		t.Errorf("row changed by a fenced-out attempt:\n%+v\nwas\n%+v", got, running)
	}
	if got := events(t, st, j.ID); !reflect.DeepEqual(got, runningEv) {
		t.Errorf("events added by a fenced-out attempt: %+v", summarize(got[len(runningEv):]))
	}

	// The fresh budget is two attempts: 2 retries, 3 is the last.
	if f, err := st.Fail(ctx, j.ID, 2, store.AttemptError{Code: "x"}, 0); err != nil || f.Status != store.StatusPending {
		t.Fatalf("attempt 2 failed: %v, status %s, want PENDING", err, f.Status)
	}
	claim(t, st, "w2")
	if f, err := st.Fail(ctx, j.ID, 3, store.AttemptError{Code: "x"}, 0); err != nil || f.Status != store.StatusFailed {
		t.Fatalf("attempt 3 failed: %v, status %s, want FAILED", err, f.Status)
	}
}

// TestRetryCanceled: a canceled job runs again with its cancel request cleared; a budget
// of zero is the default.
func TestRetryCanceled(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{MaxAttempts: 5})
	claim(t, st, "w")
	if _, err := st.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if c, err := st.FinishCanceled(ctx, j.ID, 1); err != nil || c.Status != store.StatusCanceled || !c.CancelRequested {
		t.Fatalf("finish canceled: %v, %+v", err, c)
	}
	r, err := st.Retry(ctx, j.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.StatusPending || r.CancelRequested || !r.FinishedAt.IsZero() || r.Attempt != 1 ||
		r.MaxAttempts != 1+store.DefaultMaxAttempts {
		t.Fatalf("retried canceled job = %+v", r)
	}
	// No longer cancel-requested: its next run is not canceled at its first heartbeat.
	claim(t, st, "w")
	if cancel, err := st.Heartbeat(ctx, j.ID, 2, 0, -1); err != nil || cancel {
		t.Fatalf("heartbeat of the rerun: cancel %v, err %v", cancel, err)
	}

	// Canceled while PENDING (never ran): attempt 0, budget on top of it.
	p := enqueue(t, st, store.NewJob{})
	if _, err := st.Cancel(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Retry(ctx, p.ID, 4); err != nil || r.Attempt != 0 || r.MaxAttempts != 4 {
		t.Fatalf("retry of a job canceled while pending: %v, attempt %d, max %d", err, r.Attempt, r.MaxAttempts)
	}
}

// TestRetryRefusals: only FAILED and CANCELED jobs are retried; the rest are left alone.
func TestRetryRefusals(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	// In this order: succeeded claims the oldest PENDING job.
	done := succeeded(t, st)
	expired := succeeded(t, st)
	if _, err := st.Expire(ctx, expired.ID); err != nil {
		t.Fatal(err)
	}
	running := enqueue(t, st, store.NewJob{})
	claim(t, st, "w")
	pending := enqueue(t, st, store.NewJob{})

	for _, id := range []string{pending.ID, running.ID, done.ID, expired.ID} {
		before := get(t, st, id)
		beforeEv := events(t, st, id)
		j, err := st.Retry(ctx, id, 3)
		if !errors.Is(err, store.ErrNotRetryable) {
			t.Errorf("retry of a %s job: err = %v, want ErrNotRetryable", before.Status, err)
			continue
		}
		if !reflect.DeepEqual(j, before) {
			t.Errorf("retry refusal returned %+v, want the job as it is %+v", j, before)
		}
		if after := get(t, st, id); !reflect.DeepEqual(after, before) {
			t.Errorf("refused retry changed a %s job", before.Status)
		}
		if len(events(t, st, id)) != len(beforeEv) {
			t.Errorf("refused retry of a %s job added an event", before.Status)
		}
	}
	if _, err := st.Retry(ctx, "nosuch", 3); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retry of an unknown job: err = %v, want ErrNotFound", err)
	}
}

// TestRetryConcurrent: of many simultaneous retries of one job, exactly one wins.
func TestRetryConcurrent(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	j := failed(t, st, clk)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = st.Retry(context.Background(), j.ID, 3) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrNotRetryable):
			t.Errorf("retry %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d retries won, want 1", won)
	}
	retried := 0
	for _, e := range events(t, st, j.ID) {
		if e.Type == store.EventRetried {
			retried++
		}
	}
	if retried != 1 {
		t.Fatalf("%d retried events, want 1", retried)
	}
}

// TestDelete: a finished job goes with its events and frees its idempotency key; an
// unfinished one stays.
func TestDelete(t *testing.T) {
	clk := newClock()
	st, path := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()

	done := succeeded(t, st)
	expired := succeeded(t, st)
	if _, err := st.Expire(ctx, expired.ID); err != nil {
		t.Fatal(err)
	}
	fail := failed(t, st, clk)
	canceled := enqueue(t, st, store.NewJob{IdempotencyKey: "k1", RequestHash: "h1"})
	if _, err := st.Cancel(ctx, canceled.ID); err != nil {
		t.Fatal(err)
	}
	var lastEvent int64
	for _, j := range []store.Job{done, expired, fail, canceled} {
		evs := events(t, st, j.ID)
		lastEvent = max(lastEvent, evs[len(evs)-1].ID)
		before := get(t, st, j.ID)
		got, err := st.Delete(ctx, j.ID)
		if err != nil {
			t.Fatalf("delete %s job: %v", before.Status, err)
		}
		if !reflect.DeepEqual(got, before) {
			t.Errorf("delete returned %+v, want the job as it was %+v", got, before)
		}
		if _, err := st.Get(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get of a deleted %s job: err = %v", before.Status, err)
		}
		if evs := events(t, st, j.ID); len(evs) != 0 {
			t.Errorf("deleted %s job kept %d events", before.Status, len(evs))
		}
		if _, err := st.Delete(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second delete: err = %v, want ErrNotFound", err)
		}
	}
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM job_events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("job_events rows left: %d (%v)", n, err)
	}

	// The key is free again, and event ids are never reused (SSE Last-Event-ID relies on it).
	again, existed, err := st.Enqueue(ctx, store.NewJob{ID: nextID(), Kind: "test", Args: json.RawMessage(`{}`),
		IdempotencyKey: "k1", RequestHash: "h2"})
	if err != nil || existed {
		t.Fatalf("enqueue with the deleted job's key: existed %v, err %v", existed, err)
	}
	if evs := events(t, st, again.ID); evs[0].ID <= lastEvent {
		t.Errorf("new event id %d reuses a deleted one (last was %d)", evs[0].ID, lastEvent)
	}

	// Unfinished jobs stay, unchanged.
	running := again
	claim(t, st, "w")
	pending := enqueue(t, st, store.NewJob{})
	for _, j := range []store.Job{running, pending} {
		before := get(t, st, j.ID)
		beforeEv := events(t, st, j.ID)
		got, err := st.Delete(ctx, j.ID)
		if !errors.Is(err, store.ErrNotFinished) {
			t.Errorf("delete of a %s job: err = %v, want ErrNotFinished", before.Status, err)
		}
		if got.ID != j.ID || got.Status != before.Status {
			t.Errorf("refused delete returned %+v", got)
		}
		if after := get(t, st, j.ID); !reflect.DeepEqual(after, before) || len(events(t, st, j.ID)) != len(beforeEv) {
			t.Errorf("refused delete changed the %s job", before.Status)
		}
	}
	if _, err := st.Delete(ctx, "nosuch"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete of an unknown job: err = %v, want ErrNotFound", err)
	}
}

// TestExpire: only a SUCCEEDED job expires; it keeps its file record.
func TestExpire(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()
	j := succeeded(t, st)
	clk.Advance(time.Hour)
	e, err := st.Expire(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := j
	want.Status = store.StatusExpired
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("expired job:\n%+v\nwant\n%+v", e, want)
	}
	evs := summarize(events(t, st, j.ID))
	if last := evs[len(evs)-1]; last != (evSummary{store.EventExpired, store.StatusExpired, 1}) {
		t.Fatalf("last event = %+v", last)
	}
	if got, err := st.Expire(ctx, j.ID); !errors.Is(err, store.ErrNotSucceeded) || got.Status != store.StatusExpired {
		t.Fatalf("second expire: %v, status %s; want ErrNotSucceeded", err, got.Status)
	}

	fail := failed(t, st, clk) // before the PENDING one, which it would claim
	for _, other := range []store.Job{fail, enqueue(t, st, store.NewJob{})} {
		before := get(t, st, other.ID)
		if _, err := st.Expire(ctx, other.ID); !errors.Is(err, store.ErrNotSucceeded) {
			t.Errorf("expire of a %s job: err = %v, want ErrNotSucceeded", before.Status, err)
		}
		if after := get(t, st, other.ID); !reflect.DeepEqual(after, before) {
			t.Errorf("refused expire changed the %s job", before.Status)
		}
	}
	if _, err := st.Expire(ctx, "nosuch"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expire of an unknown job: err = %v, want ErrNotFound", err)
	}
}
