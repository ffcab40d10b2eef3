package app

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sheetq/assets"
	"sheetq/internal/apptest"
	"sheetq/store"
)

func TestUIEveryPageHasLayoutAndSafeHeaders(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	for _, path := range []string{"/", "/exports/new", "/exports/new?report=demo", "/exports/" + j.ID, "/reports", "/queue", "/queue?range=day"} {
		res := ts.Get(path)
		doc := apptest.Page(t, res, http.StatusOK)
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
			if apptest.TID(doc, id).Length() != 1 {
				t.Errorf("%s: want one %s", path, id)
			}
		}
		if got := apptest.TID(doc, "version").Text(); !strings.Contains(got, "test") {
			t.Errorf("%s: version %q", path, got)
		}
		if got := apptest.TID(doc, "data-dir").Text(); !strings.Contains(got, ts.dir.Root) {
			t.Errorf("%s: data-dir %q, want %s", path, got, ts.dir.Root)
		}
		if st, _ := apptest.TID(doc, "conn-state").Attr("data-state"); st != "static" {
			t.Errorf("%s: conn-state %q before any script runs", path, st)
		}
		if _, hidden := apptest.TID(doc, "reconnect-banner").Attr("hidden"); !hidden {
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
	if res := ts.Get("/api/v1/exports"); res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("API answer lacks the security headers: %v", res.Header)
	}
}

func TestUINewExportForm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	doc := apptest.Page(t, ts.Get("/exports/new"), http.StatusOK)
	choice := doc.Find(`[data-testid="report-choice"][data-id="demo"]`)
	if href, _ := choice.Attr("href"); href != "/exports/new?report=demo" {
		t.Fatalf("demo choice href %q", href)
	}

	doc = apptest.Page(t, ts.Get("/exports/new?report=demo"), http.StatusOK)
	rows := apptest.TID(doc, "param-rows")
	if typ, _ := rows.Attr("type"); typ != "number" || rows.AttrOr("value", "") != "1000" ||
		rows.AttrOr("min", "") != "0" || rows.AttrOr("max", "") != "10000000" || rows.AttrOr("id", "") != "param-rows" {
		t.Errorf("rows input: %v", rows.Nodes[0].Attr)
	}
	if doc.Find(`label[for="param-rows"]`).Length() != 1 {
		t.Error("rows input has no label")
	}
	form := apptest.FormOf(t, doc)
	key := form.Get("idempotency_key")
	if form.Get("report") != "demo" || key == "" {
		t.Fatalf("hidden fields: %v", form)
	}
	if again := apptest.FormOf(t, apptest.Page(t, ts.Get("/exports/new?report=demo"), http.StatusOK)); again.Get("idempotency_key") == key {
		t.Error("two renderings of the form share an idempotency key")
	}

	// Invalid input: 422, an error beside each wrong field, every value kept, no job.
	bad := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"lots"}, "seconds": {"-5"}, "fail_first": {"2"}}
	res := ts.PostForm("/exports", bad, nil)
	doc = apptest.Page(t, res, http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "error-rows").Text(); !strings.Contains(got, "integer") {
		t.Errorf("error-rows %q", got)
	}
	if got := apptest.TID(doc, "error-seconds").Text(); !strings.Contains(got, "from 0 to 86,400") {
		t.Errorf("error-seconds %q", got)
	}
	if apptest.TID(doc, "error-fail_first").Length() != 0 {
		t.Error("a valid field got an error")
	}
	if v := apptest.TID(doc, "param-fail_first").AttrOr("value", ""); v != "2" {
		t.Errorf("valid value not kept: fail_first %q", v)
	}
	if v := apptest.TID(doc, "param-rows").AttrOr("value", ""); v != "lots" {
		t.Errorf("wrong value not kept for fixing: rows %q", v)
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("invalid form created %d jobs", n)
	}

	// Valid input twice with the same key (a double submit): one job, both go to it.
	good := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"10"}, "seconds": {"0"}, "fail_first": {"0"}}
	first := ts.PostForm("/exports", good, nil)
	second := ts.PostForm("/exports", good, nil)
	loc := first.Header.Get("Location")
	if first.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/exports/") {
		t.Fatalf("submit: status %d, Location %q; %s", first.StatusCode, loc, first.Body)
	}
	if second.StatusCode != http.StatusSeeOther || second.Header.Get("Location") != loc {
		t.Errorf("double submit: status %d, Location %q, want %s", second.StatusCode, second.Header.Get("Location"), loc)
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("double submit made %d jobs", n)
	}
	id := strings.TrimPrefix(loc, "/exports/")
	j, _ := ts.WaitStatus(id, store.StatusSucceeded)
	if j.Params["rows"] != float64(10) {
		t.Errorf("job params %v", j.Params)
	}
	// The same key through the API (the same path) finds the same job.
	api := ts.Post(`{"report":"demo","params":{"rows":10,"seconds":0,"fail_first":0}}`, key)
	if got := apptest.DecodeJob(t, api); got.ID != id {
		t.Errorf("API with the form's key gave job %s, want %s", got.ID, id)
	}

	// The same key with other values: refused with a message, no second job.
	changed := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"11"}}
	doc = apptest.Page(t, ts.PostForm("/exports", changed, nil), http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "form-error").Text(); !strings.Contains(got, id) {
		t.Errorf("form-error %q does not name the first job", got)
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("reused key made %d jobs", n)
	}

	apptest.Page(t, ts.Get("/exports/new?report=nosuch"), http.StatusNotFound)
	apptest.Page(t, ts.PostForm("/exports", url.Values{"report": {"nosuch"}, "idempotency_key": {"x"}}, nil), http.StatusNotFound)
	// Without a key (an old or foreign form) nothing is created and the form comes back.
	doc = apptest.Page(t, ts.PostForm("/exports", url.Values{"report": {"demo"}, "rows": {"3"}}, nil), http.StatusUnprocessableEntity)
	if apptest.TID(doc, "form-error").Length() != 1 || apptest.TID(doc, "param-rows").AttrOr("value", "") != "3" {
		t.Error("keyless submit: want form-error and the value kept")
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("keyless submit made a job: %d", n)
	}
}

func TestUICrossOriginFormsAreRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	form := func(key string) url.Values {
		return url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"1"}}
	}
	u, _ := url.Parse(ts.URL)
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
			res := ts.PostForm("/exports", form(tc.name), tc.header)
			if res.StatusCode != tc.want {
				t.Errorf("status %d, want %d; %s", res.StatusCode, tc.want, res.Body)
			}
		})
	}
	if n := ts.jobCount(); n != 3 {
		t.Errorf("%d jobs, want 3 (one per allowed request)", n)
	}
	// The API: refused to a cross-site browser, as problem+json; allowed to a script.
	res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo"}`),
		http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"cross-site"}})
	apptest.CheckProblem(t, res, http.StatusForbidden, "cross_origin")
	ts.Create(`{"report":"demo","params":{"rows":1}}`)
}

func TestUIReportsEventStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/reports/events", nil)
	res, err := ts.HC.Do(req)
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
	apptest.WriteReport(t, ts.dir, "new.sql", "-- title: New\n-- source: demo\nSELECT 1;\n")
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
				apptest.CheckProblem(t, ts.Get("/reports/events"), http.StatusServiceUnavailable, "shutting_down")
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the reports stream stayed open after the hub stopped")
		}
	}
}
