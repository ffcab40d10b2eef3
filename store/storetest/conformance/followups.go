package conformance

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// Options is what a case asks of the store it opens.
type Options struct {
	// FollowUps is the follow-up hook the store must be made with (sqlite.Options.FollowUps
	// for SQLite); nil: none.
	FollowUps store.FollowUpFunc
}

// followUpHook is a hook that gives each job with a NotifyURL one follow-up, of kind
// "notify", and records what it was called with. fail makes it return an error.
type followUpHook struct {
	mu      sync.Mutex
	called  []store.Job
	made    map[string]string // parent id -> follow-up id
	fail    bool
	failFor string // the one job whose follow-ups the hook refuses; "": none
	queue   string // the follow-ups' queue; "": the default
}

func newFollowUpHook() *followUpHook { return &followUpHook{made: map[string]string{}} }

func (f *followUpHook) fn(j store.Job) ([]store.FollowUp, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.called = append(f.called, j)
	if f.fail || f.failFor == j.ID {
		return nil, errors.New("hook refuses")
	}
	if j.NotifyURL == "" {
		return nil, nil
	}
	id := store.NewID()
	f.made[j.ID] = id
	return []store.FollowUp{{ID: id, Kind: "notify", Args: json.RawMessage(`{"for":"` + j.ID + `"}`),
		Priority: -1, Queue: f.queue, MaxAttempts: 8, RunIn: time.Minute,
		AcceptedData: json.RawMessage(`{"parent":"` + j.ID + `"}`),
		ParentEvent:  "notify_queued", ParentData: json.RawMessage(`{"job":"` + id + `"}`)}}, nil
}

func (f *followUpHook) of(parent string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.made[parent]
}

func (f *followUpHook) setFail(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = v
}

func notifying(nj *store.NewJob) { nj.NotifyURL = "https://example.com/hook" }

