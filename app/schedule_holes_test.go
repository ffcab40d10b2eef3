package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sheetq/app/schedules"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/storetest"
	"sheetq/store/storetest/pgtest"
)

// Issue 36's holes in schedules, each on SQLite and on PostgreSQL.

// onBothStores runs fn on an app over SQLite and on one over PostgreSQL.
func onBothStores(t *testing.T, fn func(t *testing.T, storeURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.FreshSchema(t)) })
}

// A client that sends a schedule's firing key ("schedule:<id>:<time>") as its
// Idempotency-Key gets an export of its own, and the firing still happens: the two
// namespaces are apart (issue 36, item 2).
func TestFiringKeyIsNoClientsKey(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		clock := storetest.ClockAt(time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC))
		ts := newTestServer(t, testOpts{Store: storeURL, Now: clock.Now, Idle: true})
		ts.sched.Stop()
		sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"* * * * *","timezone":"UTC"}`, http.StatusCreated)
		key := store.FiringKey(sc.ID, *sc.NextRunAt)
		res := ts.post(`{"report":"demo","params":{"rows":2}}`, key)
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("an export with the key %q: %d %s", key, res.StatusCode, res.body)
		}
		var squatter struct{ ID string }
		_ = json.Unmarshal(res.body, &squatter)
		// The same key again is that client's same request: its job, not a new one.
		if again := ts.post(`{"report":"demo","params":{"rows":2}}`, key); again.StatusCode != http.StatusOK && again.StatusCode != http.StatusAccepted {
			t.Fatalf("the key again: %d %s", again.StatusCode, again.body)
		}
		clock.Advance(time.Minute)
		if n, err := ts.sched.FireDue(context.Background()); err != nil || n != 1 {
			t.Fatalf("FireDue: %d, %v; want the firing made", n, err)
		}
		fired := ts.firings(sc.ID)
		if len(fired) != 1 || fired[0].ID == squatter.ID || fired[0].ScheduleID != sc.ID ||
			fired[0].ScheduledFor == nil || !fired[0].ScheduledFor.Equal(*sc.NextRunAt) {
			t.Fatalf("the schedule's firings: %+v; want one export of its own for %s (the client's is %s)", fired, sc.NextRunAt, squatter.ID)
		}
	})
}

// A PATCH whose body is still arriving when a pause is answered does not undo the
// pause, and of two PATCHes of different fields neither is lost (issue 36, item 3).
// The slow PATCH is held with its body half sent until the server's handler is
// reading it, which is after today's handler had read the schedule.
func TestPatchKeepsWhatLandedMeanwhile(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		ts := newTestServer(t, testOpts{Store: storeURL, Idle: true})
		ts.sched.Stop()
		sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)
		path := "/api/v1/schedules/" + sc.ID

		// slowPatch sends the headers and the body's first byte, waits until the handler
		// is reading the body, and returns the function that sends the rest.
		slowPatch := func(rest string) (finish func() int) {
			t.Helper()
			pr, pw := io.Pipe()
			req, err := http.NewRequest(http.MethodPatch, ts.url+path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			done := make(chan int, 1)
			go func() {
				res, err := ts.hc.Do(req)
				if err != nil {
					t.Errorf("slow PATCH: %v", err)
					done <- 0
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				done <- res.StatusCode
			}()
			if _, err := pw.Write([]byte("{")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, func() (bool, string) {
				return ts.mw.BodiesReading() > 0, "the handler is not reading the body"
			})
			return func() int {
				_, _ = pw.Write([]byte(rest))
				pw.Close()
				return <-done
			}
		}

		finish := slowPatch(`"cron":"0 7 * * *"}`)
		if p := ts.schedule("POST", path+"/pause", "", http.StatusOK); !p.Paused {
			t.Fatalf("pause answered %+v", p)
		}
		if code := finish(); code != http.StatusOK {
			t.Fatalf("the slow PATCH: %d", code)
		}
		got := ts.schedule("GET", path, "", http.StatusOK)
		var raw struct {
			Cron   string `json:"cron"`
			Paused bool   `json:"paused"`
		}
		_ = json.Unmarshal(ts.get(path).body, &raw)
		if !got.Paused || raw.Cron != "0 7 * * *" {
			t.Fatalf("after a pause and a slow PATCH of the cron: paused %v, cron %q; want both kept", got.Paused, raw.Cron)
		}

		// Two PATCHes of different fields, the slower one begun first.
		finish = slowPatch(`"timezone":"Europe/Berlin"}`)
		ts.schedule("PATCH", path, `{"params":{"rows":5}}`, http.StatusOK)
		if code := finish(); code != http.StatusOK {
			t.Fatalf("the slow PATCH: %d", code)
		}
		var both struct {
			TimeZone string         `json:"timezone"`
			Params   map[string]any `json:"params"`
			Paused   bool           `json:"paused"`
		}
		_ = json.Unmarshal(ts.get(path).body, &both)
		if both.TimeZone != "Europe/Berlin" || both.Params["rows"] != float64(5) || !both.Paused {
			t.Fatalf("after two PATCHes: %+v; want the zone and the params, still paused", both)
		}
	})
}

// The store's clock steps a day ahead and comes back (issue 36, item 6): a step that
// goes away within ClockSettle fires nothing early and parks nothing; a step that holds
// fires each schedule once (the catch-up rule), not once for every hour it skipped; and
// when it steps back, the next runs it parked a day ahead are moved back. The store's
// clock (the database's) and this node's clock are separate test clocks.
func TestScheduleClockSteps(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		start := time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC)
		db, node := storetest.ClockAt(start), storetest.ClockAt(start)
		ts := newTestServer(t, testOpts{Store: storeURL, Now: db.Now, Idle: true})
		ts.sched.Stop()
		var ids []string
		for range 3 {
			sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"0 * * * *","timezone":"UTC"}`, http.StatusCreated)
			ids = append(ids, sc.ID)
		}
		svc := &schedules.Service{Store: ts.sched.Store, Exports: ts.sched.Exports, Engine: ts.sched.Engine,
			Log: ts.sched.Log, Now: node.Now}
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
				for _, j := range ts.firings(id) {
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

// declaredHere lets Declare delete any declared schedule the file no longer declares,
// as a node on its own store does.
func declaredHere(string) bool { return true }

// Two nodes on one PostgreSQL database, only one of whose config files declares a
// schedule: the other node's start leaves it alone, and the node that declared it
// deletes it once its file no longer does (issue 36, item 7). On SQLite, the one node
// deletes what its file stopped declaring, even from before it remembered its own.
func TestDeclaredScheduleOfAnotherNode(t *testing.T) {
	declares := "[[schedules]]\nid = \"a-daily\"\nreport = \"demo\"\ncron = \"0 6 * * *\"\ntimezone = \"UTC\"\n"
	writeConfig := func(dir, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "sheetq.toml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(ts *testServer) bool {
		t.Helper()
		_, err := ts.store.GetSchedule(context.Background(), "a-daily")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.FreshSchema(t)
		dirA, dirB := t.TempDir(), t.TempDir()
		writeConfig(dirA, declares)
		a := newTestServer(t, testOpts{Store: dsn, DataDir: dirA, Node: "a", Idle: true})
		if !exists(a) {
			t.Fatal("node a did not create the schedule its file declares")
		}
		b := newTestServer(t, testOpts{Store: dsn, DataDir: dirB, Node: "b", Idle: true})
		if !exists(b) {
			t.Fatal("node b, whose file declares no schedule, deleted the one node a's file declares")
		}
		a.Stop()
		writeConfig(dirA, "")
		a2 := newTestServer(t, testOpts{Store: dsn, DataDir: dirA, Node: "a", Idle: true})
		if exists(a2) {
			t.Fatal("node a kept a schedule its file no longer declares")
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		writeConfig(dir, declares)
		ts := newTestServer(t, testOpts{DataDir: dir, Idle: true})
		if !exists(ts) {
			t.Fatal("the schedule was not created")
		}
		ts.Stop()
		// As a data directory from before the node remembered what it declared.
		if err := os.Remove(filepath.Join(dir, "declared-schedules.json")); err != nil {
			t.Fatal(err)
		}
		writeConfig(dir, "")
		if ts2 := newTestServer(t, testOpts{DataDir: dir, Idle: true}); exists(ts2) {
			t.Fatal("the schedule the file no longer declares is kept")
		}
	})
}

// The edit form, open while someone pauses the schedule elsewhere, saves its fields
// without undoing the pause; ticking or clearing the box still pauses or resumes.
func TestFormEditKeepsAPauseMadeMeanwhile(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)
	loc := "/schedules/" + sc.ID
	doc := page(t, ts.get(loc+"/edit"), http.StatusOK)
	was, _ := doc.Find(`input[name="paused_was"]`).Attr("value")
	if was != "false" {
		t.Fatalf("the edit form carries paused_was %q, want false", was)
	}
	ts.schedule("POST", "/api/v1/schedules/"+sc.ID+"/pause", "", http.StatusOK)
	form := url.Values{"report": {"demo"}, "param.rows": {"2"}, "file-format": {"xlsx"}, "cron": {"0 7 * * *"},
		"timezone": {"UTC"}, "paused_was": {was}, "action": {"save"}}
	save := func(form url.Values) scheduleAnswer {
		t.Helper()
		if res := ts.postForm(loc+"/edit", form, nil); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("save: %d: %s", res.StatusCode, res.body)
		}
		return ts.schedule("GET", "/api/v1/schedules/"+sc.ID, "", http.StatusOK)
	}
	if got := save(form); !got.Paused || got.Params["rows"] != float64(2) {
		t.Fatalf("after the form's save: paused %v, params %v; want the pause kept and rows 2", got.Paused, got.Params)
	}
	form.Set("paused_was", "true") // the form shown now: paused, and the box cleared
	if got := save(form); got.Paused {
		t.Fatal("clearing the box did not resume")
	}
	form.Set("paused_was", "false")
	form.Set("paused", "true")
	if got := save(form); !got.Paused {
		t.Fatal("ticking the box did not pause")
	}
}

