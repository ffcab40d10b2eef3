package schedules_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sheetq/app/schedules"
	"sheetq/internal/apptest"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/storetest"
)

// Down for three days: the schedule fires once, for the latest missed time, and moves
// on to its next time after now. Paused, it does not fire; resumed, it counts from then.
// (What the API answers to a pause and a resume is tested in app/api.)
func TestCatchUpAndPause(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, testOpts{Now: clock.Now, Idle: true})
	ctx := context.Background()
	sc := h.create(schedules.Input{Report: "demo", Params: map[string]any{"rows": 2}, Cron: "0 6 * * *", TimeZone: "UTC"})
	clock.Advance(3*24*time.Hour + time.Hour) // 4 December 13:00: 2, 3 and 4 December missed
	h.fireDue(1, "after downtime")
	fired := h.firings(sc.ID)
	if len(fired) != 1 || fired[0].ScheduledFor == nil || !fired[0].ScheduledFor.Equal(time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("firings after downtime: %+v; want one, for 4 December 06:00", fired)
	}
	if got := h.get(sc.ID); !got.NextRunAt.Equal(time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("next after catching up: %v", got.NextRunAt)
	}

	paused, err := h.sched.SetPaused(ctx, sc.ID, true)
	if err != nil || !paused.Paused || !paused.NextRunAt.IsZero() {
		t.Fatalf("paused: %+v, %v", paused, err)
	}
	clock.Advance(2 * 24 * time.Hour) // 6 December 13:00
	h.fireDue(0, "while paused")
	resumed, err := h.sched.SetPaused(ctx, sc.ID, false)
	if err != nil || resumed.Paused || !resumed.NextRunAt.Equal(time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("resumed: %+v, %v; want the next run on 7 December, nothing caught up", resumed, err)
	}
	if n := len(h.firings(sc.ID)); n != 1 {
		t.Fatalf("%d firings after pause and resume, want still 1", n)
	}
}

// A schedule that no longer checks still fires: its report was removed, so its export
// fails with the reason, where people look, instead of the firing vanishing. A
// schedule whose zone the server cannot read is paused, so that it shows as stopped.
func TestFiresWhatNoLongerChecks(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, testOpts{Now: clock.Now})
	ctx := context.Background()
	h.writeReport("period.sql", apptest.MonthReport)
	sc := h.create(schedules.Input{Report: "period", Params: map[string]any{"from": "month_start(-1)", "to": "month_start(0)"},
		Cron: "0 6 * * *", TimeZone: "UTC"})
	if err := os.Remove(filepath.Join(h.dir.Reports(), "period.sql")); err != nil {
		t.Fatal(err)
	}
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		_, err := h.cat.Report("period")
		return err != nil, "period still served"
	})
	clock.Advance(24 * time.Hour)
	h.fireDue(1, "")
	fired := h.firings(sc.ID)
	if len(fired) != 1 {
		t.Fatalf("%d firings, want 1", len(fired))
	}
	j := h.waitStatus(fired[0].ID, store.StatusFailed)
	if j.Error == nil || j.Error.Code != "unknown_report" || j.Params["from"] != "2026-11-01" {
		t.Fatalf("the firing of a removed report: %+v, error %+v", j, j.Error)
	}

	bad, err := h.store.CreateSchedule(ctx, store.Schedule{ID: "no-zone", Report: "demo", Params: json.RawMessage(`{}`),
		Cron: "@daily", TimeZone: "Mars/Olympus_Mons", NextRunAt: clock.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	h.fireDue(0, "with an unreadable zone")
	if got, err := h.store.GetSchedule(ctx, bad.ID); err != nil || !got.Paused || !got.NextRunAt.IsZero() {
		t.Fatalf("the schedule with an unreadable zone: %+v, %v; want paused", got, err)
	}
}

// A client that sends a schedule's firing key ("schedule:<id>:<time>") as its
// Idempotency-Key gets an export of its own, and the firing still happens: the two
// namespaces are apart (issue 36, item 2).
func TestFiringKeyIsNoClientsKey(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		clock := storetest.ClockAt(time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC))
		h := newHarness(t, testOpts{Store: storeURL, Now: clock.Now, Idle: true})
		ctx := context.Background()
		sc := h.create(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "* * * * *", TimeZone: "UTC"})
		key := store.FiringKey(sc.ID, sc.NextRunAt)
		args, prob := h.svc.Validate(context.Background(), "demo", map[string]any{"rows": 2}, export.FileOptions{})
		if prob != nil {
			t.Fatal(prob)
		}
		squatter, _, err := h.svc.Enqueue(ctx, args, "", key)
		if err != nil {
			t.Fatalf("an export with the key %q: %v", key, err)
		}
		// The same key again is that client's same request: its job, not a new one.
		if again, _, err := h.svc.Enqueue(ctx, args, "", key); err != nil || again.ID != squatter.ID {
			t.Fatalf("the key again: %s, %v; want %s", again.ID, err, squatter.ID)
		}
		clock.Advance(time.Minute)
		h.fireDue(1, "with the firing key taken by a client")
		fired := h.firings(sc.ID)
		if len(fired) != 1 || fired[0].ID == squatter.ID || fired[0].ScheduleID != sc.ID ||
			fired[0].ScheduledFor == nil || !fired[0].ScheduledFor.Equal(sc.NextRunAt) {
			t.Fatalf("the schedule's firings: %+v; want one export of its own for %s (the client's is %s)", fired, sc.NextRunAt, squatter.ID)
		}
	})
}

