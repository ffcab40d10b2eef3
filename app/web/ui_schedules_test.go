package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sheetq/app/schedules"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/storetest"
)

// scheduleFormValues is the form of "last month's orders on the 1st at 06:00 in Berlin".
func scheduleFormValues(action string) url.Values {
	return url.Values{"report": {"period"}, "param.from": {"month_start(-1)"}, "param.to": {"month_start(0)"},
		"param.rows": {"3"}, "file-format": {"xlsx"}, "cron": {"0 6 1 * *"}, "timezone": {"Europe/Berlin"},
		"email": {"ann@example.com, bob@example.com"}, "action": {action}}
}

// declaredHere lets Declare delete any declared schedule the file no longer declares,
// as a node on its own store does.
func declaredHere(string) bool { return true }

// createSchedule keeps in as a new schedule through the schedules service, as POST
// /api/v1/schedules does, requiring it to be accepted.
func (ts *testServer) createSchedule(in schedules.Input) store.Schedule {
	ts.t.Helper()
	sc, err := ts.sched.Create(context.Background(), in, "")
	if err != nil {
		ts.t.Fatalf("create schedule %+v: %v", in, err)
	}
	return sc
}

// schedule reads schedule id, which must exist, with its params decoded.
func (ts *testServer) schedule(id string) (store.Schedule, map[string]any) {
	ts.t.Helper()
	sc, err := ts.sched.Get(context.Background(), id)
	if err != nil {
		ts.t.Fatalf("get schedule %s: %v", id, err)
	}
	var params map[string]any
	if err := json.Unmarshal(sc.Params, &params); err != nil {
		ts.t.Fatalf("schedule %s params %s: %v", id, sc.Params, err)
	}
	return sc, params
}

// firings are the exports schedule id's firings made.
func (ts *testServer) firings(id string) []apiv1.Job {
	ts.t.Helper()
	sc, _ := ts.schedule(id)
	return ts.parts.Firings(sc)
}

// A schedule's page lists the exports its firings made, each linking to its page.
func TestUISchedulePageListsFirings(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now})
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")
	sc := ts.createSchedule(schedules.Input{Report: "period", Params: map[string]any{"from": "month_start(-1)", "to": "month_start(0)"},
		Cron: "0 6 1 * *", TimeZone: "Europe/Berlin"})
	clock.Advance(time.Date(2026, 12, 1, 5, 0, 30, 0, time.UTC).Sub(clock.Now()))
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return len(ts.firings(sc.ID)) == 1, "no firing yet"
	})
	job := ts.firings(sc.ID)[0].ID
	doc := apptest.Page(t, ts.Get("/schedules/"+sc.ID), http.StatusOK)
	f := apptest.TID(doc, "schedule-firing")
	if f.Length() != 1 {
		t.Fatalf("%d firings shown", f.Length())
	}
	if href, _ := f.Find("a").Attr("href"); href != "/exports/"+job {
		t.Errorf("firing links to %q, want /exports/%s", href, job)
	}
	if st, _ := apptest.TID(f, "schedule-firing-status").Attr("data-status"); st == "" {
		t.Errorf("firing without a status")
	}
	if iso, _ := f.Find("time").Attr("datetime"); iso != "2026-12-01T05:00:00Z" {
		t.Errorf("firing for %q", iso)
	}
}

// A schedule the config file declares is shown without Pause, Edit or Delete, saying
// where to change it; its edit form is a 409 page naming the file.
func TestUIScheduleDeclaredHasNoButtons(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	decl := schedules.Declared{ID: "kept-in-git", Input: schedules.Input{Report: "demo", Cron: "@daily", TimeZone: "UTC"}}
	if _, _, _, err := ts.sched.Declare(context.Background(), []schedules.Declared{decl}, declaredHere); err != nil {
		t.Fatal(err)
	}
	doc := apptest.Page(t, ts.Get("/schedules"), http.StatusOK)
	if apptest.TID(doc, "schedule-declared").Length() != 1 || apptest.TID(doc, "pause-button").Length() != 0 {
		t.Errorf("list: a declared schedule has a Pause button")
	}
	doc = apptest.Page(t, ts.Get("/schedules/kept-in-git"), http.StatusOK)
	if apptest.TID(doc, "schedule-declared-notice").Length() != 1 || apptest.TID(doc, "edit-button").Length() != 0 ||
		apptest.TID(doc, "delete-button").Length() != 0 || apptest.TID(doc, "pause-button").Length() != 0 {
		t.Errorf("page: a declared schedule has buttons")
	}
	doc = apptest.Page(t, ts.Get("/schedules/kept-in-git/edit"), http.StatusConflict)
	if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, "sheetq.toml") {
		t.Errorf("edit: %q", msg)
	}
}

