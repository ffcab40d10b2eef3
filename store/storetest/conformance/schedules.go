package conformance

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// RunSchedules runs the schedules cases, each on a store of its own from open.
func RunSchedules(t *testing.T, open func(t *testing.T, o Options) Harness) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, h Harness, st *store.Store)
	}{
		{"ScheduleRoundTrip", testScheduleRoundTrip},
		{"SchedulesDueByTheStoreClock", testSchedulesDue},
		{"FiringHappensOnceAcrossNodes", testFiringOnce},
		{"FiringYieldsToAnEdit", testFiringYieldsToAnEdit},
		{"FiringOfATimeFiredBefore", testFiringFiredBefore},
		{"FiringsListedByTheirKeys", testScheduleFirings},
		{"IDWithANULMatchesNothing", testScheduleIDWithANUL},
		{"EditsDoNotLoseEachOther", testEditsDoNotLoseEachOther},
		{"EditRefusedChangesNothing", testEditRefused},
		{"MoveComparesAndSets", testMoveSchedule},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := open(t, Options{})
			c.fn(t, h, h.Store)
		})
	}
}

// at is the store's clock plus d, at a whole second, so every store keeps it exactly.
func at(h Harness, d time.Duration) time.Time {
	return h.Now().Truncate(time.Second).Add(d).UTC()
}

func newSchedule(h Harness, mods ...func(*store.Schedule)) store.Schedule {
	sc := store.Schedule{ID: store.NewID(), Report: "orders",
		Params: json.RawMessage(`{"from":"month_start(-1)","to":"month_start(0)"}`),
		Cron:   "0 6 1 * *", TimeZone: "Europe/Berlin", Owner: "ci",
		Deliver:   json.RawMessage(`[{"email":"a@example.com"}]`),
		NextRunAt: at(h, time.Hour)}
	for _, m := range mods {
		m(&sc)
	}
	return sc
}

func createSchedule(t *testing.T, st *store.Store, sc store.Schedule) store.Schedule {
	t.Helper()
	got, err := st.CreateSchedule(ctx, sc)
	if err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	return got
}

func firing(sc store.Schedule, next time.Time) store.Firing {
	key := store.FiringKey(sc.ID, sc.NextRunAt)
	return store.Firing{ScheduleID: sc.ID, Due: sc.NextRunAt, ScheduledFor: sc.NextRunAt, Next: next,
		Job: newJob(func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = key, "h" })}
}

// What is created reads back field for field, in lists and after an edit; an id that
// exists is a conflict, and an unknown one is not found.
func testScheduleRoundTrip(t *testing.T, h Harness, st *store.Store) {
	sc := newSchedule(h, func(sc *store.Schedule) { sc.Format, sc.BOM = "csv", true })
	got := createSchedule(t, st, sc)
	want := sc
	want.CreatedAt, want.UpdatedAt = got.CreatedAt, got.UpdatedAt
	if !reflect.DeepEqual(got, want) || got.CreatedAt.IsZero() || !got.CreatedAt.Equal(got.UpdatedAt) {
		t.Fatalf("created\n%+v\nwant\n%+v", got, want)
	}
	if back, err := st.GetSchedule(ctx, sc.ID); err != nil || !reflect.DeepEqual(back, got) {
		t.Fatalf("get = %+v, %v; want %+v", back, err, got)
	}
	if _, err := st.CreateSchedule(ctx, sc); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create with an id that exists: %v, want ErrConflict", err)
	}
	// Defaults: xlsx, no deliveries, no owner. Created a second later: the list is
	// oldest first, and two ids made within one millisecond are in no set order.
	h.Advance(time.Second)
	bare := createSchedule(t, st, newSchedule(h, func(sc *store.Schedule) { sc.Deliver, sc.Owner = nil, "" }))
	if bare.Format != "xlsx" || bare.Deliver != nil || bare.Owner != "" {
		t.Fatalf("defaults: %+v", bare)
	}
	if list, err := st.ListSchedules(ctx); err != nil || len(list) != 2 || list[0].ID != sc.ID || list[1].ID != bare.ID {
		t.Fatalf("list = %+v, %v", list, err)
	}

	h.Advance(time.Minute)
	edit := got
	edit.Cron, edit.Params, edit.Paused, edit.Owner = "30 7 * * MON", json.RawMessage(`{"from":"today(-7)"}`), true, "someone else"
	upd, err := st.UpdateSchedule(ctx, edit)
	if err != nil {
		t.Fatal(err)
	}
	if upd.Cron != "30 7 * * MON" || string(upd.Params) != `{"from":"today(-7)"}` || !upd.Paused ||
		!upd.NextRunAt.IsZero() || upd.Owner != "ci" || !upd.CreatedAt.Equal(got.CreatedAt) || !upd.UpdatedAt.After(got.UpdatedAt) {
		t.Fatalf("updated = %+v: want the edit, no next run while paused, owner and creation kept", upd)
	}
	if _, err := st.UpdateSchedule(ctx, newSchedule(h)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := st.CreateSchedule(ctx, store.Schedule{ID: store.NewID()}); !errors.Is(err, store.ErrScheduleInvalid) {
		t.Fatalf("create without fields: %v", err)
	}
	if err := st.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSchedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := st.DeleteSchedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
}

