package app

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/assets"
	"sheetq/store"
)

// page parses an HTML answer, requiring the status and an HTML content type.
func page(t *testing.T, res response, status int) *goquery.Document {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, res.body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want text/html", ct)
	}
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(res.body))
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// tid selects the elements with a data-testid.
func tid(s interface {
	Find(string) *goquery.Selection
}, id string) *goquery.Selection {
	return s.Find(`[data-testid="` + id + `"]`)
}

// postForm sends a urlencoded form with extra headers (Origin, Sec-Fetch-Site) and does
// not follow redirects, so the 303 itself can be checked.
func (ts *testServer) postForm(path string, form url.Values, header http.Header) response {
	ts.t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	hc := *ts.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := hc.Do(req)
	if err != nil {
		ts.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return response{Response: res, body: b.Bytes()}
}

// formOf reads the export form of a report page: its hidden fields and defaults.
func formOf(t *testing.T, doc *goquery.Document) url.Values {
	t.Helper()
	form := tid(doc, "export-form")
	if form.Length() != 1 {
		t.Fatalf("no export-form")
	}
	if m, _ := form.Attr("method"); m != "post" {
		t.Errorf("form method %q", m)
	}
	if a, _ := form.Attr("action"); a != "/exports" {
		t.Errorf("form action %q", a)
	}
	v := url.Values{}
	form.Find("input").Each(func(_ int, in *goquery.Selection) {
		name, _ := in.Attr("name")
		val, _ := in.Attr("value")
		if typ, _ := in.Attr("type"); typ == "checkbox" {
			if _, on := in.Attr("checked"); !on {
				return
			}
		}
		v.Set(name, val)
	})
	return v
}

func TestUIEveryPageHasLayoutAndSafeHeaders(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.create(`{"report":"demo","params":{"rows":3}}`)
	ts.waitStatus(j.ID, store.StatusSucceeded)
	for _, path := range []string{"/", "/exports/new", "/exports/new?report=demo", "/exports/" + j.ID, "/reports", "/queue", "/queue?range=day"} {
		res := ts.get(path)
		doc := page(t, res, http.StatusOK)
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP allows inline code: %q", path, csp)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", path, got)
		}
		if got := res.Header.Get("Referrer-Policy"); got == "" {
			t.Errorf("%s: no Referrer-Policy", path)
		}
		for _, id := range []string{"nav-exports", "nav-new", "nav-reports", "nav-queue", "version", "data-dir"} {
			if tid(doc, id).Length() != 1 {
				t.Errorf("%s: want one %s", path, id)
			}
		}
		if got := tid(doc, "version").Text(); !strings.Contains(got, "test") {
			t.Errorf("%s: version %q", path, got)
		}
		if got := tid(doc, "data-dir").Text(); !strings.Contains(got, ts.dir.Root) {
			t.Errorf("%s: data-dir %q, want %s", path, got, ts.dir.Root)
		}
		if st, _ := tid(doc, "conn-state").Attr("data-state"); st != "static" {
			t.Errorf("%s: conn-state %q before any script runs", path, st)
		}
		if _, hidden := tid(doc, "reconnect-banner").Attr("hidden"); !hidden {
			t.Errorf("%s: reconnect banner shown before any script runs", path)
		}
		// The CSP would block these: the pages must not depend on them.
		if n := doc.Find("script:not([src])").Length(); n > 0 {
			t.Errorf("%s: %d inline scripts", path, n)
		}
		if n := doc.Find("[style]").Length(); n > 0 {
			t.Errorf("%s: %d style attributes", path, n)
		}
		if src, _ := doc.Find("script[src]").Attr("src"); src != assets.URL("app.js") {
			t.Errorf("%s: script %q, want %q", path, src, assets.URL("app.js"))
		}
		events, _ := doc.Find("body").Attr("data-events")
		if !strings.HasPrefix(events, "/api/v1/events?last_event_id=") {
			t.Errorf("%s: data-events %q", path, events)
		}
	}
	// The API answers carry the headers too.
	if res := ts.get("/api/v1/exports"); res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("API answer lacks the security headers: %v", res.Header)
	}
}

