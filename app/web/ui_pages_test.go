package web_test

import (
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/app/web"
	"sheetq/assets"
	"sheetq/internal/apptest"
	"sheetq/store"
)

func TestUIStaticAssetsAreHashedAndCached(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	for _, name := range []string{"app.js", "style.css", "favicon.svg"} {
		u := assets.URL(name)
		if !regexp.MustCompile(`\?v=[0-9a-f]{12}$`).MatchString(u) {
			t.Errorf("URL(%s) = %q, want a content hash", name, u)
		}
		res := ts.Get(u)
		if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: status %d, Cache-Control %q", u, res.StatusCode, res.Header.Get("Cache-Control"))
		}
	}
}

func TestUIHomeListsExportsWithStatusAndActions(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	doc := apptest.Page(t, ts.Get("/"), http.StatusOK)
	if apptest.TID(doc, "no-exports").Length() != 1 || apptest.TID(doc, "exports").Length() != 0 || apptest.TID(doc, "export-row").Length() != 0 {
		t.Errorf("empty home: want no-exports and no exports table")
	}
	if apptest.TID(doc, "new-export-link").Length() != 1 || apptest.TID(doc, "filters").Length() != 1 {
		t.Errorf("home lacks new-export-link or filters")
	}

	ok := ts.create(`{"report":"demo","params":{"rows":1234}}`)
	bad := ts.create(`{"report":"demo","params":{"rows":5,"fail_first":1}}`)
	ts.waitStatus(ok.ID, store.StatusSucceeded)
	ts.waitStatus(bad.ID, store.StatusFailed)

	doc = apptest.Page(t, ts.Get("/"), http.StatusOK)
	rows := apptest.TID(doc, "export-row")
	if rows.Length() != 2 || apptest.TID(doc, "no-exports").Length() != 0 {
		t.Fatalf("%d rows, want 2", rows.Length())
	}
	// Newest first.
	if id, _ := rows.First().Attr("data-id"); id != bad.ID {
		t.Errorf("first row %s, want the newest %s", id, bad.ID)
	}
	okRow := doc.Find(`[data-testid="export-row"][data-id="` + ok.ID + `"]`)
	if st, _ := okRow.Attr("data-status"); st != "SUCCEEDED" {
		t.Errorf("ok row status %q", st)
	}
	if href, _ := apptest.TID(okRow, "download").Attr("href"); href != "/api/v1/exports/"+ok.ID+"/file" {
		t.Errorf("download href %q", href)
	}
	if href, _ := apptest.TID(okRow, "job-link").Attr("href"); href != "/exports/"+ok.ID {
		t.Errorf("job-link href %q", href)
	}
	if got := apptest.TID(okRow, "progress-text").Text(); got != "1,234 rows" {
		t.Errorf("progress-text %q, want 1,234 rows", got)
	}
	if apptest.TID(okRow, "error").Length() != 0 || apptest.TID(okRow, "attempt-info").Length() != 0 {
		t.Error("succeeded first-attempt row shows an error or attempt info")
	}
	badRow := doc.Find(`[data-testid="export-row"][data-id="` + bad.ID + `"]`)
	if st, _ := badRow.Attr("data-status"); st != "FAILED" {
		t.Errorf("bad row status %q", st)
	}
	if got := apptest.TID(badRow, "error").Text(); !strings.Contains(got, "simulated upstream failure") {
		t.Errorf("failed row error %q", got)
	}
	if apptest.TID(badRow, "download").Length() != 0 {
		t.Error("failed row offers a download")
	}
	if got, _ := apptest.TID(badRow, "status").Attr("data-status"); got != "FAILED" {
		t.Errorf("status badge %q", got)
	}

	// Filters: by status, and by report with a status that matches nothing.
	doc = apptest.Page(t, ts.Get("/?status=FAILED"), http.StatusOK)
	if n := apptest.TID(doc, "export-row").Length(); n != 1 {
		t.Errorf("status=FAILED: %d rows", n)
	}
	if v, _ := apptest.TID(doc, "filter-status").Find("option[selected]").Attr("value"); v != "FAILED" {
		t.Errorf("status filter keeps %q", v)
	}
	if apptest.TID(doc, "filter-report").Find(`option[value="demo"]`).Length() != 1 {
		t.Error("report filter lacks demo")
	}
	doc = apptest.Page(t, ts.Get("/?report=demo&status=CANCELED"), http.StatusOK)
	if apptest.TID(doc, "export-row").Length() != 0 || apptest.TID(doc, "no-exports").Length() != 1 {
		t.Error("filter matching nothing: want the empty state")
	}
	apptest.Page(t, ts.Get("/?status=NOPE"), http.StatusBadRequest)
	apptest.Page(t, ts.Get("/?cursor=%25%25"), http.StatusBadRequest)

	// The row fragment the script fetches is the same row.
	res := ts.Get("/exports/" + ok.ID + "/row")
	apptest.Page(t, res, http.StatusOK)
	// A bare <tr> is only a row inside a table, as where the script puts it.
	frag, err := goquery.NewDocumentFromReader(strings.NewReader("<table><tbody>" + string(res.Body) + "</tbody></table>"))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := apptest.TID(frag, "export-row").Attr("data-id"); id != ok.ID || apptest.TID(frag, "download").Length() != 1 {
		t.Errorf("row fragment id %q", id)
	}
	apptest.Page(t, ts.Get("/exports/nosuch/row"), http.StatusNotFound)
}

