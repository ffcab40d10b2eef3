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

	doc := page(t, ts.get("/"), http.StatusOK)
	ra, rb := rowOf(doc, a.ID), rowOf(doc, b.ID)
	if got := tid(ra, "job-link").Text(); got != "Demo rows" {
		t.Errorf("row title %q, want the report's title", got)
	}
	if got := tid(ra, "row-params").Text(); !strings.Contains(got, "rows 1234") {
		t.Errorf("row params %q", got)
	}
	if title, _ := tid(ra, "row-params").Attr("title"); !strings.Contains(title, "rows 1234") {
		t.Errorf("row params title %q", title)
	}
	if tid(ra, "row-format").Length() != 0 || tid(rb, "row-format").Text() != "CSV" {
		t.Errorf("format: xlsx %q, csv %q; want nothing for xlsx, CSV for csv", tid(ra, "row-format").Text(), tid(rb, "row-format").Text())
	}
	if got := tid(ra, "row-size").Text(); !regexp.MustCompile(`^[0-9.]+ (bytes|kB|MB)$`).MatchString(got) {
		t.Errorf("row size %q", got)
	}
	if got := tid(ra, "row-ran").Text(); !regexp.MustCompile(`^[0-9]+ (ms|s)$`).MatchString(got) {
		t.Errorf("row ran %q", got)
	}
	if tid(ra, "row-by").Length() != 0 {
		t.Error("without tokens, no one is named as having asked")
	}
	if got := tid(doc, "filter-report").Find(`option[value="demo"]`).Text(); got != "Demo rows" {
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
	if got := tid(doc, "list-zone").Text(); got != "(UTC)" {
		t.Errorf("the Created heading names the zone %q, want (UTC)", got)
	}

	doc = page(t, ts.get("/exports/"+b.ID), http.StatusOK)
	if got := tid(doc, "job-title").Text(); got != "Demo rows" {
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
	if got := tid(doc, "timeline-zone").Text(); got != "Times in UTC." {
		t.Errorf("timeline-zone %q", got)
	}
	// Run again with changes: the form's query contract.
	href, _ := tid(doc, "run-again-changes").Attr("href")
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
	doc := page(t, ts.get("/"), http.StatusOK)
	row := rowOf(doc, j.ID)
	if v, _ := tid(row, "progress-text").Attr("data-zero-rows"); v != "true" || !strings.Contains(tid(row, "progress-text").Text(), "0 rows") {
		t.Errorf("list: %q", tid(row, "progress-text").Text())
	}
	if row.Find("progress").Length() != 0 {
		t.Error("list: a bar over 0 rows")
	}
	doc = page(t, ts.get("/exports/"+j.ID), http.StatusOK)
	if got := tid(doc, "zero-rows").Text(); !strings.Contains(got, "This export has no rows: the report found nothing for these parameters.") {
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
	doc := page(t, ts.get("/"), http.StatusOK)
	row := rowOf(doc, j.ID)
	if row.Find("progress").Length() != 0 || tid(row, "progress").AttrOr("data-waiting", "") != "true" {
		t.Errorf("waiting row: want the striped waiting bar, not a <progress>")
	}

	res := ts.request(http.MethodGet, "/?q="+url.QueryEscape(" "+j.ID+" "), nil, nil)
	if res.Request.URL.Path != "/exports/"+j.ID {
		t.Errorf("search by the full id landed on %s", res.Request.URL.Path)
	}
	doc = page(t, ts.get("/?q=nosuchid"), http.StatusOK)
	if got := tid(doc, "list-notice").Text(); !strings.Contains(got, `"nosuchid"`) {
		t.Errorf("search notice %q", got)
	}
	if v, _ := tid(doc, "search-id").Attr("value"); v != "nosuchid" {
		t.Errorf("search box keeps %q", v)
	}
	if tid(doc, "export-row").Length() != 1 {
		t.Error("a search that found nothing must leave the list")
	}
	// ?n= shows that many rows: where "Load more" left the list.
	ids := []string{j.ID}
	for range 3 {
		ids = append(ids, ts.create(`{"report":"demo","params":{"rows":5}}`).ID)
	}
	doc = page(t, ts.get("/?n=3"), http.StatusOK)
	if n := tid(doc, "export-row").Length(); n != 3 || tid(doc, "load-more").Length() != 1 {
		t.Errorf("?n=3: %d rows, load-more %d", n, tid(doc, "load-more").Length())
	}
	page(t, ts.get("/?n=abc"), http.StatusOK)

	// An id's start: one match opens it, several are listed, in any case.
	res = ts.request(http.MethodGet, "/?q="+strings.ToUpper(ids[2][:len(ids[2])-2]), nil, nil)
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
		doc = page(t, ts.get("/?q="+prefix), http.StatusOK)
		if n := tid(doc, "export-row").Length(); n != want || !strings.Contains(tid(doc, "list-notice").Text(), "start") {
			t.Errorf("prefix %q: %d rows, want %d; notice %q", prefix, n, want, tid(doc, "list-notice").Text())
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
	doc := page(t, ts.get("/exports/"+j.ID), http.StatusOK)
	form := tid(doc, "delete-button").Closest("form")
	if a, _ := form.Attr("action"); a != "/exports/"+j.ID+"/delete" {
		t.Fatalf("delete form action %q", a)
	}
	doc = page(t, ts.postForm("/exports/"+j.ID+"/delete", nil, nil), http.StatusOK)
	if !strings.Contains(tid(doc, "confirm-message").Text(), j.ID) || tid(doc, "confirm-button").Length() != 1 {
		t.Fatalf("no confirmation: %q", tid(doc, "confirm-message").Text())
	}
	ts.job(j.ID) // still there
	res := ts.postForm("/exports/"+j.ID+"/delete", url.Values{"confirm": {"yes"}}, nil)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/?deleted=") {
		t.Fatalf("confirmed delete: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if _, err := ts.svc.Load(context.Background(), j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted export loads: %v", err)
	}
	doc = page(t, ts.get(res.Header.Get("Location")), http.StatusOK)
	if !strings.Contains(tid(doc, "list-notice").Text(), "Deleted") {
		t.Errorf("list after delete says %q", tid(doc, "list-notice").Text())
	}

	slow := ts.create(`{"report":"demo","params":{"rows":1000000,"seconds":600}}`)
	defer ts.cancel(slow.ID)
	doc = page(t, ts.get("/exports/"+slow.ID), http.StatusOK)
	if tid(doc, "delete-button").Length() != 0 {
		t.Error("an unfinished export offers Delete")
	}
	page(t, ts.postForm("/exports/"+slow.ID+"/delete", url.Values{"confirm": {"yes"}}, nil), http.StatusConflict)
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

	doc := page(t, ts.get("/"), http.StatusOK)
	if tid(doc, "bulk-form").Length() != 1 || tid(doc, "row-select").Length() != 4 {
		t.Fatalf("bulk form %d, row checkboxes %d", tid(doc, "bulk-form").Length(), tid(doc, "row-select").Length())
	}
	if f, _ := tid(doc, "row-select").First().Attr("form"); f != "bulk" {
		t.Errorf("row checkbox belongs to form %q", f)
	}
	page(t, ts.postForm("/exports/bulk", url.Values{"action": {"delete"}, "scope": {"selected"}}, nil), http.StatusBadRequest)
	page(t, ts.postForm("/exports/bulk", url.Values{"action": {"nope"}, "id": {ok.ID}}, nil), http.StatusBadRequest)

	sel := url.Values{"action": {"delete"}, "scope": {"selected"}, "id": {ok.ID, bad1.ID, slow.ID}}
	doc = page(t, ts.postForm("/exports/bulk", sel, nil), http.StatusOK)
	if got := tid(doc, "confirm-message").Text(); !strings.Contains(got, "Of the 3 selected exports, 2 can be deleted") {
		t.Errorf("confirm says %q", got)
	}
	ts.job(ok.ID) // nothing done before the confirmation
	sel.Set("confirm", "yes")
	doc = page(t, ts.postForm("/exports/bulk", sel, nil), http.StatusOK)
	if got := tid(doc, "bulk-summary").Text(); got != "Deleted 2; 1 still waiting or running was left." {
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
	doc = page(t, ts.postForm("/exports/bulk", all, nil), http.StatusOK)
	if got := tid(doc, "confirm-message").Text(); !strings.Contains(got, "Of the 1 export the filters match, 1 can be retried") {
		t.Errorf("confirm says %q", got)
	}
	all.Set("confirm", "yes")
	doc = page(t, ts.postForm("/exports/bulk", all, nil), http.StatusOK)
	if got := tid(doc, "bulk-summary").Text(); got != "Retried 1." {
		t.Errorf("summary %q", got)
	}
	ts.waitStatus(bad2.ID, store.StatusFailed, store.StatusPending, store.StatusProcessing)

	// Cancel: the running one is canceled, a finished one left.
	can := url.Values{"action": {"cancel"}, "id": {slow.ID, bad2.ID}, "confirm": {"yes"}}
	ts.waitStatus(bad2.ID, store.StatusFailed)
	doc = page(t, ts.postForm("/exports/bulk", can, nil), http.StatusOK)
	if got := tid(doc, "bulk-summary").Text(); got != "Canceled 1; 1 already ended was left." {
		t.Errorf("summary %q", got)
	}
	ts.waitStatus(slow.ID, store.StatusCanceled)
}
