package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sheetq/app/schedules"
	"sheetq/internal/apptest"
	"sheetq/jobs"
	"sheetq/jobs/deliver"
)

// checkTargetsAsTheApp has ts's schedules check each target as the app's do (the
// deliveries' CheckTarget: a relay named, folder under root, the password read when
// the schedule is saved), where the harness checks a target's form alone.
func checkTargetsAsTheApp(t *testing.T, ts *testServer, root string) {
	t.Helper()
	h, err := deliver.New(deliver.Config{SMTP: deliver.SMTP{Host: "smtp.invalid", From: "sheetq <reports@example.com>"},
		Folders: []string{root}, Files: jobs.NewLocalFiles(ts.dir.Exports())})
	if err != nil {
		t.Fatal(err)
	}
	ts.sched.CheckTarget = h.CheckTarget // before any request: the HTTP exchange orders it
}

// storedTargets are schedule id's delivery targets as kept.
func (ts *testServer) storedTargets(id string) []deliver.Target {
	ts.t.Helper()
	sc, _ := ts.schedule(id)
	var out []deliver.Target
	if err := json.Unmarshal(sc.Deliver, &out); err != nil {
		ts.t.Fatalf("schedule %s deliver %s: %v", id, sc.Deliver, err)
	}
	return out
}

// passwordsOf are the password of each target, by type.
func passwordsOf(ts []deliver.Target) map[string]string {
	out := map[string]string{}
	for _, t := range ts {
		out[t.Type] = t.Password
	}
	return out
}