func TestUIHomeLoadMore(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	var ids []string
	for range web.HomePageSize + 2 {
		ids = append(ids, ts.create(`{"report":"demo","params":{"rows":0}}`).ID)
	}
	doc := apptest.Page(t, ts.Get("/"), http.StatusOK)
	if n := apptest.TID(doc, "export-row").Length(); n != web.HomePageSize {
		t.Fatalf("first page: %d rows", n)
	}
	more, ok := apptest.TID(doc, "load-more").Attr("href")
	if !ok {
		t.Fatal("no load-more link")
	}
	doc = apptest.Page(t, ts.Get(more), http.StatusOK)
	var rest []string
	apptest.TID(doc, "export-row").Each(func(_ int, s *goquery.Selection) { rest = append(rest, s.AttrOr("data-id", "")) })
	if len(rest) != 2 || rest[0] != ids[1] || rest[1] != ids[0] {
		t.Errorf("second page %v, want the two oldest %v", rest, ids[:2])
	}
	if apptest.TID(doc, "load-more").Length() != 0 {
		t.Error("load-more on the last page")
	}
	if live, _ := doc.Find("#exports-table").Attr("data-live"); live != "false" {
		t.Errorf("a later page must not take new jobs live: data-live %q", live)
	}
}

func TestUIFailedJobPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	j := ts.create(`{"report":"demo","params":{"rows":5,"fail_first":2}}`)
	ts.waitStatus(j.ID, store.StatusFailed)

	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if st, _ := apptest.TID(doc, "job-status").Attr("data-status"); st != "FAILED" {
		t.Errorf("job-status %q", st)
	}
	if got := apptest.TID(doc, "job-report").Text(); got != "demo" {
		t.Errorf("job-report %q", got)
	}
	jobErr := apptest.TID(doc, "job-error").Text()
	for _, want := range []string{"upstream", "simulated upstream failure", "Run again"} {
		if !strings.Contains(jobErr, want) {
			t.Errorf("job-error %q lacks %q", jobErr, want)
		}
	}
	if apptest.TID(doc, "retry-button").Length() != 1 || apptest.TID(doc, "cancel-button").Length() != 0 || apptest.TID(doc, "download-button").Length() != 0 {
		t.Errorf("buttons: retry %d cancel %d download %d, want only retry",
			apptest.TID(doc, "retry-button").Length(), apptest.TID(doc, "cancel-button").Length(), apptest.TID(doc, "download-button").Length())
	}
	if apptest.TID(doc, "file-sha256").Length() != 0 {
		t.Error("failed job shows a file")
	}
	params := apptest.TID(doc, "job-params").Text()
	for _, want := range []string{"rows", "fail_first", "seconds"} {
		if !strings.Contains(params, want) {
			t.Errorf("job-params %q lacks %s", params, want)
		}
	}
	types := timelineTypes(doc)
	if want := "accepted started failed"; strings.Join(types, " ") != want {
		t.Errorf("timeline %v, want %s", types, want)
	}
	for _, id := range []string{"timing-waited", "timing-ran", "timing-total", "job-progress", "progress-text"} {
		if apptest.TID(doc, id).Length() != 1 {
			t.Errorf("no %s", id)
		}
	}

	// Retry from the page: 303 back, and the timeline says so.
	res := ts.PostForm("/exports/"+j.ID+"/retry", nil, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/exports/"+j.ID {
		t.Fatalf("retry: status %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	ts.waitStatus(j.ID, store.StatusFailed) // fails again: fail_first is 2
	doc = apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	types = timelineTypes(doc)
	if want := "accepted started failed retried started failed"; strings.Join(types, " ") != want {
		t.Errorf("timeline after retry %v, want %s", types, want)
	}
	// Run again by hand, the job has a fresh budget (one attempt here): the page counts
	// from there, and says how many went before, not "attempt 2 of 2".
	if got := strings.Join(strings.Fields(apptest.TID(doc, "job-attempt").Text()), " "); got != "1 of 1 since it was run again by hand (1 before)" {
		t.Errorf("job-attempt %q", got)
	}
	if got := apptest.TID(doc, "attempt-info").Text(); got != "" {
		t.Errorf("attempt-info %q, want none: the run's only attempt", got)
	}
	apptest.Page(t, ts.Get("/exports/nosuch"), http.StatusNotFound)
}

func timelineTypes(doc *goquery.Document) []string {
	var out []string
	apptest.TID(apptest.TID(doc, "timeline"), "timeline-item").Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.AttrOr("data-type", ""))
	})
	return out
}

func TestUISucceededJobPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.create(`{"report":"demo","params":{"rows":50}}`)
	done := ts.waitStatus(j.ID, store.StatusSucceeded)

	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if st, _ := apptest.TID(doc, "job-status").Attr("data-status"); st != "SUCCEEDED" {
		t.Errorf("job-status %q", st)
	}
	if href, _ := apptest.TID(doc, "download-button").Attr("href"); href != done.DownloadURL {
		t.Errorf("download-button %q, want %q", href, done.DownloadURL)
	}
	if apptest.TID(doc, "cancel-button").Length() != 0 || apptest.TID(doc, "retry-button").Length() != 0 || apptest.TID(doc, "job-error").Length() != 0 {
		t.Error("succeeded job offers cancel or retry, or shows an error")
	}
	if got := apptest.TID(doc, "file-name").Text(); got != done.File.Name {
		t.Errorf("file-name %q, want %q", got, done.File.Name)
	}
	if got := apptest.TID(doc, "file-sha256").Text(); got != done.File.SHA256 {
		t.Errorf("file-sha256 %q, want %q", got, done.File.SHA256)
	}
	if got := apptest.TID(doc, "file-size").Text(); !strings.Contains(got, strconv.FormatInt(done.File.Size, 10)) &&
		!strings.Contains(got, formatThousands(done.File.Size)) {
		t.Errorf("file-size %q, want %d bytes", got, done.File.Size)
	}
	if types := timelineTypes(doc); strings.Join(types, " ") != "accepted started succeeded" {
		t.Errorf("timeline %v", types)
	}
	if v, _ := apptest.TID(doc, "job-progress").Attr("value"); v == "" {
		t.Error("a finished job's progress bar has no value")
	}
}

func formatThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestUIPendingJobCanBeCanceled(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	// Slow enough to still run when the page is read; canceled below.
	j := ts.create(`{"report":"demo","params":{"rows":1000000,"seconds":600}}`)
	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if apptest.TID(doc, "cancel-button").Length() != 1 || apptest.TID(doc, "retry-button").Length() != 0 || apptest.TID(doc, "download-button").Length() != 0 {
		t.Error("an unfinished job must offer cancel only")
	}
	res := ts.PostForm("/exports/"+j.ID+"/cancel", nil, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: status %d", res.StatusCode)
	}
	ts.waitStatus(j.ID, store.StatusCanceled)
	doc = apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if apptest.TID(doc, "retry-button").Length() != 1 || apptest.TID(doc, "cancel-button").Length() != 0 {
		t.Error("a canceled job must offer retry only")
	}
	types := timelineTypes(doc)
	if types[len(types)-1] != store.EventCanceled {
		t.Errorf("timeline %v does not end canceled", types)
	}
	// Canceling again changes nothing and goes back to the page.
	if res := ts.PostForm("/exports/"+j.ID+"/cancel", nil, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("second cancel: status %d", res.StatusCode)
	}
}

