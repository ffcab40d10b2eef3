package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/storetest/pgtest"
)

// Issue 36's holes in schedules, each on SQLite and on PostgreSQL.

// onBothStores runs fn on an app over SQLite and on one over PostgreSQL.
func onBothStores(t *testing.T, fn func(t *testing.T, storeURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.FreshSchema(t)) })
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
		sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)
		path := "/api/v1/schedules/" + sc.ID

		// slowPatch sends the headers and the body's first byte, waits until the handler
		// is reading the body, and returns the function that sends the rest.
		slowPatch := func(rest string) (finish func() int) {
			t.Helper()
			pr, pw := io.Pipe()
			req, err := http.NewRequest(http.MethodPatch, ts.URL+path, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			done := make(chan int, 1)
			go func() {
				res, err := ts.HC.Do(req)
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
			apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
				return ts.mw.BodiesReading() > 0, "the handler is not reading the body"
			})
			return func() int {
				_, _ = pw.Write([]byte(rest))
				pw.Close()
				return <-done
			}
		}

		finish := slowPatch(`"cron":"0 7 * * *"}`)
		if p := ts.Schedule("POST", path+"/pause", "", http.StatusOK); !p.Paused {
			t.Fatalf("pause answered %+v", p)
		}
		if code := finish(); code != http.StatusOK {
			t.Fatalf("the slow PATCH: %d", code)
		}
		got := ts.Schedule("GET", path, "", http.StatusOK)
		var raw struct {
			Cron   string `json:"cron"`
			Paused bool   `json:"paused"`
		}
		_ = json.Unmarshal(ts.Get(path).Body, &raw)
		if !got.Paused || raw.Cron != "0 7 * * *" {
			t.Fatalf("after a pause and a slow PATCH of the cron: paused %v, cron %q; want both kept", got.Paused, raw.Cron)
		}

		// Two PATCHes of different fields, the slower one begun first.
		finish = slowPatch(`"timezone":"Europe/Berlin"}`)
		ts.Schedule("PATCH", path, `{"params":{"rows":5}}`, http.StatusOK)
		if code := finish(); code != http.StatusOK {
			t.Fatalf("the slow PATCH: %d", code)
		}
		var both struct {
			TimeZone string         `json:"timezone"`
			Params   map[string]any `json:"params"`
			Paused   bool           `json:"paused"`
		}
		_ = json.Unmarshal(ts.Get(path).Body, &both)
		if both.TimeZone != "Europe/Berlin" || both.Params["rows"] != float64(5) || !both.Paused {
			t.Fatalf("after two PATCHes: %+v; want the zone and the params, still paused", both)
		}
	})
}

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
