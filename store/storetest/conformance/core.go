package conformance

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"sheetq/store"
)

// The rules the core keeps above the drivers (store.Store): a driver never sees what
// they refuse, and gets what they complete. The suite states them through the store as
// callers meet it, so that a core that stopped keeping one, or a driver that undid one,
// fails here on every driver.

// runCore runs the cases of the core's rules, each on a store of its own from open.
func runCore(t *testing.T, open func(t *testing.T, o Options) Harness) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"EnqueueRefusesWhatNoDriverTakes", testEnqueueRefuses},
		{"EnqueueFillsTheDefaults", testEnqueueDefaults},
		{"RetryWithoutABudgetGetsTheDefault", testRetryDefaultBudget},
		{"ClaimNeedsAQueueAndALimit", testClaimNeeds},
		{"ListAndEventReadsHaveDefaultLimits", testDefaultLimits},
		{"SchedulesAreChecked", testSchedulesChecked},
		{"FiringFillsTheDefaults", testFiringDefaults},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t, Options{})) })
	}
	t.Run("FollowUpsAreCheckedAndCompleted", func(t *testing.T) { testFollowUpsChecked(t, open) })
}

// An Enqueue without an id, a kind or arguments, or with numbers an integer column of
// some database cannot hold, is refused, and nothing of it is written.
func testEnqueueRefuses(t *testing.T, h Harness) {
	for name, nj := range map[string]store.NewJob{
		"no id":               newJob(func(nj *store.NewJob) { nj.ID = "" }),
		"no kind":             newJob(func(nj *store.NewJob) { nj.Kind = "" }),
		"no args":             newJob(func(nj *store.NewJob) { nj.Args = nil }),
		"priority too large":  newJob(func(nj *store.NewJob) { nj.Priority = math.MaxInt32 + 1 }),
		"priority too small":  newJob(func(nj *store.NewJob) { nj.Priority = math.MinInt32 - 1 }),
		"budget out of range": newJob(maxAttempts(math.MaxInt32 + 1)),
	} {
		if j, _, err := h.Store.Enqueue(ctx, nj); err == nil {
			t.Errorf("%s: enqueued %s, want an error", name, j.ID)
		}
	}
	if js, err := h.Store.Unfinished(ctx); err != nil || len(js) != 0 {
		t.Fatalf("after refused enqueues: %d jobs, %v; want none", len(js), err)
	}
	if evs := allEvents(t, h, 100); len(evs) != 0 {
		t.Fatalf("after refused enqueues: %d events, want none", len(evs))
	}
}

// A job that names no budget and no queue gets DefaultMaxAttempts and DefaultQueue, as
// written, and is claimed from the default queue.
func testEnqueueDefaults(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(0), inQueue(""))
	if j.MaxAttempts != store.DefaultMaxAttempts || j.Queue != store.DefaultQueue {
		t.Fatalf("enqueued with budget %d, queue %q; want %d, %q", j.MaxAttempts, j.Queue, store.DefaultMaxAttempts, store.DefaultQueue)
	}
	if g := get(t, h, j.ID); g.MaxAttempts != store.DefaultMaxAttempts || g.Queue != store.DefaultQueue {
		t.Fatalf("stored with budget %d, queue %q; want %d, %q", g.MaxAttempts, g.Queue, store.DefaultMaxAttempts, store.DefaultQueue)
	}
	if c := claim(t, h); c.ID != j.ID {
		t.Fatalf("claimed %s from the default queue, want %s", c.ID, j.ID)
	}
	neg := enqueue(t, h, maxAttempts(-4))
	if neg.MaxAttempts != store.DefaultMaxAttempts {
		t.Fatalf("a budget of -4 stored as %d, want %d", neg.MaxAttempts, store.DefaultMaxAttempts)
	}
}