func TestUIFormInputTypesFollowParamTypes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "typed.sql", `-- title: Typed
-- source: demo
-- param: day date "Day" = 2024-02-29
-- param: at datetime "At"
-- param: n int "N" = 3
-- param: x number "X"
-- param: flag bool "Flag" = true
-- param: name text "Name" = ann
SELECT :day, :at, :n, :x, :flag, :name;
`)
	var doc *goquery.Document
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		res := ts.Get("/exports/new?report=typed")
		return res.StatusCode == http.StatusOK, "typed report not loaded: " + strconv.Itoa(res.StatusCode)
	})
	doc = apptest.Page(t, ts.Get("/exports/new?report=typed"), http.StatusOK)
	for name, want := range map[string]string{"day": "date", "at": "datetime-local", "n": "number", "x": "number", "flag": "checkbox", "name": "text"} {
		in := apptest.TID(doc, "param-"+name)
		if typ := in.AttrOr("type", ""); typ != want {
			t.Errorf("param %s: type %q, want %q", name, typ, want)
		}
		if doc.Find(`label[for="param-`+name+`"]`).Length() != 1 {
			t.Errorf("param %s has no label", name)
		}
	}
	if v := apptest.TID(doc, "param-day").AttrOr("value", ""); v != "2024-02-29" {
		t.Errorf("date default %q", v)
	}
	if _, on := apptest.TID(doc, "param-flag").Attr("checked"); !on {
		t.Error("bool default true is not checked")
	}
	if _, req := apptest.TID(doc, "param-x").Attr("required"); !req {
		t.Error("a param without default is not required")
	}
	// Two required params left empty: both get an error at once.
	form := apptest.FormOf(t, doc)
	form.Del("flag") // unchecked
	doc = apptest.Page(t, ts.PostForm("/exports", form, nil), http.StatusUnprocessableEntity)
	for _, name := range []string{"at", "x"} {
		if got := apptest.TID(doc, "error-"+name).Text(); !strings.Contains(got, "required") {
			t.Errorf("error-%s %q", name, got)
		}
	}
	if _, on := apptest.TID(doc, "param-flag").Attr("checked"); on {
		t.Error("an unchecked box came back checked")
	}
	// With the params right, the export starts, with the box's false, not its default.
	form.Set("at", "2024-03-01T10:00")
	form.Set("x", "1.5")
	res := ts.PostForm("/exports", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d; %s", res.StatusCode, res.Body)
	}
	j := ts.job(strings.TrimPrefix(res.Header.Get("Location"), "/exports/"))
	if j.Params["flag"] != false || j.Params["at"] != "2024-03-01T10:00:00Z" || j.Params["day"] != "2024-02-29" {
		t.Errorf("params %v", j.Params)
	}
}

func TestUIReportsPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "broken.sql", "-- title: Broken\n-- titel: typo\nSELECT 1;\n")
	var doc *goquery.Document
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		doc = apptest.Page(t, ts.Get("/reports"), http.StatusOK)
		return apptest.TID(doc, "report-error").Length() == 1, "broken report not shown yet"
	})
	demo := doc.Find(`[data-testid="report"][data-id="demo"]`)
	if demo.Length() != 1 {
		t.Fatal("no demo report")
	}
	if got := apptest.TID(demo, "report-source").Text(); got != "demo" {
		t.Errorf("demo source %q", got)
	}
	if got := apptest.TID(demo, "report-params").Text(); !strings.Contains(got, "fail_first") || !strings.Contains(got, "rows") {
		t.Errorf("demo params %q", got)
	}
	if href, _ := apptest.TID(demo, "report-new-export").Attr("href"); href != "/exports/new?report=demo" {
		t.Errorf("demo new export %q", href)
	}
	broken := doc.Find(`[data-testid="report"][data-id="broken"]`)
	errEl := apptest.TID(broken, "report-error")
	file, _ := errEl.Attr("data-file")
	if !strings.HasSuffix(file, "broken.sql") {
		t.Errorf("report-error data-file %q", file)
	}
	if got := errEl.Text(); !regexp.MustCompile(`broken\.sql:2: .*titel`).MatchString(got) {
		t.Errorf("report-error %q, want file:line: message", got)
	}
	if apptest.TID(broken, "report-new-export").Length() != 0 {
		t.Error("a broken report offers an export")
	}

	// The list fragment the script fetches, and a good report with its SQL.
	apptest.WriteReport(t, ts.dir, "broken.sql", "-- title: Fixed now\n-- source: demo\nSELECT 42 AS answer;\n")
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		doc = apptest.Page(t, ts.Get("/reports?fragment=list"), http.StatusOK)
		return apptest.TID(doc, "report-error").Length() == 0, "still broken"
	})
	fixed := doc.Find(`[data-testid="report"][data-id="broken"]`)
	if got := apptest.TID(fixed, "report-title").Text(); !strings.Contains(got, "Fixed now") {
		t.Errorf("fixed title %q", got)
	}
	if got := apptest.TID(fixed, "report-sql").Text(); !strings.Contains(got, "SELECT 42") {
		t.Errorf("fixed SQL %q", got)
	}
	if doc.Find("header.top").Length() != 0 {
		t.Error("the fragment carries the page layout")
	}
}

func TestUIQueuePage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	for range 2 {
		j := ts.create(`{"report":"demo","params":{"rows":2}}`)
		ts.waitStatus(j.ID, store.StatusSucceeded)
	}
	f := ts.create(`{"report":"demo","params":{"rows":2,"fail_first":1}}`)
	ts.waitStatus(f.ID, store.StatusFailed)

	for _, rng := range []string{"", "?range=hour", "?range=day"} {
		doc := apptest.Page(t, ts.Get("/queue"+rng), http.StatusOK)
		for status, want := range map[string]string{"PENDING": "0", "PROCESSING": "0", "SUCCEEDED": "2", "FAILED": "1", "CANCELED": "0", "EXPIRED": "0"} {
			if got := strings.TrimSpace(apptest.TID(doc, "count-"+status).Text()); got != want {
				t.Errorf("%s count-%s = %q, want %s", rng, status, got, want)
			}
		}
		if got := apptest.TID(doc, "workers-busy").Text(); got != "0 of 2 busy" {
			t.Errorf("workers-busy %q", got)
		}
		for _, id := range []string{"oldest-pending", "late-heartbeats", "stalled-jobs", "range-hour", "range-day"} {
			if apptest.TID(doc, id).Length() != 1 {
				t.Errorf("%s: no %s", rng, id)
			}
		}
		for _, id := range []string{"chart-throughput", "chart-wait", "chart-run"} {
			if s := apptest.TID(doc, id); s.Length() != 1 || goquery.NodeName(s) != "svg" {
				t.Errorf("%s: %s is not one inline svg", rng, id)
			}
		}
		// The throughput bars add up to what finished: 2 succeeded, 1 failed.
		sum := func(class string) int {
			n := 0
			apptest.TID(doc, "chart-throughput").Find("rect." + class).Each(func(_ int, r *goquery.Selection) {
				v, _ := strconv.Atoi(r.AttrOr("data-value", ""))
				n += v
			})
			return n
		}
		if ok, bad := sum("bar-ok"), sum("bar-bad"); ok != 2 || bad != 1 {
			t.Errorf("%s: throughput bars %d succeeded, %d failed; want 2, 1", rng, ok, bad)
		}
		if n := apptest.TID(doc, "chart-run").Find("rect").Length(); n != 2 {
			t.Errorf("%s: run chart has %d bars, want p50 and p95", rng, n)
		}
	}
}