// Due means not paused and NextRunAt reached by the store's clock, most overdue first.
func testSchedulesDue(t *testing.T, h Harness, st *store.Store) {
	later := createSchedule(t, st, newSchedule(h, func(sc *store.Schedule) { sc.NextRunAt = at(h, 2*time.Hour) }))
	sooner := createSchedule(t, st, newSchedule(h, func(sc *store.Schedule) { sc.NextRunAt = at(h, time.Hour) }))
	createSchedule(t, st, newSchedule(h, func(sc *store.Schedule) { sc.Paused = true }))
	due := func() []string {
		t.Helper()
		list, err := st.DueSchedules(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sc := range list {
			ids = append(ids, sc.ID)
		}
		return ids
	}
	if got := due(); len(got) != 0 {
		t.Fatalf("due before the time: %v", got)
	}
	h.Advance(time.Hour + time.Second)
	if got := due(); !reflect.DeepEqual(got, []string{sooner.ID}) {
		t.Fatalf("due after an hour: %v, want %s", got, sooner.ID)
	}
	h.Advance(3 * time.Hour)
	if got := due(); !reflect.DeepEqual(got, []string{sooner.ID, later.ID}) {
		t.Fatalf("due after four hours: %v, want %s then %s (the paused one never)", got, sooner.ID, later.ID)
	}
	if list, err := st.DueSchedules(ctx, 1); err != nil || len(list) != 1 {
		t.Fatalf("limit 1: %d, %v", len(list), err)
	}
}

// Two nodes that read the same due schedule fire it together: one firing, one job, and
// the schedule moves on to the next time.
func testFiringOnce(t *testing.T, h Harness, st *store.Store) {
	sc := createSchedule(t, st, newSchedule(h))
	h.Advance(time.Hour)
	next := at(h, 30*24*time.Hour)
	const nodes = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fired []store.Job
	)
	for range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := firing(sc, next)
			f.Job.ID = store.NewID() // each node makes its own job
			j, ok, err := st.FireSchedule(ctx, f)
			if err != nil {
				t.Errorf("fire: %v", err)
				return
			}
			if ok {
				mu.Lock()
				fired = append(fired, j)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(fired) != 1 {
		t.Fatalf("%d of %d nodes fired, want exactly 1", len(fired), nodes)
	}
	if j := get(t, h, fired[0].ID); j.Status != store.StatusPending || j.IdempotencyKey == "" {
		t.Fatalf("the firing's job = %+v", j)
	}
	wantEvents(t, h, fired[0].ID, store.EventAccepted)
	got, err := st.GetSchedule(ctx, sc.ID)
	if err != nil || !got.NextRunAt.Equal(next) || !got.LastFiredFor.Equal(sc.NextRunAt) {
		t.Fatalf("after firing: next %s, last fired for %s (%v); want %s and %s", got.NextRunAt, got.LastFiredFor, err, next, sc.NextRunAt)
	}
	if list, err := st.DueSchedules(ctx, 10); err != nil || len(list) != 0 {
		t.Fatalf("still due after firing: %d, %v", len(list), err)
	}
}

// A firing read before an edit or a pause does not happen: the edit wins.
func testFiringYieldsToAnEdit(t *testing.T, h Harness, st *store.Store) {
	sc := createSchedule(t, st, newSchedule(h))
	h.Advance(time.Hour)
	stale := firing(sc, at(h, 24*time.Hour))
	edit := sc
	edit.Cron, edit.NextRunAt = "0 7 * * *", at(h, 3*time.Hour)
	if _, err := st.UpdateSchedule(ctx, edit); err != nil {
		t.Fatal(err)
	}
	if j, ok, err := st.FireSchedule(ctx, stale); err != nil || ok || j.ID != "" {
		t.Fatalf("stale firing = %+v, %v, %v; want nothing", j, ok, err)
	}
	if _, err := h.Store.Get(ctx, stale.Job.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the stale firing's job exists: %v", err)
	}
	paused := edit
	paused.Paused = true
	if _, err := st.UpdateSchedule(ctx, paused); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.FireSchedule(ctx, firing(edit, at(h, 24*time.Hour))); err != nil || ok {
		t.Fatalf("firing of a paused schedule: %v, %v", ok, err)
	}
}

// A time that was fired before (its key has a job, with the same or other values) is
// not fired again, and the schedule still moves on past it.
func testFiringFiredBefore(t *testing.T, h Harness, st *store.Store) {
	sc := createSchedule(t, st, newSchedule(h))
	h.Advance(time.Hour)
	first, ok, err := st.FireSchedule(ctx, firing(sc, at(h, 24*time.Hour)))
	if err != nil || !ok {
		t.Fatalf("first firing: %v, %v", ok, err)
	}
	// An edit sets the next run back to the time just fired.
	back := sc
	if _, err := st.UpdateSchedule(ctx, back); err != nil {
		t.Fatal(err)
	}
	again := firing(sc, at(h, 48*time.Hour))
	again.Job.RequestHash = "other values"
	j, ok, err := st.FireSchedule(ctx, again)
	if err != nil || ok || j.ID != first.ID {
		t.Fatalf("second firing of one time = %s, %v, %v; want the first job %s, not fired", j.ID, ok, err, first.ID)
	}
	if got, err := st.GetSchedule(ctx, sc.ID); err != nil || !got.NextRunAt.Equal(again.Next) {
		t.Fatalf("next run after the repeat: %s, %v; want %s", got.NextRunAt, err, again.Next)
	}
}

// A schedule's firings are its exports alone, latest scheduled time first, limited:
// not another schedule's whose id starts with its own, nor exports with other keys.
func testScheduleFirings(t *testing.T, h Harness, st *store.Store) {
	a := createSchedule(t, st, newSchedule(h))
	b := createSchedule(t, st, newSchedule(h, func(sc *store.Schedule) { sc.ID = a.ID + "x" }))
	enqueue(t, h, func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = "schedule:"+a.ID, "h" })
	enqueue(t, h, func(nj *store.NewJob) { nj.IdempotencyKey, nj.RequestHash = "other", "h" })
	fire := func(sc store.Schedule, times int) (store.Schedule, []string) {
		var ids []string
		for i := range times {
			next := sc.NextRunAt.Add(24 * time.Hour)
			j, ok, err := st.FireSchedule(ctx, firing(sc, next))
			if err != nil || !ok {
				t.Fatalf("firing %d of %s: %v, %v", i, sc.ID, ok, err)
			}
			ids = append(ids, j.ID)
			sc.NextRunAt = next
		}
		slices.Reverse(ids) // latest first
		return sc, ids
	}
	_, aIDs := fire(a, 3)
	_, bIDs := fire(b, 2)
	ids := func(jobs []store.Job) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	for _, c := range []struct {
		id    string
		limit int
		want  []string
	}{{a.ID, 0, aIDs}, {a.ID, 2, aIDs[:2]}, {b.ID, 10, bIDs}, {"none", 10, nil}} {
		got, err := st.ScheduleFirings(ctx, c.id, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), c.want) {
			t.Errorf("firings of %s (limit %d) = %v, want %v", c.id, c.limit, ids(got), c.want)
		}
	}
}