// The form's "Encrypt the file with the password in" field puts where the password is on
// the email and folder targets (not the webhook's); the password itself is refused
// beside the field and never shown back, nor is the variable's value; a variable not
// set is refused when the schedule is saved, beside the field.
func TestUIScheduleFormFilePassword(t *testing.T) {
	// Not parallel: t.Setenv.
	const secret = "correct horse battery staple"
	t.Setenv("SHEETQ_PASSWORD_X", secret)
	ts := newTestServer(t, testOpts{Idle: true})
	root := t.TempDir()
	checkTargetsAsTheApp(t, ts, root)
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")

	doc := apptest.Page(t, ts.Get("/schedules/new?report=period"), http.StatusOK)
	if apptest.TID(doc, "schedule-file-password").Length() != 1 || apptest.TID(doc, "schedule-password-required").Length() != 0 {
		t.Fatal("the new form: no password field, or it says it is required")
	}
	if help := doc.Find("#help-file-password").Text(); !strings.Contains(help, "never the password itself") ||
		!strings.Contains(help, "env:SHEETQ_PASSWORD_<NAME>") || !strings.Contains(help, "never carries the password") ||
		!strings.Contains(help, "encrypted") {
		t.Errorf("the field's help: %q", help)
	}

	form := scheduleFormValues("save")
	form.Set("webhook", "https://hooks.example.com/sheetq")
	form.Set("folder", root)
	form.Set("file-password", "env:SHEETQ_PASSWORD_X")
	form.Set("action", "preview")
	doc = apptest.Page(t, ts.PostForm("/schedules", form, nil), http.StatusOK)
	if v := apptest.TID(doc, "schedule-file-password").AttrOr("value", ""); v != "env:SHEETQ_PASSWORD_X" {
		t.Errorf("previewed: the field is %q", v)
	}
	form.Set("action", "save")
	form.Del("webhook") // no webhook secret here; a webhook never takes the password
	res := ts.PostForm("/schedules", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", res.StatusCode, res.Body)
	}
	id := strings.TrimPrefix(res.Header.Get("Location"), "/schedules/")
	got := passwordsOf(ts.storedTargets(id))
	if got[deliver.TypeEmail] != "env:SHEETQ_PASSWORD_X" || got[deliver.TypeFolder] != "env:SHEETQ_PASSWORD_X" {
		t.Errorf("stored passwords %v, want env:SHEETQ_PASSWORD_X on the email and the folder", got)
	}
	page := ts.Get("/schedules/" + id)
	doc = apptest.Page(t, page, http.StatusOK)
	if d := apptest.TID(doc, "schedule-deliveries").Text(); !strings.Contains(d, "ann@example.com, bob@example.com (encrypted)") ||
		!strings.Contains(d, root+" (encrypted)") {
		t.Errorf("the schedule's deliveries: %q", d)
	}
	if strings.Contains(string(page.Body), "SHEETQ_PASSWORD_X") || strings.Contains(string(page.Body), secret) {
		t.Error("the schedule's page says where the password is, or the password")
	}
	edit := ts.Get("/schedules/" + id + "/edit")
	doc = apptest.Page(t, edit, http.StatusOK)
	if v := apptest.TID(doc, "schedule-file-password").AttrOr("value", ""); v != "env:SHEETQ_PASSWORD_X" {
		t.Errorf("the edit form's field %q, want env:SHEETQ_PASSWORD_X", v)
	}
	if strings.Contains(string(edit.Body), secret) {
		t.Error("the edit form carries the password")
	}

	// The password itself: refused beside the field, and not sent back.
	const literal = "Tr0ub4dor&3 zurich"
	for _, action := range []string{"save", "preview"} {
		form.Set("action", action)
		form.Set("file-password", literal)
		res = ts.PostForm("/schedules", form, nil)
		doc = apptest.Page(t, res, http.StatusUnprocessableEntity)
		if e := apptest.TID(doc, "error-file-password").Text(); !strings.Contains(e, "never the password itself") {
			t.Errorf("%s: the field's error %q", action, e)
		}
		if n := apptest.TID(doc, "error-email").Length() + apptest.TID(doc, "error-folder").Length() + apptest.TID(doc, "error-deliver").Length(); n != 0 {
			t.Errorf("%s: the password's error is beside another field too", action)
		}
		if e := apptest.TID(doc, "preview-error").Text(); action == "preview" && !strings.Contains(e, "Password: ") {
			t.Errorf("preview box: %q", e)
		}
		// Escaped or not: the page has no trace of it.
		for _, s := range []string{literal, "Tr0ub4dor", url.QueryEscape(literal)} {
			if strings.Contains(string(res.Body), s) {
				t.Errorf("%s: the page sends the password back (%q)", action, s)
			}
		}
		if v := apptest.TID(doc, "schedule-file-password").AttrOr("value", "?"); v != "" {
			t.Errorf("%s: the field is drawn with %q", action, v)
		}
	}
	form.Del("action")
	res = ts.PostForm("/schedules/preview", form, nil)
	if e := apptest.TID(apptest.Page(t, res, http.StatusOK), "preview-error").Text(); !strings.Contains(e, "Password: ") ||
		strings.Contains(string(res.Body), "Tr0ub4dor") {
		t.Errorf("the live preview: %q", e)
	}

	// A variable that is not set: refused when saving, beside the field, kept as typed.
	form.Set("action", "save")
	form.Set("file-password", "env:SHEETQ_PASSWORD_NOT_SET_HERE")
	doc = apptest.Page(t, ts.PostForm("/schedules", form, nil), http.StatusUnprocessableEntity)
	if e := apptest.TID(doc, "error-file-password").Text(); !strings.Contains(e, "SHEETQ_PASSWORD_NOT_SET_HERE is not set") {
		t.Errorf("an unset variable: the field's error %q", e)
	}
	if v := apptest.TID(doc, "schedule-file-password").AttrOr("value", ""); v != "env:SHEETQ_PASSWORD_NOT_SET_HERE" {
		t.Errorf("an unset variable: the field is drawn with %q", v)
	}
	if list, err := ts.sched.List(t.Context()); err != nil || len(list) != 1 {
		t.Errorf("%d schedules (%v), want the one saved", len(list), err)
	}
}