// The page after sign-in stays on this server, however next is written: a browser drops
// a tab or a line break from a Location, so "/\t/evil.example" would go to evil.example.
func TestUILoginNextStaysOnThisServer(t *testing.T) {
	t.Parallel()
	open := newTestServer(t, testOpts{})
	noRedirects(open)
	signed := newTestServer(t, testOpts{Token: "s3cret-token-0123"})
	for _, next := range []string{"/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example", "/\x0b/evil.example",
		"//evil.example", "/\\evil.example", "https://evil.example/"} {
		// Without tokens /login sends the browser on at once.
		res := open.Get("/login?next=" + url.QueryEscape(next))
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Errorf("GET /login?next=%q: %d, Location %q, want /", next, res.StatusCode, res.Header.Get("Location"))
		}
		res = signed.PostForm("/login", url.Values{"token": {"s3cret-token-0123"}, "next": {next}}, nil)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Errorf("sign-in with next %q: %d, Location %q, want /", next, res.StatusCode, res.Header.Get("Location"))
		}
	}
	res := open.Get("/login?next=" + url.QueryEscape("/exports/new?report=demo"))
	if loc := res.Header.Get("Location"); loc != "/exports/new?report=demo" {
		t.Errorf("a path of this server: Location %q", loc)
	}
}

// The New export form offers the format (xlsx chosen) and the BOM; csv chosen makes a
// csv export, and a BOM with xlsx shows the form again with an error beside the format.
func TestUINewExportFormFormat(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	doc := apptest.Page(t, ts.Get("/exports/new?report=demo"), http.StatusOK)
	if sel := apptest.TID(doc, "file-format").Find("option[selected]"); sel.AttrOr("value", "") != "xlsx" {
		t.Errorf("format chosen by default: %q, want xlsx", sel.AttrOr("value", ""))
	}
	if _, on := apptest.TID(doc, "file-bom").Attr("checked"); on {
		t.Error("the BOM box is checked by default")
	}
	form := apptest.FormOf(t, doc)

	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("file-format", "xlsx")
	bad.Set("file-bom", "true")
	doc = apptest.Page(t, ts.PostForm("/exports", bad, nil), http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "error-file-format").Text(); !strings.Contains(got, "only for CSV") {
		t.Errorf("error-file-format %q", got)
	}
	if _, on := apptest.TID(doc, "file-bom").Attr("checked"); !on {
		t.Error("the BOM box was not kept checked")
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("a bad format made %d jobs", n)
	}

	form.Set("file-format", "csv")
	form.Set("file-bom", "true")
	res := ts.PostForm("/exports", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit: status %d; %s", res.StatusCode, res.Body)
	}
	j := ts.job(strings.TrimPrefix(res.Header.Get("Location"), "/exports/"))
	if j.Format != "csv" || !j.BOM {
		t.Errorf("the form's job has format %q, bom %v; want csv with a BOM", j.Format, j.BOM)
	}
}

