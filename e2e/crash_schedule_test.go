//go:build !windows

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sheetq/internal/client"
	"sheetq/jobs/export"
	"sheetq/jobs/schedule"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// A node SIGKILLed while it fires a schedule loses no firing and makes none twice: the
// schedule's move and its export are one transaction (store.FireSchedule). Killed at
// before-fire (the firing built, its transaction not begun), nothing was stored, and the
// restarted node fires the same time, once; killed at after-fire (committed, the lane not
// woken), the restarted node runs that export once and does not fire the time again.
//
// The schedule is declared in sheetq.toml with a yearly cron expression (06:00 UTC on 1
// January), so no other firing comes due while the test runs. To make it due now without
// waiting for its time, a first run of the binary creates it and stops; the test then sets
// its next run, in the store, to the time one year before the latest one that has passed,
// as if every node had been down since: the catch-up rule fires the latest missed time,
// so the firing's time (at) differs from the due time the node reads, and both the armed
// and the restarted node must pick the same at.
func TestCrashScheduleFiring(t *testing.T) {
	for _, point := range []string{"before-fire", "after-fire"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			crashScheduleFiring(t, point)
		})
	}
}

const crashScheduleID = "crash-firing"

func crashScheduleFiring(t *testing.T, point string) {
	data := t.TempDir()
	conf := `[[schedules]]
id = "` + crashScheduleID + `"
report = "demo"
cron = "0 6 1 1 *"
timezone = "UTC"
params = { rows = 20, seconds = 0 }
`
	if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(data, "reports"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The first run declares the schedule; its next run is next January.
	p := startBinary(t, data, nil)
	if sc, _, err := client.New(p.url, "", nil).GetSchedule(t.Context(), crashScheduleID); err != nil || sc.NextRunAt == nil {
		t.Fatalf("the declared schedule: %+v, %v", sc, err)
	}
	p.stop(t)

	// Make it a year overdue: the latest missed time is at, the one before it is due.
	spec, err := schedule.Parse("0 6 1 1 *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	at := spec.Latest(start.AddDate(-2, 0, 0), start)
	due := spec.Latest(at.AddDate(-2, 0, 0), at.Add(-time.Nanosecond))
	if at.IsZero() || due.IsZero() {
		t.Fatalf("no past firings of the schedule before %s", start)
	}
	withStore(t, data, func(st *store.Store) {
		sc, err := st.GetSchedule(t.Context(), crashScheduleID)
		if err != nil {
			t.Fatal(err)
		}
		sc.NextRunAt = due
		if _, err := st.UpdateSchedule(t.Context(), sc); err != nil {
			t.Fatal(err)
		}
	})

	// Armed, the node fires at its first look (maybe before it listens) and dies there.
	armed, _ := spawn(t, data, []string{"SHEETQ_FAULT=" + point}, "--log-level", "debug")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("armed server log:\n%s", armed.log())
		}
	})
	if code := armed.wait(t); code == 0 || !armed.faultKilled() ||
		!strings.Contains(armed.log(), "fault point "+point+" reached") {
		t.Fatalf("the armed node exited %d, not killed at %s", code, point)
	}

	var committed store.Job // after-fire: the export the killed node committed
	withStore(t, data, func(st *store.Store) {
		firings, sc := scheduleState(t, st)
		switch point {
		case "before-fire":
			if len(firings) != 0 || !sc.NextRunAt.Equal(due) || !sc.LastFiredFor.IsZero() {
				t.Fatalf("killed before the firing's transaction, the store has %d exports, next run %s (want %s), "+
					"last fired for %s (want none)", len(firings), sc.NextRunAt, due, sc.LastFiredFor)
			}
		case "after-fire":
			if len(firings) != 1 || !sc.LastFiredFor.Equal(at) || !sc.NextRunAt.After(start) {
				t.Fatalf("killed after the firing committed, the store has %d exports (want 1), next run %s (want after %s), "+
					"last fired for %s (want %s)", len(firings), sc.NextRunAt, start, sc.LastFiredFor, at)
			}
			committed = firings[0]
			// The lane is not woken, but a worker's claim already waiting for the writer
			// (the engine's first look at start) may take the export in the moment
			// before the kill lands, under load: then it is an orphan that the restart
			// recovers, its attempt spent.
			pending := committed.Status == store.StatusPending && committed.Attempt == 0
			claimed := committed.Status == store.StatusProcessing && committed.Attempt == 1
			if !pending && !claimed {
				t.Fatalf("the committed export is %s after %d attempts, want PENDING and never run, or PROCESSING at its first",
					committed.Status, committed.Attempt)
			}
		}
	})

	// Restarted unarmed: the schedule fires (before-fire) and the export runs to its end;
	// which time it fired and how often is read from the store after a graceful stop.
	p = startBinary(t, data, nil)
	c := client.New(p.url, "", nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		sc, _, err := c.GetSchedule(t.Context(), crashScheduleID)
		if err != nil {
			t.Fatal(err)
		}
		body, err := c.Call(t.Context(), "GET", "/api/v1/exports?report=demo", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var list struct{ Exports []client.Job }
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		if sc.LastFiredFor != nil && len(list.Exports) > 0 && exportsFinal(list.Exports) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the firing's export never ended; schedule last fired for %v, exports %+v",
				sc.LastFiredFor, list.Exports)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stop(t)

	// One export for (schedule, at), succeeded at its first attempt; the schedule moved on.
	withStore(t, data, func(st *store.Store) {
		firings, sc := scheduleState(t, st)
		if len(firings) != 1 {
			t.Fatalf("%d exports after the restart, want exactly 1: %+v", len(firings), firings)
		}
		j := firings[0]
		// One more attempt when the killed node had claimed it (its attempt is spent).
		want := 1 + committed.Attempt
		if j.Status != store.StatusSucceeded || j.Attempt != want {
			t.Fatalf("the firing's export is %s after %d attempts (%s %s), want SUCCEEDED at attempt %d",
				j.Status, j.Attempt, j.ErrorCode, j.ErrorMessage, want)
		}
		if point == "after-fire" && j.ID != committed.ID {
			t.Fatalf("the export is %s, not %s which the killed node committed", j.ID, committed.ID)
		}
		var args export.Args
		if err := json.Unmarshal(j.Args, &args); err != nil {
			t.Fatal(err)
		}
		if args.ScheduleID != crashScheduleID || args.ScheduledFor == nil || !args.ScheduledFor.Equal(at) {
			t.Fatalf("the export's args name schedule %q at %v, want %q at %s", args.ScheduleID, args.ScheduledFor,
				crashScheduleID, at)
		}
		if want := store.FiringKey(crashScheduleID, at); j.IdempotencyKey != want {
			t.Fatalf("the export's idempotency key is %q, want %q", j.IdempotencyKey, want)
		}
		if !sc.LastFiredFor.Equal(at) || !sc.NextRunAt.After(start) || !sc.NextRunAt.Equal(spec.Next(start)) {
			t.Fatalf("the schedule was last fired for %s (want %s), its next run is %s (want %s)",
				sc.LastFiredFor, at, sc.NextRunAt, spec.Next(start))
		}
	})
}

// withStore opens the data directory's database while no node runs.
func withStore(t *testing.T, data string, fn func(*store.Store)) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(data, "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fn(st)
}

// scheduleState is every export in the store that names the crash test's schedule in
// its args, however it was keyed, and the schedule.
func scheduleState(t *testing.T, st *store.Store) ([]store.Job, store.Schedule) {
	t.Helper()
	all, err := st.List(t.Context(), store.ListOptions{Kind: export.Name, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var firings []store.Job
	for _, j := range all {
		var args export.Args
		if err := json.Unmarshal(j.Args, &args); err != nil {
			t.Fatal(err)
		}
		if args.ScheduleID == crashScheduleID {
			firings = append(firings, j)
		}
	}
	sc, err := st.GetSchedule(t.Context(), crashScheduleID)
	if err != nil {
		t.Fatal(err)
	}
	return firings, sc
}

// exportsFinal is whether every one of js has ended.
func exportsFinal(js []client.Job) bool {
	for _, j := range js {
		if !store.Status(j.Status).Final() {
			return false
		}
	}
	return true
}