// Every wrong parameter is marked beside its field at once, not only the first the
// report's check refuses, with every value kept.
func TestUIScheduleMarksEveryWrongParam(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "two.sql", "-- title: Two\n-- source: demo\n-- param: a int \"A\"\n-- param: b number \"B\"\n"+
		"-- param: c date \"C\"\nSELECT :a, :b, :c;\n")
	ts.WaitReport("two")
	form := url.Values{"report": {"two"}, "param.a": {"abc"}, "param.b": {"NaN"}, "param.c": {"month_start(-1)"},
		"cron": {"0 6 * * *"}, "timezone": {"UTC"}, "action": {"save"}}
	doc := apptest.Page(t, ts.PostForm("/schedules", form, nil), http.StatusUnprocessableEntity)
	for name, want := range map[string]string{"a": "integer", "b": "number"} {
		if e := apptest.TID(doc, "error-param."+name).Text(); !strings.Contains(e, want) {
			t.Errorf("error beside %s: %q", name, e)
		}
		if v := apptest.TID(doc, "param-param."+name).AttrOr("value", ""); v != form.Get("param."+name) {
			t.Errorf("%s kept as %q", name, v)
		}
	}
	if apptest.TID(doc, "error-param.c").Length() != 0 {
		t.Errorf("a right parameter is marked: %q", apptest.TID(doc, "error-param.c").Text())
	}
	// The preview fragment names both too.
	form.Del("action")
	doc = apptest.Page(t, ts.PostForm("/schedules/preview", form, nil), http.StatusOK)
	if e := apptest.TID(doc, "preview-error").Text(); !strings.Contains(e, "a: ") || !strings.Contains(e, "b: ") {
		t.Errorf("preview error %q", e)
	}
}

// A form posted with an action that is none of its buttons (Save, Preview, Use this
// report) saves nothing and says so, instead of creating the schedule.
func TestUIScheduleUnknownActionSavesNothing(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")
	form := scheduleFormValues("PREVIEW")
	form.Del("email") // no relay here
	doc := apptest.Page(t, ts.PostForm("/schedules", form, nil), http.StatusBadRequest)
	if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, `"PREVIEW"`) || !strings.Contains(msg, "nothing was saved") {
		t.Errorf("page %q", msg)
	}
	if list, err := ts.sched.List(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("%d schedules (%v)", len(list), err)
	}
	// Without an action (a script's form) it saves, as Save does.
	form.Del("action")
	if res := ts.PostForm("/schedules", form, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("without an action: %d %s", res.StatusCode, res.Body)
	}
}

// The preview box names each wrong field once: a message that already starts with the
// field's name (the time zone's) or names its parameter (`Param "rows": ...`) does not
// get the name again in front.
func TestUISchedulePreviewNamesEachFieldOnce(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")
	f := scheduleFormValues("")
	f.Set("timezone", "Local")
	f.Set("param.rows", "abc")
	doc := apptest.Page(t, ts.PostForm("/schedules/preview", f, nil), http.StatusOK)
	e := apptest.TID(doc, "preview-error").Text()
	if !strings.Contains(e, "Time zone: Local") || strings.Contains(e, "Time zone: Time zone") {
		t.Errorf("time zone in the preview error: %q", e)
	}
	f.Set("timezone", "UTC")
	doc = apptest.Page(t, ts.PostForm("/schedules/preview", f, nil), http.StatusOK)
	if e := apptest.TID(doc, "preview-error").Text(); !strings.Contains(e, "rows: must be an integer") || strings.Contains(strings.ToLower(e), `param "rows"`) {
		t.Errorf("rows in the preview error: %q", e)
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
		doc := apptest.Page(t, ts.PostForm("/schedules/kept-in-git/"+action, url.Values{"confirm": {"yes"}}, nil), http.StatusConflict)
		if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, "sheetq.toml") {
			t.Errorf("%s: page says %q", action, msg)
		}
	}
}

// The edit form, open while someone pauses the schedule elsewhere, saves its fields
// without undoing the pause; ticking or clearing the box still pauses or resumes.
func TestFormEditKeepsAPauseMadeMeanwhile(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	sc := ts.createSchedule(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "0 6 * * *", TimeZone: "UTC"})
	loc := "/schedules/" + sc.ID
	doc := apptest.Page(t, ts.Get(loc+"/edit"), http.StatusOK)
	was, _ := doc.Find(`input[name="paused_was"]`).Attr("value")
	if was != "false" {
		t.Fatalf("the edit form carries paused_was %q, want false", was)
	}
	if _, err := ts.sched.SetPaused(context.Background(), sc.ID, true); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"report": {"demo"}, "param.rows": {"2"}, "file-format": {"xlsx"}, "cron": {"0 7 * * *"},
		"timezone": {"UTC"}, "paused_was": {was}, "action": {"save"}}
	save := func(form url.Values) (store.Schedule, map[string]any) {
		t.Helper()
		if res := ts.PostForm(loc+"/edit", form, nil); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("save: %d: %s", res.StatusCode, res.Body)
		}
		return ts.schedule(sc.ID)
	}
	if got, params := save(form); !got.Paused || params["rows"] != float64(2) {
		t.Fatalf("after the form's save: paused %v, params %v; want the pause kept and rows 2", got.Paused, params)
	}
	form.Set("paused_was", "true") // the form shown now: paused, and the box cleared
	if got, _ := save(form); got.Paused {
		t.Fatal("clearing the box did not resume")
	}
	form.Set("paused_was", "false")
	form.Set("paused", "true")
	if got, _ := save(form); !got.Paused {
		t.Fatal("ticking the box did not pause")
	}
}