func TestUINewExportForm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	doc := page(t, ts.get("/exports/new"), http.StatusOK)
	choice := doc.Find(`[data-testid="report-choice"][data-id="demo"]`)
	if href, _ := choice.Attr("href"); href != "/exports/new?report=demo" {
		t.Fatalf("demo choice href %q", href)
	}

	doc = page(t, ts.get("/exports/new?report=demo"), http.StatusOK)
	rows := tid(doc, "param-rows")
	if typ, _ := rows.Attr("type"); typ != "number" || rows.AttrOr("value", "") != "1000" ||
		rows.AttrOr("min", "") != "0" || rows.AttrOr("max", "") != "10000000" || rows.AttrOr("id", "") != "param-rows" {
		t.Errorf("rows input: %v", rows.Nodes[0].Attr)
	}
	if doc.Find(`label[for="param-rows"]`).Length() != 1 {
		t.Error("rows input has no label")
	}
	form := formOf(t, doc)
	key := form.Get("idempotency_key")
	if form.Get("report") != "demo" || key == "" {
		t.Fatalf("hidden fields: %v", form)
	}
	if again := formOf(t, page(t, ts.get("/exports/new?report=demo"), http.StatusOK)); again.Get("idempotency_key") == key {
		t.Error("two renderings of the form share an idempotency key")
	}

	// Invalid input: 422, an error beside each wrong field, every value kept, no job.
	bad := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"lots"}, "seconds": {"-5"}, "fail_first": {"2"}}
	res := ts.postForm("/exports", bad, nil)
	doc = page(t, res, http.StatusUnprocessableEntity)
	if got := tid(doc, "error-rows").Text(); !strings.Contains(got, "integer") {
		t.Errorf("error-rows %q", got)
	}
	if got := tid(doc, "error-seconds").Text(); !strings.Contains(got, "from 0 to 86,400") {
		t.Errorf("error-seconds %q", got)
	}
	if tid(doc, "error-fail_first").Length() != 0 {
		t.Error("a valid field got an error")
	}
	if v := tid(doc, "param-fail_first").AttrOr("value", ""); v != "2" {
		t.Errorf("valid value not kept: fail_first %q", v)
	}
	if v := tid(doc, "param-rows").AttrOr("value", ""); v != "lots" {
		t.Errorf("wrong value not kept for fixing: rows %q", v)
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("invalid form created %d jobs", n)
	}

	// Valid input twice with the same key (a double submit): one job, both go to it.
	good := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"10"}, "seconds": {"0"}, "fail_first": {"0"}}
	first := ts.postForm("/exports", good, nil)
	second := ts.postForm("/exports", good, nil)
	loc := first.Header.Get("Location")
	if first.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/exports/") {
		t.Fatalf("submit: status %d, Location %q; %s", first.StatusCode, loc, first.body)
	}
	if second.StatusCode != http.StatusSeeOther || second.Header.Get("Location") != loc {
		t.Errorf("double submit: status %d, Location %q, want %s", second.StatusCode, second.Header.Get("Location"), loc)
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("double submit made %d jobs", n)
	}
	id := strings.TrimPrefix(loc, "/exports/")
	j, _ := ts.waitStatus(id, store.StatusSucceeded)
	if j.Params["rows"] != float64(10) {
		t.Errorf("job params %v", j.Params)
	}
	// The same key through the API (the same path) finds the same job.
	api := ts.post(`{"report":"demo","params":{"rows":10,"seconds":0,"fail_first":0}}`, key)
	if got := decodeJob(t, api); got.ID != id {
		t.Errorf("API with the form's key gave job %s, want %s", got.ID, id)
	}

	// The same key with other values: refused with a message, no second job.
	changed := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"11"}}
	doc = page(t, ts.postForm("/exports", changed, nil), http.StatusUnprocessableEntity)
	if got := tid(doc, "form-error").Text(); !strings.Contains(got, id) {
		t.Errorf("form-error %q does not name the first job", got)
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("reused key made %d jobs", n)
	}

	page(t, ts.get("/exports/new?report=nosuch"), http.StatusNotFound)
	page(t, ts.postForm("/exports", url.Values{"report": {"nosuch"}, "idempotency_key": {"x"}}, nil), http.StatusNotFound)
	// Without a key (an old or foreign form) nothing is created and the form comes back.
	doc = page(t, ts.postForm("/exports", url.Values{"report": {"demo"}, "rows": {"3"}}, nil), http.StatusUnprocessableEntity)
	if tid(doc, "form-error").Length() != 1 || tid(doc, "param-rows").AttrOr("value", "") != "3" {
		t.Error("keyless submit: want form-error and the value kept")
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("keyless submit made a job: %d", n)
	}
}

// writeReport puts a report file in the test server's reports folder.
func writeReport(t *testing.T, ts *testServer, name, text string) {
	t.Helper()
	if err := os.MkdirAll(ts.dir.Reports(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts.dir.Reports(), name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestUICrossOriginFormsAreRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	form := func(key string) url.Values {
		return url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"1"}}
	}
	u, _ := url.Parse(ts.url)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"cross-site fetch metadata", http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"foreign Origin", http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"same-origin fetch metadata", http.Header{"Sec-Fetch-Site": {"same-origin"}}, http.StatusSeeOther},
		{"same Origin", http.Header{"Origin": {"http://" + u.Host}}, http.StatusSeeOther},
		{"no browser headers (curl, CLI)", nil, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ts.postForm("/exports", form(tc.name), tc.header)
			if res.StatusCode != tc.want {
				t.Errorf("status %d, want %d; %s", res.StatusCode, tc.want, res.body)
			}
		})
	}
	if n := ts.jobCount(); n != 3 {
		t.Errorf("%d jobs, want 3 (one per allowed request)", n)
	}
	// The API: refused to a cross-site browser, as problem+json; allowed to a script.
	res := ts.request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo"}`),
		http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"cross-site"}})
	checkProblem(t, res, http.StatusForbidden, "cross_origin")
	ts.create(`{"report":"demo","params":{"rows":1}}`)
}

func TestUIReportsEventStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.url+"/reports/events", nil)
	res, err := ts.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// Wait for the stream's opening line, so the subscription exists before the change.
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, "retry:") {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no opening line")
	}
	writeReport(t, ts, "new.sql", "-- title: New\n-- source: demo\nSELECT 1;\n")
	deadline := time.After(10 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended without a change event")
			}
			if l == "event: change" {
				break wait
			}
		case <-deadline:
			t.Fatal("no change event after a report file was written")
		}
	}
	// Shutdown ends the stream (graceful shutdown waits for open requests otherwise),
	// and a new one is refused.
	ts.hub.Stop()
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				checkProblem(t, ts.get("/reports/events"), http.StatusServiceUnavailable, "shutting_down")
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the reports stream stayed open after the hub stopped")
		}
	}
}
