package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/app/schedules"
	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/storetest"
)

// Every page writes its times in the viewer's zone (the "tz" cookie that the pages'
// script sets from the browser's), by the zone's short name, once per place: a table, a
// list or a timeline names it once, not on each row; a moment inside a sentence (a
// retry's "next try at", a recovery's "last heartbeat") follows the same rule; and no
// page shows a time in UTC, or an RFC 3339 stamp, to people (issue 37, item 1).
func TestUITimesInTheViewersZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 7 December 2026, 00:19:53 UTC: 01:19 in Berlin, 19:19 the day before in New York.
	clock := storetest.ClockAt(time.Date(2026, 12, 7, 0, 19, 53, 0, time.UTC))
	ts := newTestServer(t, testOpts{Now: clock.Now})

	// A schedule that has fired once (its page lists the export it made).
	sc := ts.createSchedule(schedules.Input{Report: "demo", Params: map[string]any{"rows": 2}, Cron: "0 6 * * *", TimeZone: "Europe/Berlin"})
	ts.sched.Stop() // fired by hand below
	clock.Advance(24 * time.Hour)
	if n, err := ts.sched.FireDue(ctx); err != nil || n != 1 {
		t.Fatalf("FireDue: %d, %v; want 1", n, err)
	}
	fired := ts.firings(sc.ID)
	if len(fired) != 1 {
		t.Fatalf("firings %+v", fired)
	}
	ts.waitStatus(fired[0].ID, store.StatusSucceeded)

	// An export whose timeline has a retry (with its next try's time in the event's
	// data) and a recovery (with a time inside its reason's text, as the reaper writes it).
	j := ts.create(`{"report":"demo","params":{"rows":3}}`)
	ts.waitStatus(j.ID, store.StatusSucceeded)
	retryAt := time.Date(2026, 12, 8, 0, 19, 54, 0, time.UTC)
	heartbeat := time.Date(2026, 12, 8, 0, 17, 2, 0, time.UTC)
	appendEvent := func(typ string, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.store.AppendEvent(ctx, j.ID, typ, b); err != nil {
			t.Fatalf("append %s: %v", typ, err)
		}
	}
	appendEvent(store.EventAttemptFailed, store.FailureData{Code: "upstream", Message: "down", RetryAt: &retryAt})
	appendEvent(store.EventRecovered, store.LostData{Code: "lost",
		Message: "heartbeat lost (worker w1, last heartbeat " + heartbeat.Format(time.RFC3339) + ")"})

	pages := []string{
		"/", "/exports/" + j.ID, "/exports/" + j.ID + "/row", "/exports/" + fired[0].ID, "/exports/new",
		"/exports/new?report=demo", "/reports", "/queue", "/queue?range=day",
		"/schedules", "/schedules/" + sc.ID, "/schedules/new?report=demo", "/schedules/" + sc.ID + "/edit",
	}
	for _, tc := range []struct{ zone, short, other string }{
		{"Europe/Berlin", "CET", "EST"},
		{"America/New_York", "EST", "CET"},
	} {
		loc, err := time.LoadLocation(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		cookie := http.Header{"Cookie": {"tz=" + tc.zone}}
		for _, path := range pages {
			doc := apptest.Page(t, ts.Request("GET", path, nil, cookie), http.StatusOK)
			// The row fragment goes into the table, whose heading names the zone.
			checkPageTimes(t, tc.zone+" "+path, doc, loc, tc.short, tc.other, !strings.HasSuffix(path, "/row"))
		}
		// The schedule form's live preview, a fragment of its own.
		form := url.Values{"report": {"demo"}, "param.rows": {"2"}, "cron": {"0 6 * * *"}, "timezone": {"Europe/Berlin"}}
		h := http.Header{"Cookie": {"tz=" + tc.zone}, "Origin": {ts.URL}, "Sec-Fetch-Site": {"same-origin"}}
		res := ts.PostForm("/schedules/preview", form, h)
		doc := apptest.Page(t, res, http.StatusOK)
		checkPageTimes(t, tc.zone+" preview", doc, loc, tc.short, tc.other, true)
		if n := apptest.TID(doc, "schedule-run-at").Length(); n == 0 {
			t.Errorf("%s preview: no runs", tc.zone)
		}

		// The sentences of the timeline: from the event's data and from the reason's text.
		doc = apptest.Page(t, ts.Request("GET", "/exports/"+j.ID, nil, cookie), http.StatusOK)
		timeline := apptest.TID(doc, "timeline").Text()
		for _, want := range []string{
			"(next try at " + retryAt.In(loc).Format("2006-01-02 15:04:05") + ")",
			"last heartbeat " + heartbeat.In(loc).Format("2006-01-02 15:04:05") + ")",
		} {
			if !strings.Contains(timeline, want) {
				t.Errorf("%s: timeline lacks %q:\n%s", tc.zone, want, squeeze(timeline))
			}
		}
		if got := squeeze(apptest.TID(doc, "timeline-zone").Text()); got != "Times in "+tc.short+"." {
			t.Errorf("%s: timeline names its zone %q", tc.zone, got)
		}

		// A table names the zone once, in its heading.
		doc = apptest.Page(t, ts.Request("GET", "/", nil, cookie), http.StatusOK)
		if got := apptest.TID(doc, "list-zone").Text(); !strings.Contains(got, tc.short) {
			t.Errorf("%s: the exports table's heading %q does not name the zone", tc.zone, got)
		}

		// The throughput chart's axis is in the viewer's zone: over the last hour, its
		// clock times are of this hour or the one before, there.
		now := clock.Now()
		hours := map[string]bool{now.In(loc).Format("15"): true, now.Add(-time.Hour).In(loc).Format("15"): true}
		doc = apptest.Page(t, ts.Request("GET", "/queue", nil, cookie), http.StatusOK)
		labels := 0
		apptest.TID(doc, "chart-throughput").Find("text").Each(func(_ int, s *goquery.Selection) {
			if l := strings.TrimSpace(s.Text()); clockLabel.MatchString(l) {
				labels++
				if !hours[l[:2]] {
					t.Errorf("%s: throughput axis label %q is not in the viewer's zone (hours %v)", tc.zone, l, hours)
				}
			}
		})
		if labels == 0 {
			t.Errorf("%s: the throughput chart has no time labels", tc.zone)
		}
		if got := apptest.TID(doc, "chart-zone").Text(); !strings.Contains(got, tc.short) {
			t.Errorf("%s: the chart's legend %q does not name the zone", tc.zone, got)
		}
	}
}