// The edit form shows the email's password; when the API gave the folder another, the
// form says so and saving keeps each as it was unless the field is changed, which then
// applies to both (an empty field: to neither).
func TestUIScheduleEditKeepsTheFoldersOwnPassword(t *testing.T) {
	// Not parallel: t.Setenv.
	for _, name := range []string{"SHEETQ_PASSWORD_MAIL", "SHEETQ_PASSWORD_DISK", "SHEETQ_PASSWORD_BOTH"} {
		t.Setenv(name, "pw of "+name)
	}
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	root := t.TempDir()
	checkTargetsAsTheApp(t, ts, root)
	targets, _ := json.Marshal([]deliver.Target{
		{Type: deliver.TypeEmail, To: []string{"ann@example.com"}, Password: "env:SHEETQ_PASSWORD_MAIL"},
		{Type: deliver.TypeFolder, Path: root, Password: "env:SHEETQ_PASSWORD_DISK"}})
	sc := ts.createSchedule(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "0 6 * * *",
		TimeZone: "UTC", Deliver: targets})
	loc := "/schedules/" + sc.ID + "/edit"
	doc := apptest.Page(t, ts.Get(loc), http.StatusOK)
	if v := apptest.TID(doc, "schedule-file-password").AttrOr("value", ""); v != "env:SHEETQ_PASSWORD_MAIL" {
		t.Errorf("the field shows %q, want the email's", v)
	}
	if apptest.TID(doc, "schedule-password-own").Length() != 1 {
		t.Error("the form does not say the folder has its own password")
	}
	form := url.Values{"report": {"demo"}, "param.rows": {"1"}, "file-format": {"xlsx"}, "timezone": {"UTC"},
		"email": {apptest.TID(doc, "schedule-email").AttrOr("value", "")}, "folder": {apptest.TID(doc, "schedule-folder").AttrOr("value", "")},
		"paused_was": {"false"}}
	save := func(password string) map[string]string {
		t.Helper()
		form.Set("file-password", password)
		form.Set("cron", "0 7 * * *")
		form.Set("action", "save")
		if res := ts.PostForm(loc, form, nil); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("save with %q: %d\n%s", password, res.StatusCode, res.Body)
		}
		return passwordsOf(ts.storedTargets(sc.ID))
	}
	if got := save("env:SHEETQ_PASSWORD_MAIL"); got[deliver.TypeEmail] != "env:SHEETQ_PASSWORD_MAIL" ||
		got[deliver.TypeFolder] != "env:SHEETQ_PASSWORD_DISK" {
		t.Errorf("the field left as shown: %v, want each kept", got)
	}
	if got := save("env:SHEETQ_PASSWORD_BOTH"); got[deliver.TypeEmail] != "env:SHEETQ_PASSWORD_BOTH" ||
		got[deliver.TypeFolder] != "env:SHEETQ_PASSWORD_BOTH" {
		t.Errorf("the field changed: %v, want it on both", got)
	}
	doc = apptest.Page(t, ts.Get(loc), http.StatusOK)
	if apptest.TID(doc, "schedule-password-own").Length() != 0 {
		t.Error("the form says the folder has its own password, which it no longer has")
	}
	if got := save(""); got[deliver.TypeEmail] != "" || got[deliver.TypeFolder] != "" {
		t.Errorf("the field cleared: %v, want no password", got)
	}
}

// For a report that hands out its files only encrypted, the form says the field is
// needed for an email or a folder, and saving without it is refused beside it (422);
// a webhook alone needs none.
func TestUIScheduleEncryptRequiredNeedsThePassword(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "salaries.sql", secretReport)
	ts.WaitReport("salaries")
	doc := apptest.Page(t, ts.Get("/schedules/new?report=salaries"), http.StatusOK)
	if apptest.TID(doc, "schedule-password-required").Length() != 1 ||
		!strings.Contains(doc.Find(`label[for="sched-file-password"]`).Text(), "required for email and folder") {
		t.Error("the form does not say the password is required")
	}
	form := url.Values{"report": {"salaries"}, "param.rows": {"2"}, "file-format": {"xlsx"}, "cron": {"0 6 * * *"},
		"timezone": {"UTC"}, "email": {"ann@example.com"}, "folder": {"/srv/reports"}, "action": {"save"}}
	doc = apptest.Page(t, ts.PostForm("/schedules", form, nil), http.StatusUnprocessableEntity)
	if e := apptest.TID(doc, "error-file-password").Text(); !strings.Contains(e, "only encrypted") {
		t.Errorf("the field's error %q", e)
	}
	if apptest.TID(doc, "error-email").Length() != 0 || apptest.TID(doc, "error-folder").Length() != 0 {
		t.Error("the missing password is marked beside the email or the folder")
	}
	if list, err := ts.sched.List(context.Background()); err != nil || len(list) != 0 {
		t.Errorf("%d schedules (%v), want none", len(list), err)
	}
	form.Set("file-password", "env:SHEETQ_PASSWORD_SALARIES")
	if res := ts.PostForm("/schedules", form, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("with the field: %d\n%s", res.StatusCode, res.Body)
	}
}