// Retry with a budget of zero or less gives DefaultMaxAttempts more attempts.
func testRetryDefaultBudget(t *testing.T, h Harness) {
	j := enqueue(t, h, maxAttempts(1))
	c := claim(t, h)
	if _, err := fail(h.Store, c.ID, c.Attempt, store.AttemptError{Code: "x", Message: "no", Permanent: true}, 0); err != nil {
		t.Fatal(err)
	}
	r, err := h.Store.Retry(ctx, j.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Attempt + store.DefaultMaxAttempts; r.MaxAttempts != want || r.Status != store.StatusPending {
		t.Fatalf("retried with budget 0: %s, max attempts %d; want PENDING, %d", r.Status, r.MaxAttempts, want)
	}
}

// A claim names its queue and takes at least one job.
func testClaimNeeds(t *testing.T, h Harness) {
	enqueue(t, h)
	if js, err := h.Store.ClaimBatch(ctx, "w1", "", 1); err == nil {
		t.Errorf("claim without a queue took %d jobs, want an error", len(js))
	}
	if js, err := h.Store.ClaimBatch(ctx, "w1", store.DefaultQueue, -1); err == nil {
		t.Errorf("claim with limit -1 took %d jobs, want an error", len(js))
	}
	if us, err := h.Store.Unfinished(ctx); err != nil || len(us) != 1 || us[0].Status != store.StatusPending {
		t.Fatalf("after refused claims: %v, %v; want the job still PENDING", us, err)
	}
}

// A read that names no limit gets the default one, never none: List 50, the event
// reads all there are up to 1000.
func testDefaultLimits(t *testing.T, h Harness) {
	const n = 55
	for range n {
		enqueue(t, h)
	}
	js, err := h.Store.List(ctx, store.ListOptions{})
	if err != nil || len(js) != 50 {
		t.Fatalf("List without a limit: %d jobs, %v; want 50", len(js), err)
	}
	if js, err := h.Store.List(ctx, store.ListOptions{Limit: 5000}); err != nil || len(js) != n {
		t.Fatalf("List with a limit of 5000: %d jobs, %v; want %d", len(js), err, n)
	}
	evs, _, err := h.Store.EventsSince(ctx, "", 0)
	if err != nil || len(evs) != n {
		t.Fatalf("EventsSince without a limit: %d events, %v; want %d", len(evs), err, n)
	}
	if evs, err := h.Store.EventsAfter(ctx, 0, 0); err != nil || len(evs) != n {
		t.Fatalf("EventsAfter without a limit: %d events, %v; want %d", len(evs), err, n)
	}
	first := js[len(js)-1].ID
	jevs, _, err := h.Store.JobEventsSince(ctx, first, "", 0)
	if err != nil || len(jevs) != 1 {
		t.Fatalf("JobEventsSince without a limit: %d events, %v; want 1", len(jevs), err)
	}
}

// A schedule without its id, report, parameters, cron or time zone is refused by every
// write, and an edit that would leave one out changes nothing.
func testSchedulesChecked(t *testing.T, h Harness) {
	sc := store.Schedule{ID: store.NewID(), Report: "orders", Params: json.RawMessage(`{}`), Format: "xlsx",
		Cron: "0 6 * * *", TimeZone: "UTC", NextRunAt: at(h, time.Hour)}
	for name, bad := range map[string]func(*store.Schedule){
		"no report":    func(s *store.Schedule) { s.Report = "" },
		"no params":    func(s *store.Schedule) { s.Params = nil },
		"no cron":      func(s *store.Schedule) { s.Cron = "" },
		"no time zone": func(s *store.Schedule) { s.TimeZone = "" },
	} {
		b := sc
		bad(&b)
		if _, err := h.Store.CreateSchedule(ctx, b); !errors.Is(err, store.ErrScheduleInvalid) {
			t.Errorf("create, %s: err %v, want ErrScheduleInvalid", name, err)
		}
	}
	if _, err := h.Store.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b := sc
	b.Cron = ""
	if _, err := h.Store.UpdateSchedule(ctx, b); !errors.Is(err, store.ErrScheduleInvalid) {
		t.Errorf("update without a cron: err %v, want ErrScheduleInvalid", err)
	}
	_, err := h.Store.EditSchedule(ctx, sc.ID, func(s store.Schedule) (store.Schedule, error) {
		s.Report = ""
		return s, nil
	})
	if !errors.Is(err, store.ErrScheduleInvalid) {
		t.Errorf("edit that drops the report: err %v, want ErrScheduleInvalid", err)
	}
	got, err := h.Store.GetSchedule(ctx, sc.ID)
	if err != nil || got.Report != "orders" || got.Cron != sc.Cron {
		t.Fatalf("after refused writes: %+v, %v; want the schedule as created", got, err)
	}
}

// A firing's export gets the defaults an Enqueue's does.
func testFiringDefaults(t *testing.T, h Harness) {
	due := at(h, -time.Minute)
	sc := store.Schedule{ID: store.NewID(), Report: "orders", Params: json.RawMessage(`{}`), Format: "xlsx",
		Cron: "0 6 * * *", TimeZone: "UTC", NextRunAt: due}
	if _, err := h.Store.CreateSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	nj := newJob(maxAttempts(0), inQueue(""), func(nj *store.NewJob) { nj.IdempotencyKey = store.FiringKey(sc.ID, due) })
	j, fired, err := h.Store.FireSchedule(ctx, store.Firing{ScheduleID: sc.ID, Due: due, ScheduledFor: due, Next: at(h, time.Hour), Job: nj})
	if err != nil || !fired {
		t.Fatalf("fire: fired %v, %v", fired, err)
	}
	if j.MaxAttempts != store.DefaultMaxAttempts || j.Queue != store.DefaultQueue {
		t.Fatalf("fired with budget %d, queue %q; want %d, %q", j.MaxAttempts, j.Queue, store.DefaultMaxAttempts, store.DefaultQueue)
	}
	bad := newJob(func(nj *store.NewJob) { nj.Kind = ""; nj.IdempotencyKey = store.FiringKey(sc.ID, at(h, time.Hour)) })
	if _, fired, err := h.Store.FireSchedule(ctx, store.Firing{ScheduleID: sc.ID, Due: at(h, time.Hour), ScheduledFor: at(h, time.Hour), Next: at(h, 2*time.Hour), Job: bad}); err == nil || fired {
		t.Fatalf("firing a job without a kind: fired %v, %v; want an error", fired, err)
	}
}

// The hook is asked only for the ends a follow-up hears of; what it gives is checked
// like an Enqueue (a follow-up without a kind makes the end fail and commit nothing)
// and completed with the defaults (budget, queue, no delay before now).
func testFollowUpsChecked(t *testing.T, open func(*testing.T, Options) Harness) {
	var give []store.FollowUp
	var asked []store.Status
	h := open(t, Options{FollowUps: func(j store.Job) ([]store.FollowUp, error) {
		asked = append(asked, j.Status)
		return give, nil
	}})
	// A requeue (PENDING again) and a cancel request are not ends.
	j := enqueue(t, h)
	c := claim(t, h)
	if _, err := requeue(h.Store, c.ID, c.Attempt, "shutdown"); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 {
		t.Fatalf("the hook was asked for a requeued job (%v)", asked)
	}
	c = claim(t, h)

	give = []store.FollowUp{{ID: store.NewID(), Args: json.RawMessage(`{}`)}} // no kind
	if _, err := succeed(h.Store, c.ID, c.Attempt, file, nil); err == nil {
		t.Fatal("an end whose follow-up has no kind succeeded, want an error")
	}
	if g := get(t, h, j.ID); g.Status != store.StatusProcessing {
		t.Fatalf("after a refused follow-up the job is %s, want PROCESSING (nothing committed)", g.Status)
	}
	id := store.NewID()
	give = []store.FollowUp{{ID: id, Kind: "notify", Args: json.RawMessage(`{}`), RunIn: -time.Hour}}
	if _, err := succeed(h.Store, c.ID, c.Attempt, file, nil); err != nil {
		t.Fatal(err)
	}
	f := get(t, h, id)
	if f.MaxAttempts != store.DefaultMaxAttempts || f.Queue != store.DefaultQueue || f.ParentID != j.ID {
		t.Fatalf("follow-up with budget %d, queue %q, parent %q; want %d, %q, %s", f.MaxAttempts, f.Queue, f.ParentID, store.DefaultMaxAttempts, store.DefaultQueue, j.ID)
	}
	if f.RunAt.Before(h.Now().Truncate(time.Millisecond)) {
		t.Fatalf("a follow-up with a negative delay runs at %v, before now %v", f.RunAt, h.Now())
	}
}