// Rule 19: every way a job becomes SUCCEEDED, FAILED or CANCELED calls the hook with the
// job as committed, and inserts its follow-up in that transaction: PENDING, with its
// kind, args, priority, budget and delay, linked to its parent, with its "accepted"
// event, and the parent's event right after the parent's final one.
func testFollowUpsOfEveryFinalState(t *testing.T, open func(*testing.T, Options) Harness) {
	cases := []struct {
		name   string
		max    int
		end    func(t *testing.T, h Harness, id string) (store.Job, error) // from PROCESSING, attempt 1
		status store.Status
		event  string
	}{
		{"Succeed", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			return succeed(h.Store, id, 1, file, nil)
		}, store.StatusSucceeded, store.EventSucceeded},
		{"CompleteFromFile", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			return h.Store.CompleteFromFile(ctx, id, 1, file)
		}, store.StatusSucceeded, store.EventCompletedFromFile},
		{"FailPermanent", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			return fail(h.Store, id, 1, store.AttemptError{Code: "x", Message: "x", Permanent: true}, 0)
		}, store.StatusFailed, store.EventFailed},
		{"FailLastAttempt", 1, func(t *testing.T, h Harness, id string) (store.Job, error) {
			return fail(h.Store, id, 1, store.AttemptError{Code: "x", Message: "x"}, 0)
		}, store.StatusFailed, store.EventFailed},
		{"RecoverLastAttempt", 1, func(t *testing.T, h Harness, id string) (store.Job, error) {
			return h.Store.Recover(ctx, id, 1, "lost", 0)
		}, store.StatusFailed, store.EventFailed},
		{"FinishCanceled", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			if _, err := h.Store.Cancel(ctx, id); err != nil {
				return store.Job{}, err
			}
			return finishCanceled(h.Store, id, 1)
		}, store.StatusCanceled, store.EventCanceled},
		{"FailAfterCancel", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			if _, err := h.Store.Cancel(ctx, id); err != nil {
				return store.Job{}, err
			}
			return fail(h.Store, id, 1, store.AttemptError{Code: "x", Message: "x"}, 0)
		}, store.StatusCanceled, store.EventCanceled},
		{"RecoverAfterCancel", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			if _, err := h.Store.Cancel(ctx, id); err != nil {
				return store.Job{}, err
			}
			return h.Store.Recover(ctx, id, 1, "lost", 0)
		}, store.StatusCanceled, store.EventCanceled},
		{"RequeueAfterCancel", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			if _, err := h.Store.Cancel(ctx, id); err != nil {
				return store.Job{}, err
			}
			return requeue(h.Store, id, 1, "shutdown")
		}, store.StatusCanceled, store.EventCanceled},
		{"CancelPending", 3, func(t *testing.T, h Harness, id string) (store.Job, error) {
			if _, err := requeue(h.Store, id, 1, "shutdown"); err != nil {
				return store.Job{}, err
			}
			return h.Store.Cancel(ctx, id)
		}, store.StatusCanceled, store.EventCanceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hook := newFollowUpHook()
			h := open(t, Options{FollowUps: hook.fn})
			quiet := enqueue(t, h, maxAttempts(c.max))
			claim(t, h)
			if _, err := c.end(t, h, quiet.ID); err != nil {
				t.Fatal(err)
			}
			if len(hook.made) != 0 || len(hook.called) != 1 || hook.called[0].Status != c.status {
				t.Fatalf("a job without a notify URL: hook called with %+v, made %v", hook.called, hook.made)
			}

			j := enqueue(t, h, maxAttempts(c.max), notifying)
			claim(t, h)
			h.Advance(time.Second)
			end, err := c.end(t, h, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if end.Status != c.status || hook.called[len(hook.called)-1].Status != c.status ||
				hook.called[len(hook.called)-1].NotifyURL != "https://example.com/hook" {
				t.Fatalf("ended %s; hook saw %+v", end.Status, hook.called[len(hook.called)-1])
			}
			fid := hook.of(j.ID)
			f := get(t, h, fid)
			if f.Status != store.StatusPending || f.Kind != "notify" || string(f.Args) != `{"for":"`+j.ID+`"}` ||
				f.Priority != -1 || f.MaxAttempts != 8 || f.Attempt != 0 || f.ParentID != j.ID || f.NotifyURL != "" ||
				!f.RunAt.Equal(h.Now().Add(time.Minute).Truncate(time.Millisecond)) {
				t.Fatalf("follow-up = %+v", f)
			}
			fe := events(t, h, fid)
			if len(fe) != 1 || fe[0].Type != store.EventAccepted || string(fe[0].Data) != `{"parent":"`+j.ID+`"}` {
				t.Fatalf("follow-up events = %+v", fe)
			}
			pe := events(t, h, j.ID)
			last := pe[len(pe)-1]
			if got := types(pe[len(pe)-2:]); got[0] != c.event || got[1] != "notify_queued" ||
				last.Status != c.status || string(last.Data) != `{"job":"`+fid+`"}` {
				t.Fatalf("parent's events = %v, last %+v", types(pe), last)
			}
		})
	}
}