// A schedule's webhook target holding half a UTF-16 surrogate pair (`\ud800`, which
// PostgreSQL's json cannot read back as text, as \u0000) is stored as Go reads it, so
// the schedule fires and its export's row can end; and a schedule whose firing the
// store refuses does not hold back the schedules due after it (issue 36, item 1).
func TestScheduleWithAnUnreadableEscapeFires(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, storeURL string) {
		clock := storetest.ClockAt(time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC))
		ts := newTestServer(t, testOpts{Store: storeURL, Now: clock.Now, Idle: true,
			Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true}})
		ts.sched.Stop()
		odd := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"* * * * *","timezone":"UTC",
			"deliver":[{"type":"webhook","url":"http://127.0.0.1:9/\ud800"}]}`, http.StatusCreated)
		plain := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"* * * * *","timezone":"UTC"}`, http.StatusCreated)
		clock.Advance(time.Minute)
		if n, err := ts.sched.FireDue(context.Background()); err != nil || n != 2 {
			t.Fatalf("FireDue: %d, %v; want both schedules fired", n, err)
		}
		for _, id := range []string{odd.ID, plain.ID} {
			if f := ts.firings(id); len(f) != 1 {
				t.Fatalf("schedule %s: %d firings", id, len(f))
			}
		}
		// The firing's export can be canceled, which on PostgreSQL makes it final and
		// evaluates the index that a \ud800 in its args broke.
		j := ts.firings(odd.ID)[0]
		ts.cancel(j.ID)
		if got, _ := ts.waitStatus(j.ID, store.StatusCanceled); got.Status != string(store.StatusCanceled) {
			t.Fatalf("the firing's export: %s", got.Status)
		}
	})
}
