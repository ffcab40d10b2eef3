package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/app/schedules"
	"sheetq/internal/apiv1"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/storetest"
	"sheetq/store/storetest/pgtest"
)

// monthReport is "orders in a period": a pair of dates, the end after the start.
const monthReport = `-- title: Orders in a period
-- source: demo
-- param: from date "From"
-- param: to date "To" after=from
-- param: rows int "Rows" = 3
SELECT :from, :to, :rows;
`

// relayConfig is a config file with an [smtp] relay, which saving a schedule that
// emails needs; the tests that use it send no mail.
func relayConfig() FileConfig {
	return FileConfig{SMTP: deliver.SMTP{Host: "smtp.example.com", From: "sheetq <reports@example.com>"}}
}

type scheduleAnswer struct {
	ID           string         `json:"id"`
	Params       map[string]any `json:"params"`
	Paused       bool           `json:"paused"`
	NextRunAt    *time.Time     `json:"next_run_at"`
	LastFiredFor *time.Time     `json:"last_fired_for"`
	NextRuns     []struct {
		At     time.Time      `json:"at"`
		Params map[string]any `json:"params"`
	} `json:"next_runs"`
}

func (ts *testServer) schedule(method, path, body string, want int) scheduleAnswer {
	ts.t.Helper()
	var r = strings.NewReader(body)
	res := ts.request(method, path, r, http.Header{"Content-Type": {"application/json"}})
	if res.StatusCode != want {
		ts.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, res.body)
	}
	var sc scheduleAnswer
	if want < 300 && len(res.body) > 0 {
		if err := json.Unmarshal(res.body, &sc); err != nil {
			ts.t.Fatalf("%s %s: %v: %s", method, path, err, res.body)
		}
	}
	return sc
}