var (
	clockLabel = regexp.MustCompile(`^\d{2}:\d{2}$`)
	// rfc3339Text is a machine's time shown to people.
	rfc3339Text = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}`)
	// utcTime is a clock time said to be in UTC (or GMT).
	utcTime = regexp.MustCompile(`\d{1,2}:\d{2}(?::\d{2})?\s*(?:UTC|GMT|Z)\b`)
	// ianaTime is a clock time named by an IANA zone instead of its short name.
	ianaTime = regexp.MustCompile(`\d{1,2}:\d{2}(?::\d{2})?\s+[A-Z][A-Za-z_]+/[A-Za-z_/]+`)
	// zoneWord is a short zone name that follows a clock time.
	zoneWord = regexp.MustCompile(`\d{2}:\d{2}(?::\d{2})?\s+([A-Z]{2,5}|[+-]\d{2}:\d{2})\b`)
)

// checkPageTimes checks a page's times against the viewer's zone, loc, whose short name
// is short (other is another zone's, which must not appear); whole is a page or a part
// of its own, which names the zone where it shows a time.
func checkPageTimes(t *testing.T, name string, doc *goquery.Document, loc *time.Location, short, other string, whole bool) {
	t.Helper()
	doc.Find("script, style").Remove()
	// What people read: the text, and the attributes that browsers show.
	var b strings.Builder
	b.WriteString(doc.Text())
	doc.Find("[title], [aria-label], [alt], [placeholder]").Each(func(_ int, s *goquery.Selection) {
		for _, a := range []string{"title", "aria-label", "alt", "placeholder"} {
			if v, ok := s.Attr(a); ok {
				b.WriteString(" " + v)
			}
		}
	})
	text := squeeze(b.String())
	for _, bad := range []struct {
		re   *regexp.Regexp
		what string
	}{{rfc3339Text, "an RFC 3339 time"}, {utcTime, "a time in UTC"}, {ianaTime, "a time named by its IANA zone"}} {
		if m := bad.re.FindAllString(text, 3); m != nil {
			t.Errorf("%s: %s shown: %q", name, bad.what, m)
		}
	}
	for _, m := range zoneWord.FindAllStringSubmatch(text, -1) {
		if m[1] != short {
			t.Errorf("%s: a time in zone %q, not the viewer's %s: %q", name, m[1], short, m[0])
		}
	}
	if regexp.MustCompile(`\b` + other + `\b`).MatchString(text) {
		t.Errorf("%s: names another zone, %s", name, other)
	}
	// Each <time> says its moment in the viewer's zone.
	times := doc.Find("time[datetime]")
	times.Each(func(_ int, s *goquery.Selection) {
		iso, _ := s.Attr("datetime")
		at, err := time.Parse(time.RFC3339Nano, iso)
		if err != nil {
			t.Errorf("%s: <time datetime=%q>: %v", name, iso, err)
			return
		}
		if want, got := at.In(loc).Format("2006-01-02 15:04"), s.Text(); !strings.Contains(got, want) {
			t.Errorf("%s: <time datetime=%q> says %q, want %s in the viewer's zone", name, iso, got, want)
		}
	})
	// A page that shows a time names the zone; a row, a timeline item or a run does not.
	if whole && times.Length() > 0 && !strings.Contains(text, short) {
		t.Errorf("%s: shows times but never names the zone %s", name, short)
	}
	for _, place := range []string{"export-row", "timeline-item", "schedule-run", "schedule-row", "schedule-firing"} {
		apptest.TID(doc, place).Each(func(_ int, s *goquery.Selection) {
			if got := s.Find("time").Text(); strings.Contains(got, short) {
				t.Errorf("%s: a %s names the zone on its own: %q", name, place, squeeze(got))
			}
		})
	}
}

// squeeze collapses runs of white space, as a browser shows them.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// A datetime parameter's field on the export form is in the viewer's zone too (issue 37,
// item 1): its default shows as Berlin's wall time for a Berlin viewer, the hint names
// the zone, and the time typed there is taken in it, so the export runs for the instant
// the viewer meant. A client of the API still sends RFC 3339, or a zoneless time as UTC.
func TestUIDatetimeFieldInTheViewersZone(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "since.sql", "-- title: Since\n-- source: demo\n-- param: since datetime \"Since\" = 2025-03-01T05:00:00Z\n-- param: rows int \"Rows\" = 1\nSELECT :since, :rows;\n")
	ts.WaitReport("since")
	h := http.Header{"Cookie": {"tz=Europe/Berlin"}, "Origin": {ts.URL}, "Sec-Fetch-Site": {"same-origin"}}
	doc := apptest.Page(t, ts.Request("GET", "/exports/new?report=since", nil, h), http.StatusOK)
	field := doc.Find(`input[name="since"]`)
	if v, _ := field.Attr("value"); v != "2025-03-01T06:00" {
		t.Errorf("the default shows as %q to a Berlin viewer, want 2025-03-01T06:00", v)
	}
	if hint := doc.Find(`[data-testid="export-form"]`).Text(); !strings.Contains(hint, "In CE") {
		t.Errorf("the form does not say the field's zone: %q", squeeze(hint))
	}
	form := apptest.FormOf(t, doc)
	form.Set("since", "2025-07-01T08:30")
	res := ts.PostForm("/exports", form, h)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit: %d: %s", res.StatusCode, res.Body)
	}
	id := strings.TrimPrefix(res.Header.Get("Location"), "/exports/")
	j := ts.job(id)
	if got := j.Params["since"]; got != "2025-07-01T06:30:00Z" {
		t.Errorf("08:30 typed by a Berlin viewer in July ran as %v, want 2025-07-01T06:30:00Z", got)
	}
}
