package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/storetest"
	"sheetq/store/storetest/mysqltest"
	"sheetq/store/storetest/pgtest"
)

// relayConfig is a config file with an [smtp] relay, which saving a schedule that
// emails needs; the tests that use it send no mail.
func relayConfig() FileConfig {
	return FileConfig{SMTP: deliver.SMTP{Host: "smtp.example.com", From: "sheetq <reports@example.com>"}}
}

// firings lists the exports the schedule's firings made.
func (ts *testServer) firings(id string) []apiv1.Job {
	ts.t.Helper()
	res := ts.Get("/api/v1/schedules/" + id + "/exports")
	var out struct {
		Exports []apiv1.Job `json:"exports"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(res.Body, &out) != nil {
		ts.t.Fatalf("firings: status %d: %s", res.StatusCode, res.Body)
	}
	return out.Exports
}

// "Last month's orders on the 1st at 06:00" in Berlin: the schedule previews its next
// runs with their dates resolved; at 06:00 on 1 December (05:00 UTC) it fires once, an
// export of 1 November to 1 December that names its schedule and time; and it moves on
// to 1 January.
func TestScheduleLastMonthsOrders(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now})
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")

	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_start(-1)","to":"month_start(0)"},
		"cron":"0 6 1 * *","timezone":"Europe/Berlin"}`, http.StatusCreated)
	first := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	if sc.NextRunAt == nil || !sc.NextRunAt.Equal(first) || len(sc.NextRuns) != 5 {
		t.Fatalf("created: next %v, %d runs; want %s and 5", sc.NextRunAt, len(sc.NextRuns), first)
	}
	for i, want := range [][2]string{{"2026-11-01", "2026-12-01"}, {"2026-12-01", "2027-01-01"}, {"2027-01-01", "2027-02-01"}} {
		if p := sc.NextRuns[i].Params; p["from"] != want[0] || p["to"] != want[1] {
			t.Errorf("run %d at %s: params %v, want from %s to %s", i, sc.NextRuns[i].At, p, want[0], want[1])
		}
	}
	// A relative date the report cannot take, or a period that ends before it starts.
	ts.Schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_begin(-1)","to":"month_start(0)"},
		"cron":"0 6 1 * *","timezone":"Europe/Berlin"}`, http.StatusUnprocessableEntity)
	ts.Schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_start(0)","to":"month_start(-1)"},
		"cron":"0 6 1 * *","timezone":"Europe/Berlin"}`, http.StatusUnprocessableEntity)

	if n := len(ts.firings(sc.ID)); n != 0 {
		t.Fatalf("%d firings before the time", n)
	}
	clock.Advance(first.Sub(clock.Now()) + 30*time.Second)
	var fired []apiv1.Job
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		fired = ts.firings(sc.ID)
		return len(fired) == 1, "firings: " + strconv.Itoa(len(fired))
	})
	j, _ := ts.WaitStatus(fired[0].ID, store.StatusSucceeded)
	if j.ScheduleID != sc.ID || j.ScheduledFor == nil || !j.ScheduledFor.Equal(first) ||
		j.Params["from"] != "2026-11-01" || j.Params["to"] != "2026-12-01" {
		t.Fatalf("the firing's export: schedule %q for %v, params %v", j.ScheduleID, j.ScheduledFor, j.Params)
	}
	// Its args carry the schedule's zone, which its deliveries' mail names.
	stored, err := ts.store.Get(context.Background(), j.ID)
	var args export.Args
	if err != nil || json.Unmarshal(stored.Args, &args) != nil || args.TimeZone != "Europe/Berlin" {
		t.Errorf("the firing's args name the zone %q (%v)", args.TimeZone, err)
	}
	// The export's page links to its schedule and says which time it was for.
	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if href, _ := apptest.TID(doc, "job-schedule").Find("a").Attr("href"); href != "/schedules/"+sc.ID {
		t.Errorf("the export's page links to %q, want its schedule", href)
	}
	if at, _ := apptest.TID(doc, "job-schedule").Find("time").Attr("datetime"); at != "2026-12-01T05:00:00Z" {
		t.Errorf("the export's page says it was for %q", at)
	}
	if apptest.TID(doc, "nav-schedules").Length() != 1 {
		t.Error("no Schedules in the navigation")
	}
	after := ts.Schedule("GET", "/api/v1/schedules/"+sc.ID, "", http.StatusOK)
	if next := time.Date(2027, 1, 1, 5, 0, 0, 0, time.UTC); after.NextRunAt == nil || !after.NextRunAt.Equal(next) ||
		after.LastFiredFor == nil || !after.LastFiredFor.Equal(first) {
		t.Fatalf("after firing: next %v, last fired for %v; want %s and %s", after.NextRunAt, after.LastFiredFor, next, first)
	}
	// However often the nodes look, that time does not fire again.
	for range 3 {
		if n, err := ts.sched.FireDue(context.Background()); err != nil || n != 0 {
			t.Fatalf("FireDue after the firing: %d, %v", n, err)
		}
	}
}

// Two nodes on one PostgreSQL, or MariaDB, database, both looking for due schedules all
// the time, and the test making both look at once besides: each of five times fires once.
func TestScheduleTwoNodesFireOnce(t *testing.T) {
	t.Run("PostgreSQL", func(t *testing.T) { scheduleTwoNodesFireOnce(t, pgtest.FreshSchema(t)) })
	t.Run("MariaDB", func(t *testing.T) { scheduleTwoNodesFireOnce(t, mysqltest.URL(t, mysqltest.FreshDatabase(t))) })
}

func scheduleTwoNodesFireOnce(t *testing.T, dsn string) {
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC))
	n1 := newTestServer(t, testOpts{Store: dsn, Node: "n1", Now: clock.Now, Idle: true})
	n2 := newTestServer(t, testOpts{Store: dsn, Node: "n2", Now: clock.Now, Idle: true})
	sc := n1.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"* * * * *","timezone":"UTC"}`, http.StatusCreated)
	for i := 1; i <= 5; i++ {
		clock.Advance(time.Minute)
		var wg sync.WaitGroup
		for _, n := range []*testServer{n1, n2, n1, n2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := n.sched.FireDue(context.Background()); err != nil {
					t.Errorf("FireDue: %v", err)
				}
			}()
		}
		wg.Wait()
		apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
			n := len(n2.firings(sc.ID))
			return n == i, "firings: " + strconv.Itoa(n)
		})
	}
	seen := map[time.Time]int{}
	for _, j := range n1.firings(sc.ID) {
		seen[*j.ScheduledFor]++
	}
	for at, n := range seen {
		if n != 1 {
			t.Errorf("%s fired %d times", at, n)
		}
	}
	if len(seen) != 5 {
		t.Errorf("%d times fired, want 5: %v", len(seen), seen)
	}
}
