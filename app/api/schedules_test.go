package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"sheetq/app/schedules"
	"sheetq/internal/apptest"
)

// A schedule with several wrong fields is refused once, naming every one: field and
// param are the first's, errors lists them all in the order checked, a delivery target
// by its place. What cannot be checked without a first firing (a wrong cron expression)
// is not.
func TestScheduleRefusalNamesEveryField(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
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
		res := ts.Request("POST", "/api/v1/schedules", strings.NewReader(body), http.Header{"Content-Type": {"application/json"}})
		if res.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(res.Body, &p) != nil {
			t.Fatalf("%s: %d %s", body, res.StatusCode, res.Body)
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
	ts := newTestServer(t, testOpts{Idle: true})
	h := http.Header{"Content-Type": {"application/json"}}
	send := func(method, path, body string) apptest.Response {
		t.Helper()
		return ts.Request(method, path, strings.NewReader(body), h)
	}
	for body, path := range map[string]string{
		`{"report":"demo","cron":"0 6 * * *","timezone":"UTC","cron":"0 7 * * *"}`:                                        `"cron"`,
		`{"report":"demo","cron":"0 6 * * *","timezone":"UTC","Cron":"0 7 * * *"}`:                                        `"Cron"`,
		`{"report":"demo","cron":"@daily","timezone":"UTC","params":{"rows":1,"rows":2}}`:                                 `"params.rows"`,
		`{"report":"demo","cron":"@daily","timezone":"UTC","deliver":[{"type":"email","to":["a@x.io"],"to":["b@x.io"]}]}`: `"deliver[0].to"`,
	} {
		p := apptest.CheckProblem(t, send("POST", "/api/v1/schedules", body), http.StatusBadRequest, "malformed_json")
		if d, _ := p["detail"].(string); !strings.Contains(d, path) {
			t.Errorf("%s: detail %q does not name %s", body, d, path)
		}
	}
	var list struct{ Schedules []json.RawMessage }
	if res := ts.Get("/api/v1/schedules"); json.Unmarshal(res.Body, &list) != nil || len(list.Schedules) != 0 {
		t.Fatalf("refused bodies saved schedules: %s", res.Body)
	}

	// A null parameter is one not given, as in an export request: the schedule keeps no
	// null and its next runs show none (an unknown name is still refused).
	withNull := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":2,"seconds":null},"cron":"@daily","timezone":"UTC"}`, http.StatusCreated)
	if _, kept := withNull.Params["seconds"]; kept || len(withNull.NextRuns) == 0 {
		t.Errorf(`"seconds": null saved as %+v`, withNull)
	}
	for _, run := range withNull.NextRuns {
		if _, shown := run.Params["seconds"]; shown || run.Params["rows"] != float64(2) {
			t.Errorf(`"seconds": null shown in a next run: %+v`, run.Params)
		}
	}
	apptest.CheckProblem(t, send("POST", "/api/v1/schedules/preview", `{"report":"demo","params":{"nosuch":null},"cron":"@daily","timezone":"UTC"}`),
		http.StatusUnprocessableEntity, "invalid_schedule")
	ts.Schedule("DELETE", "/api/v1/schedules/"+withNull.ID, "", http.StatusNoContent)

	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":2},"cron":"@daily","timezone":"UTC","deliver":null}`, http.StatusCreated)
	var shown struct{ Deliver json.RawMessage }
	if res := ts.Get("/api/v1/schedules/" + sc.ID); json.Unmarshal(res.Body, &shown) != nil || string(shown.Deliver) != "[]" {
		t.Errorf(`"deliver": null shows as %s, want []`, shown.Deliver)
	}

	// A schedule saved with "deliver": null before that was read as none shows [] too.
	old, err := ts.sched.Create(context.Background(), schedules.Input{Report: "demo", Cron: "@daily", TimeZone: "UTC",
		Deliver: json.RawMessage("null")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if res := ts.Get("/api/v1/schedules/" + old.ID); json.Unmarshal(res.Body, &shown) != nil || string(shown.Deliver) != "[]" {
		t.Errorf(`a row saved with "deliver": null shows it as %s, want []`, shown.Deliver)
	}

	p := "/api/v1/schedules/" + sc.ID
	apptest.CheckProblem(t, send("PATCH", p, `{"params":{"rows":3,"rows":4}}`), http.StatusBadRequest, "malformed_json")
	for _, field := range []string{"cron", "timezone", "report", "params", "deliver", "paused"} {
		prob := apptest.CheckProblem(t, send("PATCH", p, `{"`+field+`":null}`), http.StatusUnprocessableEntity, "invalid_schedule")
		if prob["field"] != field {
			t.Errorf("PATCH %s null: field %v", field, prob["field"])
		}
	}
	after := ts.Schedule("GET", p, "", http.StatusOK)
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
	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"@daily","timezone":"UTC"}`, http.StatusCreated)
	for _, path := range []string{"/api/v1/schedules", "/api/v1/schedules/" + sc.ID + "/exports"} {
		for _, q := range []string{"?limit=1", "?cursor=x", "?report=demo", "?status=FAILED", "?limit=1&limit=2", "?a=%zz", "?a;b"} {
			p := apptest.CheckProblem(t, ts.Get(path+q), http.StatusBadRequest, "bad_query")
			t.Logf("%s%s: %v", path, q, p["detail"])
		}
		if res := ts.Get(path + "?_=123"); res.StatusCode != http.StatusOK {
			t.Errorf("%s with a parameter it does not know: %d %s", path, res.StatusCode, res.Body)
		}
	}
}

// An empty body says so, instead of "the body is not a valid schedule: EOF".
func TestScheduleEmptyBody(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":1},"cron":"@daily","timezone":"UTC"}`, http.StatusCreated)
	for _, req := range [][2]string{{"POST", "/api/v1/schedules"}, {"POST", "/api/v1/schedules/preview"}, {"PATCH", "/api/v1/schedules/" + sc.ID}} {
		for _, body := range []string{"", " \n"} {
			p := apptest.CheckProblem(t, ts.Request(req[0], req[1], strings.NewReader(body), http.Header{"Content-Type": {"application/json"}}),
				http.StatusBadRequest, "malformed_json")
			if d, _ := p["detail"].(string); !strings.HasPrefix(d, "the body is empty") {
				t.Errorf("%s %s with %q: detail %q", req[0], req[1], body, d)
			}
		}
	}
}

// A zone that only some hosts' zone files know ("right/UTC", a leap-second variant) is
// refused with 422 when a schedule is created or changed, whatever this host has, so that
// no node accepts a schedule that another cannot load and would pause (issue 36, 7e).
func TestScheduleRefusesHostOnlyZone(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	for _, zone := range []string{"right/UTC", "posix/Europe/Berlin"} {
		res := ts.Request("POST", "/api/v1/schedules",
			strings.NewReader(`{"report":"demo","cron":"@daily","timezone":"`+zone+`"}`), http.Header{"Content-Type": {"application/json"}})
		p := apptest.CheckProblem(t, res, http.StatusUnprocessableEntity, "invalid_schedule")
		if p["field"] != "timezone" || !strings.Contains(p["detail"].(string), `unknown time zone "`+zone+`"`) {
			t.Errorf("create in %s: %s", zone, res.Body)
		}
	}
	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","cron":"@daily","timezone":"Etc/UTC"}`, http.StatusCreated)
	res := ts.Request("PATCH", "/api/v1/schedules/"+sc.ID, strings.NewReader(`{"timezone":"right/UTC"}`),
		http.Header{"Content-Type": {"application/json"}})
	if p := apptest.CheckProblem(t, res, http.StatusUnprocessableEntity, "invalid_schedule"); p["field"] != "timezone" {
		t.Errorf("change to right/UTC: %s", res.Body)
	}
	ts.Schedule("PATCH", "/api/v1/schedules/"+sc.ID, `{"timezone":"UTC"}`, http.StatusOK)
}

// A pause answers the schedule paused, with no next run and no next runs shown; a
// resume answers it running again, its next run counted from now. (Which firings a
// pause holds back is tested in app/schedules.)
func TestSchedulePauseAndResumeAnswers(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":2},"cron":"0 6 * * *","timezone":"UTC"}`, http.StatusCreated)
	paused := ts.Schedule("POST", "/api/v1/schedules/"+sc.ID+"/pause", "", http.StatusOK)
	if !paused.Paused || paused.NextRunAt != nil || len(paused.NextRuns) != 0 {
		t.Fatalf("paused: %+v", paused)
	}
	resumed := ts.Schedule("POST", "/api/v1/schedules/"+sc.ID+"/resume", "", http.StatusOK)
	if resumed.Paused || resumed.NextRunAt == nil || len(resumed.NextRuns) == 0 {
		t.Fatalf("resumed: %+v", resumed)
	}
}

// The API refuses to change, pause or delete a schedule the config file declares with
// 409 declared_in_config; reading it is fine.
func TestScheduleDeclaredRefusedByTheAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	decl := schedules.Declared{ID: "daily-demo", Input: schedules.Input{Report: "demo",
		Params: map[string]any{"rows": 2}, Cron: "0 6 * * *", TimeZone: "UTC"}}
	if _, _, _, err := ts.sched.Declare(context.Background(), []schedules.Declared{decl}, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct{ method, path, body string }{
		{"PATCH", "/api/v1/schedules/daily-demo", `{"cron":"@hourly"}`},
		{"POST", "/api/v1/schedules/daily-demo/pause", ""},
		{"DELETE", "/api/v1/schedules/daily-demo", ""},
	} {
		res := ts.Request(call.method, call.path, strings.NewReader(call.body), http.Header{"Content-Type": {"application/json"}})
		apptest.CheckProblem(t, res, http.StatusConflict, "declared_in_config")
	}
	if got := ts.Schedule("GET", "/api/v1/schedules/daily-demo", "", http.StatusOK); got.Paused || got.NextRunAt == nil {
		t.Fatalf("the declared schedule after the refusals: %+v", got)
	}
}