// firings lists the exports the schedule's firings made.
func (ts *testServer) firings(id string) []apiv1.Job {
	ts.t.Helper()
	res := ts.get("/api/v1/schedules/" + id + "/exports")
	var out struct {
		Exports []apiv1.Job `json:"exports"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(res.body, &out) != nil {
		ts.t.Fatalf("firings: status %d: %s", res.StatusCode, res.body)
	}
	return out.Exports
}

// waitReport waits until the catalog serves report id.
func (ts *testServer) waitReport(id string) {
	ts.t.Helper()
	waitFor(ts.t, 10*time.Second, func() (bool, string) {
		res := ts.get("/exports/new?report=" + id)
		return res.StatusCode == http.StatusOK, id + " not loaded: " + strconv.Itoa(res.StatusCode)
	})
}

// "Last month's orders on the 1st at 06:00" in Berlin: the schedule previews its next
// runs with their dates resolved; at 06:00 on 1 December (05:00 UTC) it fires once, an
// export of 1 November to 1 December that names its schedule and time; and it moves on
// to 1 January.
func TestScheduleLastMonthsOrders(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now})
	writeReport(t, ts, "period.sql", monthReport)
	ts.waitReport("period")

	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_start(-1)","to":"month_start(0)"},
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
	ts.schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_begin(-1)","to":"month_start(0)"},
		"cron":"0 6 1 * *","timezone":"Europe/Berlin"}`, http.StatusUnprocessableEntity)
	ts.schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_start(0)","to":"month_start(-1)"},
		"cron":"0 6 1 * *","timezone":"Europe/Berlin"}`, http.StatusUnprocessableEntity)

	if n := len(ts.firings(sc.ID)); n != 0 {
		t.Fatalf("%d firings before the time", n)
	}
	clock.Advance(first.Sub(clock.Now()) + 30*time.Second)
	var fired []apiv1.Job
	waitFor(t, 10*time.Second, func() (bool, string) {
		fired = ts.firings(sc.ID)
		return len(fired) == 1, "firings: " + strconv.Itoa(len(fired))
	})
	j, _ := ts.waitStatus(fired[0].ID, store.StatusSucceeded)
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
	doc := page(t, ts.get("/exports/"+j.ID), http.StatusOK)
	if href, _ := tid(doc, "job-schedule").Find("a").Attr("href"); href != "/schedules/"+sc.ID {
		t.Errorf("the export's page links to %q, want its schedule", href)
	}
	if at, _ := tid(doc, "job-schedule").Find("time").Attr("datetime"); at != "2026-12-01T05:00:00Z" {
		t.Errorf("the export's page says it was for %q", at)
	}
	if tid(doc, "nav-schedules").Length() != 1 {
		t.Error("no Schedules in the navigation")
	}
	after := ts.schedule("GET", "/api/v1/schedules/"+sc.ID, "", http.StatusOK)
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

// Down for three days: the schedule fires once, for the latest missed time, and moves
// on to its next time after now. Paused, it does not fire; resumed, it counts from then.
func TestScheduleCatchUpAndPause(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now, Idle: true})
	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":2},"cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)
	ts.sched.Stop()                           // the test fires by hand: no loop between the clock's moves
	clock.Advance(3*24*time.Hour + time.Hour) // 4 December 13:00: 2, 3 and 4 December missed
	if n, err := ts.sched.FireDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("FireDue after downtime: %d, %v; want 1", n, err)
	}
	fired := ts.firings(sc.ID)
	if len(fired) != 1 || fired[0].ScheduledFor == nil || !fired[0].ScheduledFor.Equal(time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("firings after downtime: %+v; want one, for 4 December 06:00", fired)
	}
	got := ts.schedule("GET", "/api/v1/schedules/"+sc.ID, "", http.StatusOK)
	if !got.NextRunAt.Equal(time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("next after catching up: %v", got.NextRunAt)
	}

	paused := ts.schedule("POST", "/api/v1/schedules/"+sc.ID+"/pause", "", http.StatusOK)
	if !paused.Paused || paused.NextRunAt != nil || len(paused.NextRuns) != 0 {
		t.Fatalf("paused: %+v", paused)
	}
	clock.Advance(2 * 24 * time.Hour) // 6 December 13:00
	if n, err := ts.sched.FireDue(context.Background()); err != nil || n != 0 {
		t.Fatalf("FireDue while paused: %d, %v", n, err)
	}
	resumed := ts.schedule("POST", "/api/v1/schedules/"+sc.ID+"/resume", "", http.StatusOK)
	if resumed.Paused || resumed.NextRunAt == nil || !resumed.NextRunAt.Equal(time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("resumed: %+v; want the next run on 7 December, nothing caught up", resumed)
	}
	if n := len(ts.firings(sc.ID)); n != 1 {
		t.Fatalf("%d firings after pause and resume, want still 1", n)
	}
}

// Two nodes on one PostgreSQL database, both looking for due schedules all the time,
// and the test making both look at once besides: each of five times fires once.
func TestScheduleTwoNodesFireOnce(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 0, 0, 30, 0, time.UTC))
	n1 := newTestServer(t, testOpts{Store: dsn, Node: "n1", Now: clock.Now, Idle: true})
	n2 := newTestServer(t, testOpts{Store: dsn, Node: "n2", Now: clock.Now, Idle: true})
	sc := n1.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"* * * * *","timezone":"UTC"}`, http.StatusCreated)
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
		waitFor(t, 10*time.Second, func() (bool, string) {
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

// The config file's schedules: created at the first start, left alone when unchanged
// (a missed time is still caught up), updated when changed, deleted when gone; the API
// refuses to change them, and a schedule made through the API is never touched.
func TestScheduleDeclaredInConfig(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now, Idle: true})
	ts.sched.Stop()
	ctx := context.Background()
	mine := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","cron":"@daily","timezone":"UTC","paused":true}`, http.StatusCreated)
	daily := schedules.Declared{ID: "daily-demo", Input: schedules.Input{Report: "demo",
		Params: map[string]any{"rows": 2}, Cron: "0 6 * * *", TimeZone: "UTC"}}
	if c, u, d, err := ts.sched.Declare(ctx, []schedules.Declared{daily}, declaredHere); err != nil || c != 1 || u != 0 || d != 0 {
		t.Fatalf("first start: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	clock.Advance(24 * time.Hour) // the 06:00 of 2 December is missed: the server was down
	if c, u, d, err := ts.sched.Declare(ctx, []schedules.Declared{daily}, declaredHere); err != nil || c+u+d != 0 {
		t.Fatalf("unchanged: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	if n, err := ts.sched.FireDue(ctx); err != nil || n != 1 {
		t.Fatalf("the missed time after a restart: fired %d, %v", n, err)
	}
	got := ts.schedule("GET", "/api/v1/schedules/daily-demo", "", http.StatusOK)
	if got.NextRunAt == nil || !got.NextRunAt.Equal(time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("after catching up: next %v", got.NextRunAt)
	}
	for _, call := range []struct{ method, path, body string }{
		{"PATCH", "/api/v1/schedules/daily-demo", `{"cron":"@hourly"}`},
		{"POST", "/api/v1/schedules/daily-demo/pause", ""},
		{"DELETE", "/api/v1/schedules/daily-demo", ""},
	} {
		res := ts.request(call.method, call.path, strings.NewReader(call.body), http.Header{"Content-Type": {"application/json"}})
		checkProblem(t, res, http.StatusConflict, "declared_in_config")
	}
	daily.Cron = "30 7 * * *"
	if c, u, d, err := ts.sched.Declare(ctx, []schedules.Declared{daily}, declaredHere); err != nil || u != 1 || c+d != 0 {
		t.Fatalf("changed: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	if got := ts.schedule("GET", "/api/v1/schedules/daily-demo", "", http.StatusOK); !got.NextRunAt.Equal(time.Date(2026, 12, 3, 7, 30, 0, 0, time.UTC)) {
		t.Fatalf("after the change: next %v", got.NextRunAt)
	}
	if _, _, _, err := ts.sched.Declare(ctx, []schedules.Declared{{ID: mine.ID, Input: daily.Input}}, declaredHere); err == nil {
		t.Fatal("a declared id that an API schedule holds was taken over")
	}
	// A wrong schedule refuses the whole file before anything is written: the new one
	// before it is not created, the changed one not updated.
	weekly := schedules.Declared{ID: "weekly-demo", Input: daily.Input}
	changed := daily
	changed.Cron = "0 8 * * *"
	wrong := schedules.Declared{ID: "wrong", Input: schedules.Input{Report: "no-such-report", Cron: "0 6 * * *", TimeZone: "UTC"}}
	if c, u, d, err := ts.sched.Declare(ctx, []schedules.Declared{weekly, changed, wrong}, declaredHere); err == nil || c+u+d != 0 {
		t.Fatalf("a wrong schedule: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	ts.schedule("GET", "/api/v1/schedules/weekly-demo", "", http.StatusNotFound)
	if got := ts.schedule("GET", "/api/v1/schedules/daily-demo", "", http.StatusOK); !got.NextRunAt.Equal(time.Date(2026, 12, 3, 7, 30, 0, 0, time.UTC)) {
		t.Fatalf("daily-demo changed by a refused file: next %v", got.NextRunAt)
	}
	for _, id := range []string{"", "a b", "x/y", "-lead", strings.Repeat("x", 65), "daily-demo"} {
		decl := []schedules.Declared{daily, {ID: id, Input: daily.Input}}
		if _, _, _, err := ts.sched.Declare(ctx, decl, declaredHere); err == nil || !strings.Contains(err.Error(), "schedule id") {
			t.Errorf("schedule id %q: %v", id, err)
		}
	}
	if c, u, d, err := ts.sched.Declare(ctx, nil, declaredHere); err != nil || d != 1 || c+u != 0 {
		t.Fatalf("gone from the file: created %d, updated %d, deleted %d, %v", c, u, d, err)
	}
	ts.schedule("GET", "/api/v1/schedules/daily-demo", "", http.StatusNotFound)
	ts.schedule("GET", "/api/v1/schedules/"+mine.ID, "", http.StatusOK)
}

// A schedule that no longer checks still fires: its report was removed, so its export
// fails with the reason, where people look, instead of the firing vanishing. A
// schedule whose zone the server cannot read is paused, so that it shows as stopped.
func TestScheduleThatNoLongerChecks(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now})
	ts.sched.Stop()
	ctx := context.Background()
	writeReport(t, ts, "period.sql", monthReport)
	ts.waitReport("period")
	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"period","params":{"from":"month_start(-1)","to":"month_start(0)"},
		"cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)
	if err := os.Remove(filepath.Join(ts.dir.Reports(), "period.sql")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		res := ts.get("/exports/new?report=period")
		return res.StatusCode == http.StatusNotFound, "period still served: " + strconv.Itoa(res.StatusCode)
	})
	clock.Advance(24 * time.Hour)
	if n, err := ts.sched.FireDue(ctx); err != nil || n != 1 {
		t.Fatalf("FireDue: %d, %v", n, err)
	}
	fired := ts.firings(sc.ID)
	if len(fired) != 1 {
		t.Fatalf("%d firings, want 1", len(fired))
	}
	j, _ := ts.waitStatus(fired[0].ID, store.StatusFailed)
	if j.Error == nil || j.Error.Code != "unknown_report" || j.Params["from"] != "2026-11-01" {
		t.Fatalf("the firing of a removed report: %+v, error %+v", j, j.Error)
	}

	bad, err := ts.store.CreateSchedule(ctx, store.Schedule{ID: "no-zone", Report: "demo", Params: json.RawMessage(`{}`),
		Cron: "@daily", TimeZone: "Mars/Olympus_Mons", NextRunAt: clock.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ts.sched.FireDue(ctx); err != nil || n != 0 {
		t.Fatalf("FireDue with an unreadable zone: %d, %v", n, err)
	}
	if got, err := ts.store.GetSchedule(ctx, bad.ID); err != nil || !got.Paused || !got.NextRunAt.IsZero() {
		t.Fatalf("the schedule with an unreadable zone: %+v, %v; want paused", got, err)
	}
}

// The pages refuse to change a schedule the config file declares with a page that says
// where to change it (409), not a 500.
func TestScheduleDeclaredRefusedByThePages(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	decl := schedules.Declared{ID: "kept-in-git", Input: schedules.Input{Report: "demo", Cron: "@daily", TimeZone: "UTC"}}
	if _, _, _, err := ts.sched.Declare(context.Background(), []schedules.Declared{decl}, declaredHere); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"pause", "delete"} {
		doc := page(t, ts.postForm("/schedules/kept-in-git/"+action, url.Values{"confirm": {"yes"}}, nil), http.StatusConflict)
		if msg := tid(doc, "page-error").Text(); !strings.Contains(msg, "sheetq.toml") {
			t.Errorf("%s: page says %q", action, msg)
		}
	}
}

// A schedule with several wrong fields is refused once, naming every one: field and
// param are the first's, errors lists them all in the order checked, a delivery target
// by its place. What cannot be checked without a first firing (a wrong cron expression)
// is not.
func TestScheduleRefusalNamesEveryField(t *testing.T) {
	t.Parallel()
	ts := newDeliveryServer(t, relayConfig(), testOpts{Idle: true}, nil)
	type fieldError struct {
		Field, Param string
		Index        *int
		Detail       string
	}
	refuse := func(body string) (p struct {
		Code, Field, Param, Detail string
		Errors                     []fieldError
	}) {
		t.Helper()
		res := ts.request("POST", "/api/v1/schedules", strings.NewReader(body), http.Header{"Content-Type": {"application/json"}})
		if res.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(res.body, &p) != nil {
			t.Fatalf("%s: %d %s", body, res.StatusCode, res.body)
		}
		return p
	}
	fields := func(es []fieldError) string {
		var out []string
		for _, e := range es {
			f := e.Field
			if e.Index != nil {
				f += "[" + strconv.Itoa(*e.Index) + "]"
			}
			out = append(out, f)
		}
		return strings.Join(out, " ")
	}

	p := refuse(`{"report":"demo","params":{"rows":-1},"cron":"61 * * * *","timezone":"Mars/Base","format":"pdf",
		"deliver":[{"type":"email","to":["ann@example.com"]},{"type":"webhook","url":"ftp://x"},{"type":"email","to":["bob"]}]}`)
	if got, want := fields(p.Errors), "timezone cron deliver[1] deliver[2] format"; got != want || p.Code != "invalid_schedule" ||
		p.Field != "timezone" || p.Param != "" {
		t.Errorf("errors %q (field %q), want %q: %+v", got, p.Field, want, p)
	}
	if strings.Count(p.Detail, "; ") != 4 || strings.Contains(p.Detail, "\n") {
		t.Errorf("detail %q: want the five on one line", p.Detail)
	}

	p = refuse(`{"report":"demo","params":{"rows":-1,"colour":"red","bogus":1},"cron":"@daily","timezone":"UTC","format":"pdf"}`)
	if got, want := fields(p.Errors), "format params.bogus params.colour params.rows"; got != want {
		t.Fatalf("errors %q, want %q: %+v", got, want, p)
	}
	if e := p.Errors[1]; e.Param != "bogus" || !strings.Contains(e.Detail, "unknown parameter") {
		t.Errorf("an unknown parameter: %+v", e)
	}

	// No report: neither is any parameter checked, nor the first error's code lost.
	p = refuse(`{"report":"nope","params":{"rows":-1},"cron":"@daily","timezone":"UTC"}`)
	if got := fields(p.Errors); got != "report" || p.Code != "unknown_report" {
		t.Errorf("an unknown report: %q, code %q", got, p.Code)
	}
}

// A body that gives a key twice is refused whole (encoding/json would keep the last
// without a word); a null "deliver" is no targets, shown as []; and a PATCH's null,
// which would keep the value without a word, is refused with the field it names.
func TestScheduleBodyRepeatedKeysAndNulls(t *testing.T) {
	t.Parallel()
	ts := newDeliveryServer(t, relayConfig(), testOpts{Idle: true}, nil)
	h := http.Header{"Content-Type": {"application/json"}}
	send := func(method, path, body string) response {
		t.Helper()
		return ts.request(method, path, strings.NewReader(body), h)
	}
	for body, path := range map[string]string{
		`{"report":"demo","cron":"0 6 * * *","timezone":"UTC","cron":"0 7 * * *"}`:                                        `"cron"`,
		`{"report":"demo","cron":"0 6 * * *","timezone":"UTC","Cron":"0 7 * * *"}`:                                        `"Cron"`,
		`{"report":"demo","cron":"@daily","timezone":"UTC","params":{"rows":1,"rows":2}}`:                                 `"params.rows"`,
		`{"report":"demo","cron":"@daily","timezone":"UTC","deliver":[{"type":"email","to":["a@x.io"],"to":["b@x.io"]}]}`: `"deliver[0].to"`,
	} {
		p := checkProblem(t, send("POST", "/api/v1/schedules", body), http.StatusBadRequest, "malformed_json")
		if d, _ := p["detail"].(string); !strings.Contains(d, path) {
			t.Errorf("%s: detail %q does not name %s", body, d, path)
		}
	}
	var list struct{ Schedules []json.RawMessage }
	if res := ts.get("/api/v1/schedules"); json.Unmarshal(res.body, &list) != nil || len(list.Schedules) != 0 {
		t.Fatalf("refused bodies saved schedules: %s", res.body)
	}

	// A null parameter is one not given, as in an export request: the schedule keeps no
	// null and its next runs show none (an unknown name is still refused).
	withNull := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":2,"seconds":null},"cron":"@daily","timezone":"UTC"}`, http.StatusCreated)
	if _, kept := withNull.Params["seconds"]; kept || len(withNull.NextRuns) == 0 {
		t.Errorf(`"seconds": null saved as %+v`, withNull)
	}
	for _, run := range withNull.NextRuns {
		if _, shown := run.Params["seconds"]; shown || run.Params["rows"] != float64(2) {
			t.Errorf(`"seconds": null shown in a next run: %+v`, run.Params)
		}
	}
	checkProblem(t, send("POST", "/api/v1/schedules/preview", `{"report":"demo","params":{"nosuch":null},"cron":"@daily","timezone":"UTC"}`),
		http.StatusUnprocessableEntity, "invalid_schedule")
	ts.schedule("DELETE", "/api/v1/schedules/"+withNull.ID, "", http.StatusNoContent)

	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":2},"cron":"@daily","timezone":"UTC","deliver":null}`, http.StatusCreated)
	var shown struct{ Deliver json.RawMessage }
	if res := ts.get("/api/v1/schedules/" + sc.ID); json.Unmarshal(res.body, &shown) != nil || string(shown.Deliver) != "[]" {
		t.Errorf(`"deliver": null shows as %s, want []`, shown.Deliver)
	}

	// A schedule saved with "deliver": null before that was read as none shows [] too.
	old, err := ts.sched.Create(context.Background(), schedules.Input{Report: "demo", Cron: "@daily", TimeZone: "UTC",
		Deliver: json.RawMessage("null")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if res := ts.get("/api/v1/schedules/" + old.ID); json.Unmarshal(res.body, &shown) != nil || string(shown.Deliver) != "[]" {
		t.Errorf(`a row saved with "deliver": null shows it as %s, want []`, shown.Deliver)
	}

	p := "/api/v1/schedules/" + sc.ID
	checkProblem(t, send("PATCH", p, `{"params":{"rows":3,"rows":4}}`), http.StatusBadRequest, "malformed_json")
	for _, field := range []string{"cron", "timezone", "report", "params", "deliver", "paused"} {
		prob := checkProblem(t, send("PATCH", p, `{"`+field+`":null}`), http.StatusUnprocessableEntity, "invalid_schedule")
		if prob["field"] != field {
			t.Errorf("PATCH %s null: field %v", field, prob["field"])
		}
	}
	after := ts.schedule("GET", p, "", http.StatusOK)
	if len(after.NextRuns) == 0 || after.NextRuns[0].Params["rows"] != float64(2) {
		t.Errorf("after the refused PATCHes: %+v", after)
	}
}

// The schedules' lists are sent whole: a limit, a cursor or a filter of the exports
// list is refused (400 bad_query) instead of ignored with a 200 of everything, and so
// is a query string that cannot be read, as the exports list does.
func TestScheduleListsRefuseQueryTheyIgnore(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"@daily","timezone":"UTC"}`, http.StatusCreated)
	for _, path := range []string{"/api/v1/schedules", "/api/v1/schedules/" + sc.ID + "/exports"} {
		for _, q := range []string{"?limit=1", "?cursor=x", "?report=demo", "?status=FAILED", "?limit=1&limit=2", "?a=%zz", "?a;b"} {
			p := checkProblem(t, ts.get(path+q), http.StatusBadRequest, "bad_query")
			t.Logf("%s%s: %v", path, q, p["detail"])
		}
		if res := ts.get(path + "?_=123"); res.StatusCode != http.StatusOK {
			t.Errorf("%s with a parameter it does not know: %d %s", path, res.StatusCode, res.body)
		}
	}
}

// An empty body says so, instead of "the body is not a valid schedule: EOF".
func TestScheduleEmptyBody(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"@daily","timezone":"UTC"}`, http.StatusCreated)
	for _, req := range [][2]string{{"POST", "/api/v1/schedules"}, {"POST", "/api/v1/schedules/preview"}, {"PATCH", "/api/v1/schedules/" + sc.ID}} {
		for _, body := range []string{"", " \n"} {
			p := checkProblem(t, ts.request(req[0], req[1], strings.NewReader(body), http.Header{"Content-Type": {"application/json"}}),
				http.StatusBadRequest, "malformed_json")
			if d, _ := p["detail"].(string); !strings.HasPrefix(d, "the body is empty") {
				t.Errorf("%s %s with %q: detail %q", req[0], req[1], body, d)
			}
		}
	}
}