// A schedule id with a NUL (a client's "%00") is an unknown one, on every store:
// PostgreSQL's text cannot hold a NUL, and refuses one as a parameter.
func testScheduleIDWithANUL(t *testing.T, h Harness, st *store.Store) {
	nul := "no-such\x00schedule"
	if _, err := st.GetSchedule(ctx, nul); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSchedule: %v, want ErrNotFound", err)
	}
	if err := st.DeleteSchedule(ctx, nul); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteSchedule: %v, want ErrNotFound", err)
	}
	if _, err := st.UpdateSchedule(ctx, store.Schedule{ID: nul, Report: "r", Params: json.RawMessage(`{}`), Cron: "0 6 * * *", TimeZone: "UTC"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateSchedule: %v, want ErrNotFound", err)
	}
	if js, err := st.ScheduleFirings(ctx, nul, 10); err != nil || len(js) != 0 {
		t.Errorf("ScheduleFirings: %d, %v; want none", len(js), err)
	}
}

// Edits of different fields that run at once each see the one before (issue 36: a
// pause answered 200 was undone by a slower edit that had read the row before it).
// Each edit appends its mark to the params, so a lost one is missing at the end.
func testEditsDoNotLoseEachOther(t *testing.T, h Harness, st *store.Store) {
	sc := createSchedule(t, st, newSchedule(h, func(sc *store.Schedule) { sc.Params = json.RawMessage(`[]`) }))
	const edits = 24
	var wg sync.WaitGroup
	for i := range edits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.EditSchedule(ctx, sc.ID, func(cur store.Schedule) (store.Schedule, error) {
				var marks []int
				if err := json.Unmarshal(cur.Params, &marks); err != nil {
					return cur, err
				}
				marks = append(marks, i)
				cur.Params, _ = json.Marshal(marks)
				if i%2 == 0 {
					cur.Paused = !cur.Paused // a field another edit does not send
				}
				return cur, nil
			})
			if err != nil {
				t.Errorf("edit %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	got, err := st.GetSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var marks []int
	if err := json.Unmarshal(got.Params, &marks); err != nil {
		t.Fatal(err)
	}
	slices.Sort(marks)
	if len(marks) != edits || slices.Compact(marks)[edits-1] != edits-1 {
		t.Fatalf("%d of %d edits kept: %v", len(marks), edits, marks)
	}
	if got.Paused { // toggled an even number of times (12)
		t.Fatal("paused after an even number of toggles: a toggle was lost")
	}
	if got.Owner != sc.Owner || !got.CreatedAt.Equal(sc.CreatedAt) {
		t.Fatalf("owner %q, created %s: the edit changed what it may not", got.Owner, got.CreatedAt)
	}
}

// An edit whose function refuses writes nothing and returns that error as it is; an
// unknown id is not found.
func testEditRefused(t *testing.T, h Harness, st *store.Store) {
	sc := createSchedule(t, st, newSchedule(h))
	refusal := errors.New("no")
	if _, err := st.EditSchedule(ctx, sc.ID, func(cur store.Schedule) (store.Schedule, error) {
		cur.Cron = "changed"
		return cur, refusal
	}); !errors.Is(err, refusal) {
		t.Fatalf("refused edit: %v", err)
	}
	if got, err := st.GetSchedule(ctx, sc.ID); err != nil || got.Cron != sc.Cron || !got.UpdatedAt.Equal(sc.UpdatedAt) {
		t.Fatalf("after a refused edit: %+v, %v", got, err)
	}
	if _, err := st.EditSchedule(ctx, "no-such", func(cur store.Schedule) (store.Schedule, error) { return cur, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("edit of an unknown id: %v", err)
	}
	if _, err := st.EditSchedule(ctx, "no\x00such", func(cur store.Schedule) (store.Schedule, error) { return cur, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("edit of an id with a NUL: %v", err)
	}
}

// MoveSchedule moves the next firing only from the value given.
func testMoveSchedule(t *testing.T, h Harness, st *store.Store) {
	sc := createSchedule(t, st, newSchedule(h))
	to := at(h, 2*time.Hour)
	if moved, err := st.MoveSchedule(ctx, sc.ID, at(h, 5*time.Hour), to); err != nil || moved {
		t.Fatalf("move from another time: %v, %v", moved, err)
	}
	if moved, err := st.MoveSchedule(ctx, sc.ID, sc.NextRunAt, to); err != nil || !moved {
		t.Fatalf("move: %v, %v", moved, err)
	}
	if got, err := st.GetSchedule(ctx, sc.ID); err != nil || !got.NextRunAt.Equal(to) {
		t.Fatalf("after the move: %s, %v; want %s", got.NextRunAt, err, to)
	}
	if moved, err := st.MoveSchedule(ctx, "no-such", to, sc.NextRunAt); err != nil || moved {
		t.Fatalf("move of an unknown id: %v, %v", moved, err)
	}
}