// The New export form offers to keep a csv file's formulas, off (and, with xlsx
// chosen, disabled) by default; the schedule form does not (a schedule's csv files are
// always neutralised). Kept formulas with xlsx show the form again with an error beside
// the format; with csv they make an export that keeps them, whose "Run again with
// changes" opens the form with the box checked.
func TestUINewExportFormKeepFormulas(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	doc := apptest.Page(t, ts.Get("/exports/new?report=demo"), http.StatusOK)
	box := apptest.TID(doc, "file-csv-formulas")
	if box.Length() != 1 || box.AttrOr("value", "") != "keep" {
		t.Fatalf("the formulas box: %d, value %q", box.Length(), box.AttrOr("value", ""))
	}
	if _, on := box.Attr("checked"); on {
		t.Error("the formulas box is checked by default")
	}
	if _, off := box.Attr("disabled"); !off {
		t.Error("the formulas box is enabled with xlsx chosen")
	}
	if label := doc.Find(`label[for="file-csv-formulas"]`).Text(); !strings.Contains(label, "Keep formulas") {
		t.Errorf("label %q", label)
	}
	if n := apptest.TID(apptest.Page(t, ts.Get("/schedules/new?report=demo"), http.StatusOK), "file-csv-formulas").Length(); n != 0 {
		t.Error("the schedule form offers to keep formulas")
	}
	form := apptest.FormOf(t, doc)

	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("file-format", "xlsx")
	bad.Set("file-csv-formulas", "keep")
	doc = apptest.Page(t, ts.PostForm("/exports", bad, nil), http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "error-file-format").Text(); !strings.Contains(got, "Kept formulas are only for CSV") {
		t.Errorf("error-file-format %q", got)
	}
	if _, on := apptest.TID(doc, "file-csv-formulas").Attr("checked"); !on {
		t.Error("the formulas box was not kept checked")
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("kept formulas with xlsx made %d jobs", n)
	}

	for i, tc := range []struct {
		box  string // the posted value; "" sends none (unchecked)
		want string // the job's csv_formulas
	}{{"keep", "keep"}, {"", ""}, {"on", "keep"}} {
		form.Set("file-format", "csv")
		form.Set("idempotency_key", "keep-formulas-000"+strconv.Itoa(i))
		form.Del("file-csv-formulas")
		if tc.box != "" {
			form.Set("file-csv-formulas", tc.box)
		}
		res := ts.PostForm("/exports", form, nil)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("submit %q: status %d; %s", tc.box, res.StatusCode, res.Body)
		}
		id := strings.TrimPrefix(res.Header.Get("Location"), "/exports/")
		if j := ts.job(id); j.Format != "csv" || j.CSVFormulas != tc.want {
			t.Fatalf("box %q: the form's job has format %q, csv_formulas %q; want csv, %q", tc.box, j.Format, j.CSVFormulas, tc.want)
		}
		again := apptest.TID(apptest.Page(t, ts.Get("/exports/"+id), http.StatusOK), "run-again-changes").AttrOr("href", "")
		doc = apptest.Page(t, ts.Get(again), http.StatusOK)
		if _, on := apptest.TID(doc, "file-csv-formulas").Attr("checked"); on != (tc.want == "keep") {
			t.Errorf("box %q: run again (%s) checks the formulas box: %v", tc.box, again, on)
		}
	}
}

// The Reports page lists a report's columns and its download name pattern.
func TestUIReportsPageShowsColumns(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "labelled.sql", columnsReport)
	var doc *goquery.Document
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		doc = apptest.Page(t, ts.Get("/reports"), http.StatusOK)
		return doc.Find(`[data-testid="report"][data-id="labelled"]`).Length() == 1, "labelled not shown yet"
	})
	r := doc.Find(`[data-testid="report"][data-id="labelled"]`)
	var rows []string
	apptest.TID(r, "report-columns").Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
		var cells []string
		tr.Find("td").Each(func(_ int, td *goquery.Selection) { cells = append(cells, strings.TrimSpace(td.Text())) })
		rows = append(rows, strings.Join(cells, "|"))
	})
	want := []string{"unit_price|Unit price|number|#,##0.00;[Red]-#,##0.00", "created_at|Created|datetime|", "id|||"}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("columns table %q, want %q", rows, want)
	}
	if got := strings.TrimSpace(apptest.TID(r, "report-filename").Text()); got != "orders-{from}" {
		t.Errorf("report-filename %q", got)
	}
	// Whether an export resumes after a crash (the demo source always does).
	if got := apptest.TID(doc.Find(`[data-testid="report"][data-id="demo"]`), "report-resume").Text(); got != "continues from its last checkpoint" {
		t.Errorf("demo: after a crash %q", got)
	}
	if got := r.Text(); !strings.Contains(got, "with money as money.") {
		t.Errorf("the description is not shown: %q", got)
	}
	// A report without column lines shows no columns table.
	if n := apptest.TID(doc.Find(`[data-testid="report"][data-id="demo"]`), "report-columns").Length(); n != 0 {
		t.Errorf("demo shows %d columns tables", n)
	}
}

// columnsReport is a report with a description, column lines and a filename pattern.
const columnsReport = `-- title: Labelled
-- description: Orders of a period,
-- description: with money as money.
-- source: demo
-- param: from date "From" = 2025-01-01
-- column: unit_price "Unit price" number(#,##0.00;[Red]-#,##0.00)
-- column: created_at "Created" datetime
-- column: id
-- filename: orders-{from}
SELECT :from;
`

// noRedirects makes the test server's client return redirects instead of following them.
func noRedirects(ts *testServer) {
	ts.HC.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
}