// Rule 19: a transition that does not make a job final (a retry, a recovery, a
// requeue, a cancel request, an expiry, a retry on request) creates no follow-up, and
// a follow-up ending creates none in turn unless the hook says so.
func testNoFollowUpsWithoutAnEnd(t *testing.T, open func(*testing.T, Options) Harness) {
	hook := newFollowUpHook()
	h := open(t, Options{FollowUps: hook.fn})
	j := enqueue(t, h, maxAttempts(5), notifying)
	claim(t, h)
	if _, err := fail(h.Store, j.ID, 1, store.AttemptError{Code: "x", Message: "x"}, 0); err != nil {
		t.Fatal(err)
	}
	claim(t, h)
	if _, err := h.Store.Recover(ctx, j.ID, 2, "lost", 0); err != nil {
		t.Fatal(err)
	}
	claim(t, h)
	if _, err := requeue(h.Store, j.ID, 3, "shutdown"); err != nil {
		t.Fatal(err)
	}
	claim(t, h)
	if _, err := h.Store.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if len(hook.called) != 0 {
		t.Fatalf("hook called for a job that did not end: %+v", hook.called)
	}
	if _, err := finishCanceled(h.Store, j.ID, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.Retry(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	claim(t, h)
	if _, err := succeed(h.Store, j.ID, 4, file, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.Expire(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if len(hook.called) != 2 {
		t.Fatalf("hook called %d times, want once for CANCELED and once for SUCCEEDED", len(hook.called))
	}
	// The two follow-ups end in turn; the hook, called for them, makes none.
	h.Advance(time.Minute) // their delay
	for range 2 {
		f := claim(t, h)
		if f.Kind != "notify" {
			t.Fatalf("claimed %s (%s), want a follow-up (priority -1) first", f.ID, f.Kind)
		}
		if _, err := succeed(h.Store, f.ID, 1, store.FileResult{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	noClaim(t, h)
}

// Rule 19: the follow-up is part of the final transaction: when the hook fails, the job
// does not become final either, and nothing of the attempt's end is committed.
func testFollowUpsAreAtomic(t *testing.T, open func(*testing.T, Options) Harness) {
	hook := newFollowUpHook()
	h := open(t, Options{FollowUps: hook.fn})
	j := enqueue(t, h, notifying)
	claim(t, h)
	hook.setFail(true)
	published := false
	if _, err := succeed(h.Store, j.ID, 1, file, func() error { published = true; return nil }); err == nil {
		t.Fatal("Succeed committed although its follow-up hook failed")
	}
	if _, err := fail(h.Store, j.ID, 1, store.AttemptError{Code: "x", Message: "x", Permanent: true}, 0); err == nil {
		t.Fatal("Fail committed although its follow-up hook failed")
	}
	if got := get(t, h, j.ID); got.Status != store.StatusProcessing || !published {
		t.Fatalf("after the failed ends: %s (published %v), want PROCESSING", got.Status, published)
	}
	wantEvents(t, h, j.ID, store.EventAccepted, store.EventStarted)
	hook.setFail(false)
	if _, err := succeed(h.Store, j.ID, 1, file, nil); err != nil {
		t.Fatal(err)
	}
	if f := get(t, h, hook.of(j.ID)); f.ParentID != j.ID {
		t.Fatalf("follow-up after the retried end: %+v", f)
	}
}

// Rule 21: deleting a job stops its follow-ups in the same transaction: a waiting one
// (first attempt or a retry) goes with its events, a running one gets cancel_requested,
// a finished one stays as a record; another job's follow-up is left alone.
func testDeleteStopsFollowUps(t *testing.T, open func(*testing.T, Options) Harness) {
	hook := newFollowUpHook()
	h := open(t, Options{FollowUps: hook.fn})
	const waiting, retrying, running, finished, kept = 0, 1, 2, 3, 4
	var parents []store.Job
	for range 5 {
		p := enqueue(t, h, notifying)
		claim(t, h)
		if _, err := succeed(h.Store, p.ID, 1, file, nil); err != nil {
			t.Fatal(err)
		}
		parents = append(parents, p)
	}
	h.Advance(time.Minute) // the follow-ups' delay
	fu := func(i int) string { return hook.of(parents[i].ID) }
	var claimed []store.Job
	for range parents {
		claimed = append(claimed, claim(t, h))
	}
	for _, f := range claimed {
		var err error
		switch f.ID {
		case fu(waiting), fu(kept):
			_, err = requeue(h.Store, f.ID, 1, "shutdown")
		case fu(retrying):
			_, err = fail(h.Store, f.ID, 1, store.AttemptError{Code: "x", Message: "x"}, time.Hour)
		case fu(finished):
			_, err = succeed(h.Store, f.ID, 1, store.FileResult{}, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range parents {
		if i == kept {
			continue
		}
		if _, err := h.Store.Delete(ctx, p.ID); err != nil {
			t.Fatalf("delete %s: %v", p.ID, err)
		}
	}
	for _, i := range []int{waiting, retrying} {
		if _, err := h.Store.Get(ctx, fu(i)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("waiting follow-up of a deleted job: %v, want ErrNotFound", err)
		}
		if n := len(events(t, h, fu(i))); n != 0 {
			t.Errorf("deleted follow-up kept %d events", n)
		}
	}
	if f := get(t, h, fu(finished)); f.Status != store.StatusSucceeded {
		t.Errorf("finished follow-up is %s, want it kept SUCCEEDED", f.Status)
	}
	if f := get(t, h, fu(kept)); f.Status != store.StatusPending || f.CancelRequested {
		t.Errorf("follow-up of a job not deleted: %s, cancel requested %v", f.Status, f.CancelRequested)
	}
	f := get(t, h, fu(running))
	if f.Status != store.StatusProcessing || !f.CancelRequested {
		t.Fatalf("running follow-up: %s, cancel requested %v; want PROCESSING with cancel requested", f.Status, f.CancelRequested)
	}
	if ev := events(t, h, f.ID); ev[len(ev)-1].Type != store.EventCancelRequested {
		t.Fatalf("running follow-up's events: %v", types(ev))
	}
	end, err := fail(h.Store, f.ID, 1, store.AttemptError{Code: "x", Message: "x"}, time.Hour)
	if err != nil || end.Status != store.StatusCanceled {
		t.Fatalf("running follow-up after a failed attempt: %s, %v; want CANCELED", end.Status, err)
	}
}

// Rule 27: a follow-up runs in the queue its hook names ("": store.DefaultQueue), and
// only a claim for that queue takes it.
func testFollowUpsKeepTheirQueue(t *testing.T, open func(*testing.T, Options) Harness) {
	hook := newFollowUpHook()
	hook.queue = "notices"
	h := open(t, Options{FollowUps: hook.fn})
	j := enqueue(t, h, notifying)
	claimID(t, h, j.ID)
	if _, err := succeed(h.Store, j.ID, 1, file, nil); err != nil {
		t.Fatal(err)
	}
	f := get(t, h, hook.of(j.ID))
	if f.Queue != "notices" {
		t.Fatalf("follow-up queue = %q, want notices", f.Queue)
	}
	h.Advance(time.Hour)
	noClaim(t, h)
	if in, err := h.Store.NextRunIn(ctx, store.DefaultQueue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("NextRunIn(exports) = %v, %v; the follow-up is not the exports lane's", in, err)
	}
	if c, err := claimOne(h.Store, "w1", "notices"); err != nil || c.ID != f.ID {
		t.Fatalf("claim from notices = %s, %v; want the follow-up %s", c.ID, err, f.ID)
	}

	// A hook that names no queue puts its follow-ups in the default one.
	hook = newFollowUpHook()
	h = open(t, Options{FollowUps: hook.fn})
	j = enqueue(t, h, notifying)
	claimID(t, h, j.ID)
	if _, err := succeed(h.Store, j.ID, 1, file, nil); err != nil {
		t.Fatal(err)
	}
	if q := get(t, h, hook.of(j.ID)).Queue; q != store.DefaultQueue {
		t.Fatalf("follow-up of a hook without a queue: queue %q, want %q", q, store.DefaultQueue)
	}
}

// Rule 28 with rule 19: in one batch of ends, a job whose follow-up hook fails is rolled
// back alone (no end, no follow-up, no event); the others commit with their follow-ups.
func testFollowUpsInABatch(t *testing.T, open func(*testing.T, Options) Harness) {
	hook := newFollowUpHook()
	h := open(t, Options{FollowUps: hook.fn})
	a, b := enqueue(t, h, notifying), enqueue(t, h, notifying)
	got, err := h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim batch = %d jobs, %v", len(got), err)
	}
	hook.mu.Lock()
	hook.failFor = a.ID
	hook.mu.Unlock()
	res := h.Store.FinishBatch(ctx, []store.Finish{
		{ID: a.ID, Attempt: 1, Outcome: store.Succeeded, Result: file},
		{ID: b.ID, Attempt: 1, Outcome: store.Failed, Error: store.AttemptError{Code: "x", Message: "x", Permanent: true}},
	})
	if res[0].Err == nil || res[1].Err != nil {
		t.Fatalf("ends = %v, %v; want the hook's error, then nil", res[0].Err, res[1].Err)
	}
	if j := get(t, h, a.ID); j.Status != store.StatusProcessing {
		t.Fatalf("%s is %s after its hook failed, want PROCESSING", a.ID, j.Status)
	}
	wantEvents(t, h, a.ID, store.EventAccepted, store.EventStarted)
	if j := get(t, h, b.ID); j.Status != store.StatusFailed {
		t.Fatalf("%s is %s, want FAILED", b.ID, j.Status)
	}
	if f := get(t, h, hook.of(b.ID)); f.ParentID != b.ID || f.Status != store.StatusPending {
		t.Fatalf("follow-up of the committed end: %+v", f)
	}
	wantEvents(t, h, b.ID, store.EventAccepted, store.EventStarted, store.EventFailed, "notify_queued")
}
