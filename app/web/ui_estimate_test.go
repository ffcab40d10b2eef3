package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// The form's estimate, drawn with the page and as the fragment its script fetches: from
// runs with the same parameters, else the report's recent runs scaled by the date span,
// and the place the export would take in its queue.
func TestUIFormsEstimate(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "dated.sql", "-- title: Dated\n-- source: demo\n-- param: from date \"From\" = 2025-01-01\n"+
		"-- param: to date \"To\" = 2025-01-11\n-- param: rows int \"Rows\" = 10\nSELECT :from, :to, :rows;\n")
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return ts.Get("/exports/new?report=dated").StatusCode == http.StatusOK, "report not loaded"
	})
	estimate := func(query string) *goquery.Selection {
		t.Helper()
		doc := apptest.Page(t, ts.Get("/exports/new/estimate?"+query), http.StatusOK)
		if doc.Find("header.top").Length() != 0 {
			t.Error("the fragment carries the page layout")
		}
		e := apptest.TID(doc, "estimate")
		if e.Length() != 1 {
			t.Fatalf("%s: no estimate", query)
		}
		return e
	}
	text := func(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

	e := estimate("report=demo&rows=10&seconds=0&fail_first=0&file-format=xlsx")
	if got := text(apptest.TID(e, "estimate-none")); got != "No earlier runs to estimate from." {
		t.Errorf("no runs yet: %q", got)
	}
	if got := text(apptest.TID(e, "estimate-queue")); !strings.Contains(got, "start at once") {
		t.Errorf("queue with idle workers: %q", got)
	}

	for _, body := range []string{`{"report":"demo","params":{"rows":10}}`, `{"report":"demo","params":{"rows":10}}`,
		`{"report":"demo","params":{"rows":40}}`, `{"report":"dated","params":{}}`} {
		j := ts.create(body)
		ts.waitStatus(j.ID, store.StatusSucceeded)
	}
	e = estimate("report=demo&rows=10&seconds=0&fail_first=0&file-format=xlsx")
	if got := text(apptest.TID(e, "estimate-rows")); got != "about 10" {
		t.Errorf("same params rows %q", got)
	}
	if got := text(apptest.TID(e, "estimate-basis")); got != "Estimated from 2 recent runs with these parameters." {
		t.Errorf("same params basis %q", got)
	}
	if got := text(apptest.TID(e, "estimate-size")); !strings.Contains(got, "kB") {
		t.Errorf("size %q", got)
	}
	if apptest.TID(e, "estimate-time").Length() != 1 {
		t.Error("no run time")
	}
	e = estimate("report=demo&rows=25&seconds=0&fail_first=0&file-format=xlsx")
	if got := text(apptest.TID(e, "estimate-basis")); got != "Estimated from 3 recent runs of this report with other parameters." {
		t.Errorf("other params basis %q", got)
	}
	if got := text(apptest.TID(estimate("report=demo&rows=10&file-format=csv"), "estimate-none")); got == "" {
		t.Error("no csv run, yet an estimate")
	}
	// Twice the dates: twice the rows.
	e = estimate("report=dated&from=2025-01-01&to=2025-01-21&rows=10&file-format=xlsx")
	if got := text(apptest.TID(e, "estimate-rows")); got != "about 20" {
		t.Errorf("scaled rows %q", got)
	}
	if got := text(apptest.TID(e, "estimate-basis")); got != "Estimated from 1 run of this report, scaled to 20 days." {
		t.Errorf("scaled basis %q", got)
	}
	// A value the form will refuse gives no figures, only a note (issue 37): an estimate
	// for values that cannot run would mislead.
	e = estimate("report=dated&from=2025-01-01&to=nonsense&rows=10&file-format=xlsx")
	if apptest.TID(e, "estimate-refused").Length() != 1 || apptest.TID(e, "estimate-rows").Length() != 0 {
		t.Errorf("a wrong value: want the refusal note and no rows estimate, got %q", text(e))
	}

	// Both workers busy with slow exports and three more waiting: a new one would be
	// number 4.
	var slow []string
	for range 5 {
		slow = append(slow, ts.create(`{"report":"demo","params":{"rows":100,"seconds":60}}`).ID)
	}
	defer func() {
		for _, id := range slow {
			ts.cancel(id)
		}
	}()
	// The position is the store's count and the busy workers the engine's: a job the
	// store has handed a worker counts as busy once its handler starts, a moment after
	// the claim commits, so the two are waited for together.
	const want = "It would be number 4 in the exports queue: 3 exports waiting ahead of it, 2 of 2 workers busy."
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		e = estimate("report=demo&rows=1&file-format=xlsx")
		got := text(apptest.TID(e, "estimate-queue"))
		return e.AttrOr("data-position", "") == "4" && got == want, "position " + e.AttrOr("data-position", "") + ", queue text " + got + "; want 4, " + want
	})

	// Without a script, the form shows the estimate of the values it is drawn with.
	doc := apptest.Page(t, ts.Get("/exports/new?report=demo&rows=10"), http.StatusOK)
	if got := text(apptest.TID(doc, "estimate-rows")); got != "about 10" {
		t.Errorf("the form's own estimate: rows %q", got)
	}
	apptest.Page(t, ts.Get("/exports/new/estimate?report=nosuch"), http.StatusNotFound)
}
