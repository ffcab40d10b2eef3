package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/storetest"
)

// scheduleFormValues is the form of "last month's orders on the 1st at 06:00 in Berlin".
func scheduleFormValues(action string) url.Values {
	return url.Values{"report": {"period"}, "param.from": {"month_start(-1)"}, "param.to": {"month_start(0)"},
		"param.rows": {"3"}, "file-format": {"xlsx"}, "cron": {"0 6 1 * *"}, "timezone": {"Europe/Berlin"},
		"email": {"ann@example.com, bob@example.com"}, "action": {action}}
}

// The form previews, refuses wrong values beside their fields keeping every value,
// creates; the list and the schedule's page show it; Pause and Resume go back where
// they were pressed; Edit is filled in; Delete asks, then deletes.
func TestUISchedulesCreatePreviewPauseDelete(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ts := newDeliveryServer(t, relayConfig(), testOpts{Now: clock.Now, Idle: true}, nil)
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")

	doc := apptest.Page(t, ts.Get("/schedules"), http.StatusOK)
	if apptest.TID(doc, "schedules-empty").Length() != 1 {
		t.Fatalf("an empty list does not say so")
	}

	doc = apptest.Page(t, ts.Get("/schedules/new?report=period"), http.StatusOK)
	form := apptest.TID(doc, "schedule-form")
	if a, _ := form.Attr("action"); a != "/schedules" {
		t.Fatalf("form action %q", a)
	}
	if v, _ := apptest.TID(doc, "schedule-report").Find("option[selected]").Attr("value"); v != "period" {
		t.Errorf("report selected %q", v)
	}
	if l, _ := apptest.TID(doc, "param-param.from").Attr("list"); l != "relative-dates" {
		t.Errorf("a date parameter offers no relative dates (list %q)", l)
	}
	if v, _ := apptest.TID(doc, "param-param.rows").Attr("value"); v != "3" {
		t.Errorf("rows default %q", v)
	}
	if apptest.TID(doc, "cron-preset").Length() != 3 {
		t.Errorf("%d cron presets", apptest.TID(doc, "cron-preset").Length())
	}
	// A fresh form cannot run yet: its preview box says why, as the live preview does.
	if e := apptest.TID(doc, "preview-error").Text(); !strings.Contains(e, "from: ") {
		t.Errorf("fresh form's preview-error %q", e)
	}

	// Preview without JavaScript: the next five runs with their dates resolved.
	// In the viewer's zone (the browser's, which the pages' script keeps in a cookie).
	berlin := http.Header{"Cookie": {"tz=Europe/Berlin"}}
	doc = apptest.Page(t, ts.PostForm("/schedules", scheduleFormValues("preview"), berlin), http.StatusOK)
	runs := apptest.TID(doc, "schedule-run")
	if runs.Length() != 5 {
		t.Fatalf("%d runs previewed, want 5: %s", runs.Length(), apptest.TID(doc, "schedule-preview").Text())
	}
	if at := apptest.TID(runs.First(), "schedule-run-at").Text(); at != "Tue 2026-12-01 06:00" {
		t.Errorf("first run %q", at)
	}
	if z := apptest.TID(doc, "schedule-runs-zone").Text(); z != "Times in CET." {
		t.Errorf("runs' zone %q", z)
	}
	if iso, _ := apptest.TID(runs.First(), "schedule-run-at").Attr("datetime"); iso != "2026-12-01T05:00:00Z" {
		t.Errorf("first run datetime %q", iso)
	}
	if p := apptest.TID(runs.First(), "schedule-run-params").Text(); !strings.Contains(p, "from = 2026-11-01") ||
		!strings.Contains(p, "to = 2026-12-01") {
		t.Errorf("first run params %q", p)
	}
	if v, _ := apptest.TID(doc, "schedule-email").Attr("value"); v != "ann@example.com, bob@example.com" {
		t.Errorf("email kept as %q", v)
	}

	// The fragment the script fetches.
	doc = apptest.Page(t, ts.PostForm("/schedules/preview", scheduleFormValues(""), nil), http.StatusOK)
	if n := apptest.TID(doc, "schedule-run").Length(); n != 5 {
		t.Errorf("fragment: %d runs", n)
	}
	if doc.Find("header.top").Length() != 0 {
		t.Errorf("the fragment has the layout")
	}
	bad := scheduleFormValues("")
	bad.Set("cron", "0 25 * * *")
	doc = apptest.Page(t, ts.PostForm("/schedules/preview", bad, nil), http.StatusOK)
	if e := apptest.TID(doc, "preview-error").Text(); !strings.Contains(e, "Cron expression") {
		t.Errorf("fragment with a wrong cron: %q", e)
	}

	// Wrong values: each marked beside its field, all values kept.
	bad = scheduleFormValues("save")
	bad.Set("cron", "0 25 * * *")
	bad.Set("timezone", "Mars/Olympus")
	bad.Set("webhook", "ftp://x")
	doc = apptest.Page(t, ts.PostForm("/schedules", bad, nil), http.StatusUnprocessableEntity)
	for _, f := range []string{"cron", "timezone", "webhook"} {
		if apptest.TID(doc, "error-"+f).Length() != 1 {
			t.Errorf("no error beside %s", f)
		}
	}
	if v, _ := apptest.TID(doc, "schedule-cron-input").Attr("value"); v != "0 25 * * *" {
		t.Errorf("cron kept as %q", v)
	}
	if v, _ := apptest.TID(doc, "param-param.from").Attr("value"); v != "month_start(-1)" {
		t.Errorf("from kept as %q", v)
	}
	// A wrong cron expression, zone and email address at once: all three marked, from
	// the one refusal of the service.
	bad = scheduleFormValues("save")
	bad.Set("cron", "61 6 * * *")
	bad.Set("timezone", "Europe/Atlantis")
	bad.Set("email", "ann@example.com, not-an-address")
	doc = apptest.Page(t, ts.PostForm("/schedules", bad, nil), http.StatusUnprocessableEntity)
	for f, want := range map[string]string{"cron": "61", "timezone": "Europe/Atlantis", "email": "not-an-address"} {
		if e := apptest.TID(doc, "error-"+f).Text(); !strings.Contains(e, want) {
			t.Errorf("error beside %s: %q, want it to name %q", f, e, want)
		}
	}
	if v, _ := apptest.TID(doc, "schedule-email").Attr("value"); v != "ann@example.com, not-an-address" {
		t.Errorf("email kept as %q", v)
	}
	bad = scheduleFormValues("save")
	bad.Set("param.to", "month_start(-2)") // ends before it starts
	doc = apptest.Page(t, ts.PostForm("/schedules", bad, nil), http.StatusUnprocessableEntity)
	if apptest.TID(doc, "error-param.to").Length() != 1 {
		t.Errorf("no error beside the parameter to: %s", doc.Find("form").Text())
	}

	// Save: to the schedule's page.
	res := ts.PostForm("/schedules", scheduleFormValues("save"), nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d: %s", res.StatusCode, res.Body)
	}
	loc := res.Header.Get("Location")
	id := strings.TrimPrefix(loc, "/schedules/")
	if id == loc || id == "" {
		t.Fatalf("save went to %q", loc)
	}
	var api struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(ts.Get("/api/v1/schedules/"+id).Body, &api); err != nil ||
		api.Params["rows"] != 3.0 || api.Params["from"] != "month_start(-1)" {
		t.Errorf("the API shows the form's schedule's params as %v (%v)", api.Params, err)
	}
	doc = apptest.Page(t, ts.Get(loc), http.StatusOK)
	if n := apptest.TID(doc, "schedule-run").Length(); n != 5 {
		t.Errorf("page: %d next runs", n)
	}
	if d := apptest.TID(doc, "schedule-deliveries").Text(); !strings.Contains(d, "email to ann@example.com, bob@example.com") {
		t.Errorf("deliveries %q", d)
	}
	if iso, _ := apptest.TID(doc, "schedule-next").Find("time").Attr("datetime"); iso != "2026-12-01T05:00:00Z" {
		t.Errorf("next run %q", iso)
	}
	if apptest.TID(doc, "schedule-no-firings").Length() != 1 {
		t.Errorf("firings before any")
	}

	doc = apptest.Page(t, ts.Get("/schedules"), http.StatusOK)
	row := apptest.TID(doc, "schedule-row")
	if row.Length() != 1 || !strings.Contains(row.Text(), "on the 1st of each month at 06:00") ||
		!strings.Contains(row.Text(), "0 6 1 * *") || !strings.Contains(row.Text(), "Europe/Berlin") ||
		!strings.Contains(row.Text(), "Orders in a period") {
		t.Fatalf("list row: %q", row.Text())
	}

	// Pause from the list: back to the list, paused.
	res = ts.PostForm("/schedules/"+id+"/pause", url.Values{"back": {"list"}}, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/schedules" {
		t.Fatalf("pause: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	doc = apptest.Page(t, ts.Get("/schedules"), http.StatusOK)
	if p, _ := apptest.TID(doc, "schedule-row").Attr("data-paused"); p != "true" || apptest.TID(doc, "resume-button").Length() != 1 {
		t.Fatalf("after pause: paused %q", p)
	}
	res = ts.PostForm("/schedules/"+id+"/resume", url.Values{"back": {"page"}}, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != loc {
		t.Fatalf("resume: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	doc = apptest.Page(t, ts.Get(loc), http.StatusOK)
	if apptest.TID(doc, "pause-button").Length() != 1 {
		t.Errorf("after resume: no Pause button")
	}

	// Edit: filled in; a change saved.
	doc = apptest.Page(t, ts.Get(loc+"/edit"), http.StatusOK)
	if a, _ := apptest.TID(doc, "schedule-form").Attr("action"); a != loc+"/edit" {
		t.Errorf("edit form action %q", a)
	}
	for field, want := range map[string]string{"param-param.from": "month_start(-1)", "schedule-cron-input": "0 6 1 * *",
		"schedule-timezone": "Europe/Berlin", "schedule-email": "ann@example.com, bob@example.com", "param-param.rows": "3"} {
		if v, _ := apptest.TID(doc, field).Attr("value"); v != want {
			t.Errorf("edit %s = %q, want %q", field, v, want)
		}
	}
	change := scheduleFormValues("save")
	change.Set("cron", "0 6 * * 1")
	change.Set("email", "")
	res = ts.PostForm(loc+"/edit", change, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != loc {
		t.Fatalf("edit: %d to %q: %s", res.StatusCode, res.Header.Get("Location"), res.Body)
	}
	doc = apptest.Page(t, ts.Get(loc), http.StatusOK)
	if d := apptest.TID(doc, "schedule-deliveries").Text(); strings.Contains(d, "email") {
		t.Errorf("after edit, deliveries %q", d)
	}
	if !strings.Contains(doc.Text(), "Mondays at 06:00") {
		t.Errorf("after edit, no Mondays")
	}

	// Delete: a page asks; confirmed, gone, and the list says so.
	doc = apptest.Page(t, ts.PostForm(loc+"/delete", nil, nil), http.StatusOK)
	if apptest.TID(doc, "confirm-form").Length() != 1 {
		t.Fatalf("no confirmation asked")
	}
	res = ts.PostForm(loc+"/delete", url.Values{"confirm": {"yes"}}, nil)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/schedules?deleted=") {
		t.Fatalf("delete: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	apptest.Page(t, ts.Get(loc), http.StatusNotFound)
	doc = apptest.Page(t, ts.Get(res.Header.Get("Location")), http.StatusOK)
	if apptest.TID(doc, "schedule-deleted").Length() != 1 || apptest.TID(doc, "schedule-row").Length() != 0 {
		t.Errorf("list after delete")
	}

	// A form from another site is refused.
	res = ts.PostForm("/schedules", scheduleFormValues("save"), http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site form: %d", res.StatusCode)
	}
}

// A delivery that failed shows on the schedule's page, with its error: here a folder
// outside the allowed ones, which fails at its first attempt.
func TestUISchedulePageShowsAFailedDelivery(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	root, outside := t.TempDir(), t.TempDir()
	ts := newDeliveryServer(t, FileConfig{Deliveries: DeliveriesConfig{Folders: []string{root}}}, testOpts{Now: clock.Now}, nil)
	// Saving it is refused (422, field deliver); one kept in the store from before the
	// folder left [deliveries] folders fires and its delivery fails.
	ts.Schedule("POST", "/api/v1/schedules", `{"report":"demo","params":{"rows":5},"cron":"0 6 * * *","timezone":"UTC",
		"deliver":[{"type":"folder","path":`+strconvQuote(outside)+`}]}`, http.StatusUnprocessableEntity)
	kept, err := ts.store.CreateSchedule(context.Background(), store.Schedule{ID: "kept", Report: "demo",
		Params: json.RawMessage(`{"rows":5}`), Cron: "0 6 * * *", TimeZone: "UTC",
		Deliver:   json.RawMessage(`[{"type":"folder","path":` + strconvQuote(outside) + `}]`),
		NextRunAt: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	sc := apptest.ScheduleAnswer{ID: kept.ID}
	clock.Advance(time.Date(2026, 12, 1, 6, 0, 30, 0, time.UTC).Sub(clock.Now()))
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		doc := apptest.Page(t, ts.Get("/schedules/"+sc.ID), http.StatusOK)
		st, _ := apptest.TID(doc, "schedule-delivery").Attr("data-state")
		return st == "failed", "delivery state " + st
	})
	doc := apptest.Page(t, ts.Get("/schedules/"+sc.ID), http.StatusOK)
	if apptest.TID(doc, "schedule-delivery-failed").Length() != 1 {
		t.Errorf("no notice of the failed delivery")
	}
	if e := apptest.TID(doc, "schedule-delivery-error").Text(); !strings.Contains(e, "not under "+root) {
		t.Errorf("delivery error %q", e)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// Without [smtp] host, a schedule that emails is refused when saved, with the Email field
// marked; without [webhooks] secret, one that calls a webhook is, as an export request's
// webhook is. The API names each target by its place in deliver; once the secret is set,
// the webhook target is saved (the email one still needs a relay).
func TestUIScheduleDeliveryNeedsItsRelay(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"", testWebhookSecret} {
		ts := newTestServer(t, testOpts{Idle: true, Webhooks: webhook.Config{Secret: secret}})
		apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
		ts.WaitReport("period")

		doc := apptest.Page(t, ts.PostForm("/schedules", scheduleFormValues("save"), nil), http.StatusUnprocessableEntity)
		if e := apptest.TID(doc, "error-email").Text(); !strings.Contains(e, "[smtp] host") {
			t.Errorf("error beside the email field: %q", e)
		}
		if n := apptest.TID(doc, "form-error").Length(); n != 1 {
			t.Errorf("%d form errors", n)
		}

		res := ts.Request("POST", "/api/v1/schedules", strings.NewReader(`{"report":"demo","cron":"@daily","timezone":"UTC",
			"deliver":[{"type":"webhook","url":"https://hooks.example.com/x"},{"type":"email","to":["ann@example.com"]}]}`),
			http.Header{"Content-Type": {"application/json"}})
		var p struct {
			Code   string `json:"code"`
			Field  string `json:"field"`
			Errors []struct {
				Field  string `json:"field"`
				Index  *int   `json:"index"`
				Detail string `json:"detail"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(res.Body, &p); err != nil || res.StatusCode != http.StatusUnprocessableEntity ||
			p.Code != "invalid_schedule" || p.Field != "deliver" {
			t.Fatalf("secret %q: %d %s", secret, res.StatusCode, res.Body)
		}
		want := []string{"1: email delivery needs an SMTP relay"}
		if secret == "" {
			want = append([]string{"0: webhook delivery needs a signing secret: set [webhooks] secret"}, want...)
		}
		var got []string
		for _, e := range p.Errors {
			if e.Field == "deliver" && e.Index != nil {
				got = append(got, fmt.Sprintf("%d: %s", *e.Index, e.Detail))
			}
		}
		if len(got) != len(want) || len(p.Errors) != len(want) {
			t.Fatalf("secret %q: errors %q, want %q", secret, got, want)
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("secret %q: error %d %q, want %q...", secret, i, got[i], want[i])
			}
		}
		webhookOnly := `{"report":"demo","cron":"@daily","timezone":"UTC","deliver":[{"type":"webhook","url":"https://hooks.example.com/x"}]}`
		if secret == "" {
			ts.Schedule("POST", "/api/v1/schedules", webhookOnly, http.StatusUnprocessableEntity)
		} else {
			ts.Schedule("POST", "/api/v1/schedules", webhookOnly, http.StatusCreated)
		}
	}
}
