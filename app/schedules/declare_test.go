package schedules_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sheetq/app/schedules"
	"sheetq/store"
	"sheetq/store/storetest"
)

// The config file's schedules: created at the first start, left alone when unchanged
// (a missed time is still caught up), updated when changed, deleted when gone; the
// service refuses to change them (the API's 409 is tested in app/api), and a schedule
// made through the API is never touched.
func TestDeclare(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, testOpts{Now: clock.Now, Idle: true})
	ctx := context.Background()
	mine := h.create(schedules.Input{Report: "demo", Cron: "@daily", TimeZone: "UTC", Paused: true})
	daily := schedules.Declared{ID: "daily-demo", Input: schedules.Input{Report: "demo",
		Params: map[string]any{"rows": 2}, Cron: "0 6 * * *", TimeZone: "UTC"}}
	if c, u, d, err := h.sched.Declare(ctx, []schedules.Declared{daily}, declaredHere); err != nil || c != 1 || u != 0 || d != 0 {
		t.Fatalf("first start: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	clock.Advance(24 * time.Hour) // the 06:00 of 2 December is missed: the server was down
	if c, u, d, err := h.sched.Declare(ctx, []schedules.Declared{daily}, declaredHere); err != nil || c+u+d != 0 {
		t.Fatalf("unchanged: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	h.fireDue(1, "the missed time after a restart")
	if got := h.get("daily-demo"); !got.NextRunAt.Equal(time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("after catching up: next %v", got.NextRunAt)
	}
	_, err := h.sched.Edit(ctx, "daily-demo", func(in *schedules.Input) { in.Cron = "@hourly" })
	if !errors.Is(err, schedules.ErrDeclared) {
		t.Errorf("edit of a declared schedule: %v", err)
	}
	if _, err := h.sched.SetPaused(ctx, "daily-demo", true); !errors.Is(err, schedules.ErrDeclared) {
		t.Errorf("pause of a declared schedule: %v", err)
	}
	if err := h.sched.Delete(ctx, "daily-demo"); !errors.Is(err, schedules.ErrDeclared) {
		t.Errorf("delete of a declared schedule: %v", err)
	}
	daily.Cron = "30 7 * * *"
	if c, u, d, err := h.sched.Declare(ctx, []schedules.Declared{daily}, declaredHere); err != nil || u != 1 || c+d != 0 {
		t.Fatalf("changed: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	if got := h.get("daily-demo"); !got.NextRunAt.Equal(time.Date(2026, 12, 3, 7, 30, 0, 0, time.UTC)) {
		t.Fatalf("after the change: next %v", got.NextRunAt)
	}
	if _, _, _, err := h.sched.Declare(ctx, []schedules.Declared{{ID: mine.ID, Input: daily.Input}}, declaredHere); err == nil {
		t.Fatal("a declared id that an API schedule holds was taken over")
	}
	// A wrong schedule refuses the whole file before anything is written: the new one
	// before it is not created, the changed one not updated.
	weekly := schedules.Declared{ID: "weekly-demo", Input: daily.Input}
	changed := daily
	changed.Cron = "0 8 * * *"
	wrong := schedules.Declared{ID: "wrong", Input: schedules.Input{Report: "no-such-report", Cron: "0 6 * * *", TimeZone: "UTC"}}
	if c, u, d, err := h.sched.Declare(ctx, []schedules.Declared{weekly, changed, wrong}, declaredHere); err == nil || c+u+d != 0 {
		t.Fatalf("a wrong schedule: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	if _, err := h.sched.Get(ctx, "weekly-demo"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("weekly-demo of a refused file: %v", err)
	}
	if got := h.get("daily-demo"); !got.NextRunAt.Equal(time.Date(2026, 12, 3, 7, 30, 0, 0, time.UTC)) {
		t.Fatalf("daily-demo changed by a refused file: next %v", got.NextRunAt)
	}
	for _, id := range []string{"", "a b", "x/y", "-lead", strings.Repeat("x", 65), "daily-demo"} {
		decl := []schedules.Declared{daily, {ID: id, Input: daily.Input}}
		if _, _, _, err := h.sched.Declare(ctx, decl, declaredHere); err == nil || !strings.Contains(err.Error(), "schedule id") {
			t.Errorf("schedule id %q: %v", id, err)
		}
	}
	if c, u, d, err := h.sched.Declare(ctx, nil, declaredHere); err != nil || d != 1 || c+u != 0 {
		t.Fatalf("gone from the file: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	if _, err := h.sched.Get(ctx, "daily-demo"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("daily-demo gone from the file: %v", err)
	}
	h.get(mine.ID)
}
