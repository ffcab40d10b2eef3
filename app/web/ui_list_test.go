package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// rowOf is the list's row of export id.
func rowOf(doc *goquery.Document, id string) *goquery.Selection {
	return doc.Find(`[data-testid="export-row"][data-id="` + id + `"]`)
}

// The list tells exports apart: the report's title, parameters, format, size and run
// time; the export's page is headed by the title; every time says UTC without script.
func TestUIListTellsExportsApart(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	a := ts.create(`{"report":"demo","params":{"rows":1234}}`)
	b := ts.create(`{"report":"demo","params":{"rows":7},"format":"csv"}`)
	ts.waitStatus(a.ID, store.StatusSucceeded)
	ts.waitStatus(b.ID, store.StatusSucceeded)

	doc := apptest.Page(t, ts.Get("/"), http.StatusOK)
	ra, rb := rowOf(doc, a.ID), rowOf(doc, b.ID)
	if got := apptest.TID(ra, "job-link").Text(); got != "Demo rows" {
		t.Errorf("row title %q, want the report's title", got)
	}
	if got := apptest.TID(ra, "row-params").Text(); !strings.Contains(got, "rows 1234") {
		t.Errorf("row params %q", got)
	}
	if title, _ := apptest.TID(ra, "row-params").Attr("title"); !strings.Contains(title, "rows 1234") {
		t.Errorf("row params title %q", title)
	}
	if apptest.TID(ra, "row-format").Length() != 0 || apptest.TID(rb, "row-format").Text() != "CSV" {
		t.Errorf("format: xlsx %q, csv %q; want nothing for xlsx, CSV for csv", apptest.TID(ra, "row-format").Text(), apptest.TID(rb, "row-format").Text())
	}
	if got := apptest.TID(ra, "row-size").Text(); !regexp.MustCompile(`^[0-9.]+ (bytes|kB|MB)$`).MatchString(got) {
		t.Errorf("row size %q", got)
	}
	if got := apptest.TID(ra, "row-ran").Text(); !regexp.MustCompile(`^[0-9]+ (ms|s)$`).MatchString(got) {
		t.Errorf("row ran %q", got)
	}
	if apptest.TID(ra, "row-by").Length() != 0 {
		t.Error("without tokens, no one is named as having asked")
	}
	if got := apptest.TID(doc, "filter-report").Find(`option[value="demo"]`).Text(); got != "Demo rows" {
		t.Errorf("report filter's option %q, want the title", got)
	}
	// Times: RFC 3339 in UTC in the attribute; the text in the viewer's zone (UTC without
	// the browser's), which the table's heading names once (issue 37).
	tm := ra.Find("time")
	iso, _ := tm.Attr("datetime")
	if _, err := time.Parse(time.RFC3339, iso); err != nil || !strings.HasSuffix(iso, "Z") {
		t.Errorf("datetime %q: want RFC 3339 in UTC (%v)", iso, err)
	}
	if got := tm.Text(); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d$`).MatchString(got) {
		t.Errorf("time text %q, want 2026-12-02 14:03", got)
	}
	if got := apptest.TID(doc, "list-zone").Text(); got != "(UTC)" {
		t.Errorf("the Created heading names the zone %q, want (UTC)", got)
	}

	doc = apptest.Page(t, ts.Get("/exports/"+b.ID), http.StatusOK)
	if got := apptest.TID(doc, "job-title").Text(); got != "Demo rows" {
		t.Errorf("page heading %q, want the report's title", got)
	}
	if got := doc.Find("title").Text(); !strings.HasPrefix(got, "Demo rows") {
		t.Errorf("page title %q", got)
	}
	// A time of its own names its zone; the timeline's, which its heading names, do not.
	doc.Find("time").Each(func(_ int, s *goquery.Selection) {
		inTimeline := s.Closest(`[data-testid="timeline"]`).Length() > 0
		if named := strings.HasSuffix(s.Text(), " UTC"); named == inTimeline {
			t.Errorf("a time on the export's page says %q (in the timeline: %v)", s.Text(), inTimeline)
		}
	})
	if got := apptest.TID(doc, "timeline-zone").Text(); got != "Times in UTC." {
		t.Errorf("timeline-zone %q", got)
	}
	// Run again with changes: the form's query contract.
	href, _ := apptest.TID(doc, "run-again-changes").Attr("href")
	u, err := url.Parse(href)
	if err != nil || u.Path != "/exports/new" {
		t.Fatalf("run again with changes %q", href)
	}
	if q := u.Query(); q.Get("report") != "demo" || q.Get("rows") != "7" || q.Get("format") != "csv" {
		t.Errorf("run again with changes %q", href)
	}
}

// An export that found nothing says so, in the list and on its page.
func TestUIZeroRowsIsSaid(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.create(`{"report":"demo","params":{"rows":0}}`)
	ts.waitStatus(j.ID, store.StatusSucceeded)
	doc := apptest.Page(t, ts.Get("/"), http.StatusOK)
	row := rowOf(doc, j.ID)
	if v, _ := apptest.TID(row, "progress-text").Attr("data-zero-rows"); v != "true" || !strings.Contains(apptest.TID(row, "progress-text").Text(), "0 rows") {
		t.Errorf("list: %q", apptest.TID(row, "progress-text").Text())
	}
	if row.Find("progress").Length() != 0 {
		t.Error("list: a bar over 0 rows")
	}
	doc = apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if got := apptest.TID(doc, "zero-rows").Text(); !strings.Contains(got, "This export has no rows: the report found nothing for these parameters.") {
		t.Errorf("page notice %q", got)
	}
	if doc.Find("#job-live progress").Length() != 0 {
		t.Error("page: a bar over 0 rows")
	}
}

// A waiting export shows stripes, not a bar at a value; the search box finds by id.
func TestUIWaitingAndSearch(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	j := ts.create(`{"report":"demo","params":{"rows":5}}`)
	doc := apptest.Page(t, ts.Get("/"), http.StatusOK)
	row := rowOf(doc, j.ID)
	if row.Find("progress").Length() != 0 || apptest.TID(row, "progress").AttrOr("data-waiting", "") != "true" {
		t.Errorf("waiting row: want the striped waiting bar, not a <progress>")
	}

	res := ts.Request(http.MethodGet, "/?q="+url.QueryEscape(" "+j.ID+" "), nil, nil)
	if res.Request.URL.Path != "/exports/"+j.ID {
		t.Errorf("search by the full id landed on %s", res.Request.URL.Path)
	}
	doc = apptest.Page(t, ts.Get("/?q=nosuchid"), http.StatusOK)
	if got := apptest.TID(doc, "list-notice").Text(); !strings.Contains(got, `"nosuchid"`) {
		t.Errorf("search notice %q", got)
	}
	if v, _ := apptest.TID(doc, "search-id").Attr("value"); v != "nosuchid" {
		t.Errorf("search box keeps %q", v)
	}
	if apptest.TID(doc, "export-row").Length() != 1 {
		t.Error("a search that found nothing must leave the list")
	}
	// ?n= shows that many rows: where "Load more" left the list.
	ids := []string{j.ID}
	for range 3 {
		ids = append(ids, ts.create(`{"report":"demo","params":{"rows":5}}`).ID)
	}
	doc = apptest.Page(t, ts.Get("/?n=3"), http.StatusOK)
	if n := apptest.TID(doc, "export-row").Length(); n != 3 || apptest.TID(doc, "load-more").Length() != 1 {
		t.Errorf("?n=3: %d rows, load-more %d", n, apptest.TID(doc, "load-more").Length())
	}
	apptest.Page(t, ts.Get("/?n=abc"), http.StatusOK)

	// An id's start: one match opens it, several are listed, in any case.
	res = ts.Request(http.MethodGet, "/?q="+strings.ToUpper(ids[2][:len(ids[2])-2]), nil, nil)
	if res.Request.URL.Path != "/exports/"+ids[2] {
		t.Errorf("search by an id's start landed on %s", res.Request.URL.Path)
	}
	prefix, want := ids[0][:4], 0
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			want++
		}
	}
	if want > 1 {
		doc = apptest.Page(t, ts.Get("/?q="+prefix), http.StatusOK)
		if n := apptest.TID(doc, "export-row").Length(); n != want || !strings.Contains(apptest.TID(doc, "list-notice").Text(), "start") {
			t.Errorf("prefix %q: %d rows, want %d; notice %q", prefix, n, want, apptest.TID(doc, "list-notice").Text())
		}
	}
}

// Delete asks first (a page, without script), refuses an export that has not ended,
// and then removes the export.
func TestUIDeleteIsConfirmed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.create(`{"report":"demo","params":{"rows":3}}`)
	ts.waitStatus(j.ID, store.StatusSucceeded)
	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	form := apptest.TID(doc, "delete-button").Closest("form")
	if a, _ := form.Attr("action"); a != "/exports/"+j.ID+"/delete" {
		t.Fatalf("delete form action %q", a)
	}
	doc = apptest.Page(t, ts.PostForm("/exports/"+j.ID+"/delete", nil, nil), http.StatusOK)
	if !strings.Contains(apptest.TID(doc, "confirm-message").Text(), j.ID) || apptest.TID(doc, "confirm-button").Length() != 1 {
		t.Fatalf("no confirmation: %q", apptest.TID(doc, "confirm-message").Text())
	}
	ts.job(j.ID) // still there
	res := ts.PostForm("/exports/"+j.ID+"/delete", url.Values{"confirm": {"yes"}}, nil)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/?deleted=") {
		t.Fatalf("confirmed delete: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if _, err := ts.svc.Load(context.Background(), j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted export loads: %v", err)
	}
	doc = apptest.Page(t, ts.Get(res.Header.Get("Location")), http.StatusOK)
	if !strings.Contains(apptest.TID(doc, "list-notice").Text(), "Deleted") {
		t.Errorf("list after delete says %q", apptest.TID(doc, "list-notice").Text())
	}

	slow := ts.create(`{"report":"demo","params":{"rows":1000000,"seconds":600}}`)
	defer ts.cancel(slow.ID)
	doc = apptest.Page(t, ts.Get("/exports/"+slow.ID), http.StatusOK)
	if apptest.TID(doc, "delete-button").Length() != 0 {
		t.Error("an unfinished export offers Delete")
	}
	apptest.Page(t, ts.PostForm("/exports/"+slow.ID+"/delete", url.Values{"confirm": {"yes"}}, nil), http.StatusConflict)
	ts.job(slow.ID)
}

// Bulk actions say how many they will touch, then what they did and what they left.
func TestUIBulkActions(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	ok := ts.create(`{"report":"demo","params":{"rows":3}}`)
	bad1 := ts.create(`{"report":"demo","params":{"rows":3,"fail_first":5}}`)
	bad2 := ts.create(`{"report":"demo","params":{"rows":3,"fail_first":5}}`)
	ts.waitStatus(ok.ID, store.StatusSucceeded)
	ts.waitStatus(bad1.ID, store.StatusFailed)
	ts.waitStatus(bad2.ID, store.StatusFailed)
	slow := ts.create(`{"report":"demo","params":{"rows":1000000,"seconds":600}}`)
	t.Cleanup(func() { _, _ = ts.engine.Cancel(context.Background(), slow.ID) }) // canceled below, or on a failure

	doc := apptest.Page(t, ts.Get("/"), http.StatusOK)
	if apptest.TID(doc, "bulk-form").Length() != 1 || apptest.TID(doc, "row-select").Length() != 4 {
		t.Fatalf("bulk form %d, row checkboxes %d", apptest.TID(doc, "bulk-form").Length(), apptest.TID(doc, "row-select").Length())
	}
	if f, _ := apptest.TID(doc, "row-select").First().Attr("form"); f != "bulk" {
		t.Errorf("row checkbox belongs to form %q", f)
	}
	apptest.Page(t, ts.PostForm("/exports/bulk", url.Values{"action": {"delete"}, "scope": {"selected"}}, nil), http.StatusBadRequest)
	apptest.Page(t, ts.PostForm("/exports/bulk", url.Values{"action": {"nope"}, "id": {ok.ID}}, nil), http.StatusBadRequest)

	sel := url.Values{"action": {"delete"}, "scope": {"selected"}, "id": {ok.ID, bad1.ID, slow.ID}}
	doc = apptest.Page(t, ts.PostForm("/exports/bulk", sel, nil), http.StatusOK)
	if got := apptest.TID(doc, "confirm-message").Text(); !strings.Contains(got, "Of the 3 selected exports, 2 can be deleted") {
		t.Errorf("confirm says %q", got)
	}
	ts.job(ok.ID) // nothing done before the confirmation
	sel.Set("confirm", "yes")
	doc = apptest.Page(t, ts.PostForm("/exports/bulk", sel, nil), http.StatusOK)
	if got := apptest.TID(doc, "bulk-summary").Text(); got != "Deleted 2; 1 still waiting or running was left." {
		t.Errorf("summary %q", got)
	}
	if n := doc.Find(`[data-testid="bulk-outcome"][data-done="false"]`).Length(); n != 1 {
		t.Errorf("%d refused outcomes, want 1", n)
	}
	for _, id := range []string{ok.ID, bad1.ID} {
		if _, err := ts.svc.Load(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after bulk delete: %v", id, err)
		}
	}

	// Retry every failed one the filter matches.
	all := url.Values{"action": {"retry"}, "scope": {"filter"}, "status": {"FAILED"}}
	doc = apptest.Page(t, ts.PostForm("/exports/bulk", all, nil), http.StatusOK)
	if got := apptest.TID(doc, "confirm-message").Text(); !strings.Contains(got, "Of the 1 export the filters match, 1 can be retried") {
		t.Errorf("confirm says %q", got)
	}
	all.Set("confirm", "yes")
	doc = apptest.Page(t, ts.PostForm("/exports/bulk", all, nil), http.StatusOK)
	if got := apptest.TID(doc, "bulk-summary").Text(); got != "Retried 1." {
		t.Errorf("summary %q", got)
	}
	ts.waitStatus(bad2.ID, store.StatusFailed, store.StatusPending, store.StatusProcessing)

	// Cancel: the running one is canceled, a finished one left.
	can := url.Values{"action": {"cancel"}, "id": {slow.ID, bad2.ID}, "confirm": {"yes"}}
	ts.waitStatus(bad2.ID, store.StatusFailed)
	doc = apptest.Page(t, ts.PostForm("/exports/bulk", can, nil), http.StatusOK)
	if got := apptest.TID(doc, "bulk-summary").Text(); got != "Canceled 1; 1 already ended was left." {
		t.Errorf("summary %q", got)
	}
	ts.waitStatus(slow.ID, store.StatusCanceled)
}