// The store's clock steps a day ahead and comes back (issue 36, item 6): a step that
// goes away within ClockSettle fires nothing early and parks nothing; a step that holds
// fires each schedule once (the catch-up rule), not once for every hour it skipped; and
// when it steps back, the next runs it parked a day ahead are moved back. The store's
// clock (the database's) and this node's clock are separate test clocks.
func TestClockSteps(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		start := time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC)
		db, node := storetest.ClockAt(start), storetest.ClockAt(start)
		h := newHarness(t, testOpts{Store: storeURL, Now: db.Now, Idle: true})
		var ids []string
		for range 3 {
			sc := h.create(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "0 * * * *", TimeZone: "UTC"})
			ids = append(ids, sc.ID)
		}
		svc := &schedules.Service{Store: h.sched.Store, Exports: h.sched.Exports, Engine: h.sched.Engine,
			Log: h.sched.Log, Now: node.Now}
		ctx := context.Background()
		fired := func() int {
			t.Helper()
			n, err := svc.FireDue(ctx)
			if err != nil {
				t.Fatalf("FireDue: %v", err)
			}
			return n
		}
		// tick moves both clocks on by d, n times, firing after each move.
		tick := func(d time.Duration, n int) (total int) {
			t.Helper()
			for range n {
				db.Advance(d)
				node.Advance(d)
				total += fired()
			}
			return total
		}
		firingTimes := func() map[time.Time]int {
			t.Helper()
			out := map[time.Time]int{}
			for _, id := range ids {
				for _, j := range h.firings(id) {
					out[*j.ScheduledFor]++
				}
			}
			return out
		}
		if n := fired(); n != 0 {
			t.Fatalf("%d firings before any was due", n)
		}

		// A day ahead for 50 seconds, then back: nothing fires early.
		db.Advance(24 * time.Hour)
		if n := tick(time.Second, 50); n != 0 {
			t.Fatalf("%d firings while the database's clock was a day ahead for 50 s; want none", n)
		}
		db.Advance(-24 * time.Hour)
		// To 01:00:30 by both clocks: each schedule fires for 01:00, once.
		if n := tick(time.Minute, 60); n != 3 {
			t.Fatalf("%d firings at 01:00 after the clock came back; want 3 (%v)", n, firingTimes())
		}

		// A day ahead for good: nothing until the step has held ClockSettle, then each
		// schedule once, for the latest time the step skipped.
		db.Advance(24 * time.Hour)
		early := tick(time.Second, int((schedules.ClockSettle-10*time.Second)/time.Second))
		if early != 0 {
			t.Fatalf("%d firings before the step held", early)
		}
		if n := tick(time.Second, 30); n != 3 {
			t.Fatalf("%d firings once the step held; want 3, one per schedule (%v)", n, firingTimes())
		}
		if n := tick(time.Minute, 20); n != 0 {
			t.Fatalf("%d more firings in the 20 minutes after; want none", n)
		}
		// Back again, for good: once that has held, the next runs parked a day ahead
		// are moved back, and the schedules fire at the next hour by the clock again.
		db.Advance(-24 * time.Hour)
		now := node.Now()
		nextHour := now.Truncate(time.Hour).Add(time.Hour)
		n := tick(time.Minute, int(nextHour.Sub(now)/time.Minute)+1)
		if n != 3 {
			t.Fatalf("%d firings by %s after the clock stepped back; want 3 (%v)", n, nextHour, firingTimes())
		}
		for at, count := range firingTimes() {
			if count != 3 {
				t.Errorf("%s fired %d times; want once per schedule", at, count)
			}
		}
		if times := firingTimes(); len(times) != 3 || times[nextHour] != 3 {
			t.Errorf("fired for %v; want 01:00, one time a day later, and %s", times, nextHour)
		}
	})
}

// A schedule's webhook target holding half a UTF-16 surrogate pair (`\ud800`, which
// PostgreSQL's json cannot read back as text, as \u0000) is stored as Go reads it, so
// the schedule fires and its export's row can end; and a schedule whose firing the
// store refuses does not hold back the schedules due after it (issue 36, item 1). The
// target is given as a client's bytes, escape and all, as the API passes them on.
func TestScheduleWithAnUnreadableEscapeFires(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		clock := storetest.ClockAt(time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC))
		h := newHarness(t, testOpts{Store: storeURL, Now: clock.Now, Idle: true})
		odd := h.create(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "* * * * *", TimeZone: "UTC",
			Deliver: json.RawMessage(`[{"type":"webhook","url":"http://127.0.0.1:9/\ud800"}]`)})
		plain := h.create(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "* * * * *", TimeZone: "UTC"})
		clock.Advance(time.Minute)
		h.fireDue(2, "with both schedules due")
		for _, id := range []string{odd.ID, plain.ID} {
			if f := h.firings(id); len(f) != 1 {
				t.Fatalf("schedule %s: %d firings", id, len(f))
			}
		}
		// The firing's export can be canceled, which on PostgreSQL makes it final and
		// evaluates the index that a \ud800 in its args broke.
		j := h.firings(odd.ID)[0]
		if _, err := h.engine.Cancel(context.Background(), j.ID); err != nil {
			t.Fatalf("cancel %s: %v", j.ID, err)
		}
		if got := h.waitStatus(j.ID, store.StatusCanceled); got.Status != string(store.StatusCanceled) {
			t.Fatalf("the firing's export: %s", got.Status)
		}
	})
}
