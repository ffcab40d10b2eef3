package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"sheetq/app/schedules"
	"sheetq/internal/apptest"
)

// Choosing another report on the edit form draws it again with the pause as the form
// was first shown, not as the box is now: resuming a paused schedule, then choosing
// another report and saving, resumes it.
func TestFormEditReportChangeKeepsThePauseAsShown(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	apptest.WriteReport(t, ts.dir, "period.sql", apptest.MonthReport)
	ts.WaitReport("period")
	sc := ts.createSchedule(schedules.Input{Report: "demo", Params: map[string]any{"rows": 1}, Cron: "0 6 * * *",
		TimeZone: "UTC", Paused: true})
	loc := "/schedules/" + sc.ID + "/edit"
	doc := apptest.Page(t, ts.Get(loc), http.StatusOK)
	if was, _ := doc.Find(`input[name="paused_was"]`).Attr("value"); was != "true" {
		t.Fatalf("paused_was %q, want true", was)
	}
	// The box cleared, then another report chosen.
	form := url.Values{"report": {"period"}, "param.rows": {"1"}, "file-format": {"xlsx"}, "cron": {"0 6 * * *"},
		"timezone": {"UTC"}, "paused_was": {"true"}, "action": {"report"}}
	doc = apptest.Page(t, ts.PostForm(loc, form, nil), http.StatusOK)
	if was, _ := doc.Find(`input[name="paused_was"]`).Attr("value"); was != "true" {
		t.Errorf("after choosing another report, paused_was %q, want true (as first shown)", was)
	}
	form = url.Values{"report": {"period"}, "param.from": {"month_start(-1)"}, "param.to": {"month_start(0)"},
		"file-format": {"xlsx"}, "cron": {"0 6 * * *"}, "timezone": {"UTC"}, "action": {"save"}}
	form.Set("paused_was", doc.Find(`input[name="paused_was"]`).AttrOr("value", ""))
	if res := ts.PostForm(loc, form, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", res.StatusCode, res.Body)
	}
	if got, _ := ts.schedule(sc.ID); got.Paused {
		t.Error("the schedule is still paused: the cleared box was lost with the change of report")
	}
}
