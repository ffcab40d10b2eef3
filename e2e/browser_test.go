//go:build !windows

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// End-to-end flows through the pages in headless Chromium, against the real binary.
// They follow the data-testid contract of the pages; each flow is one test.

// statusIs is a JavaScript expression: the job page's status is s.
func statusIs(s string) string {
	return `(() => { const e = document.querySelector(` + js(tid("job-status")) + `); return !!e && e.dataset.status === ` + js(s) + `; })()`
}

// rowStatusIs is a JavaScript expression: the home page's row of job id has status s.
func rowStatusIs(id, s string) string {
	return `(() => { const e = document.querySelector(` + js(rowSel(id)) + `); return !!e && e.dataset.status === ` + js(s) + `; })()`
}

// Every page has the header, and its live connection opens.
func TestBrowserLayout(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil)
	b := newTab(t, p.url)
	pages := []string{"/", "/exports/new", "/exports/new?report=demo", "/reports", "/queue"}
	// Twice round in one tab: a page left behind must let go of its event stream, or
	// Chrome's six connections per host run out and the seventh page never loads.
	for i, path := range append(pages, pages...) {
		if err := b.try(stepTimeout, chromedp.Navigate(b.base+path)); err != nil {
			b.fatalf("page %d, %s, did not load: %v; if the earlier pages' event streams are still open (back/forward cache keeps them), Chrome has no connection left for it", i+1, path, err)
		}
		for _, name := range []string{"nav-exports", "nav-new", "nav-reports", "nav-queue", "version", "data-dir"} {
			b.waitVisible(tid(name), stepTimeout)
		}
		if got := b.text(tid("data-dir")); !strings.Contains(got, data) {
			t.Errorf("%s: data-dir says %q, want it to name %s", path, got, data)
		}
		b.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
		if b.count(tid("reconnect-banner")+"[hidden]") != 1 {
			b.fatalf("%s: the connection is live but the reconnect banner is not hidden", path)
		}
	}
}

// The main flow: request an export through the form, watch it progress live on its
// page, and download the file.
func TestBrowserExportProgressAndDownload(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	b := newTab(t, p.url)
	b.open("/")
	b.click(tid("nav-new"))
	demo := tid("report-choice") + `[data-id="demo"]`
	b.waitVisible(demo, stepTimeout)
	b.click(demo)
	b.waitVisible(tid("export-form"), stepTimeout)
	b.do("fill in the form", stepTimeout,
		chromedp.SetValue(chromedp.CSS(tid("param-rows")), "20000"),
		chromedp.SetValue(chromedp.CSS(tid("param-seconds")), "4"))
	b.click(tid("submit-export"))

	b.waitFor("the job page", stepTimeout, `location.pathname.startsWith("/exports/") && location.pathname !== "/exports/new" && !!document.querySelector(`+js(tid("job-status"))+`)`, nil)
	id, err := jobIDFromURL(mustEval[string](b, `location.pathname`))
	if err != nil {
		b.fatalf("after submitting: %v", err)
	}
	if j := p.get(t, id); j.ID != id {
		t.Fatalf("the page's job %s is not in the API: %+v", id, j)
	}
	b.setMarker()

	// Sample the progress bar while the job runs: it must move, not jump to the end.
	running := map[string]bool{}
	sample := func() {
		v, err := eval[string](b, `(`+statusIs("PROCESSING")+` ? "run:" : "") + `+progressExpr(tid("job-progress")))
		if err == nil && strings.HasPrefix(v, "run:") && v != "run:" {
			running[strings.TrimPrefix(v, "run:")] = true
		}
	}
	b.waitFor("SUCCEEDED", jobTimeout, statusIs("SUCCEEDED"), sample)
	b.checkMarker("at SUCCEEDED")
	if len(running) < 2 {
		b.fatalf("the progress bar did not move while the job ran: values seen %v", running)
	}
	t.Logf("progress values seen while running: %d", len(running))

	j := p.get(t, id)
	if j.File == nil {
		t.Fatalf("SUCCEEDED in the page but the API has no file: %+v", j)
	}
	for _, name := range []string{"file-name", "file-size", "file-sha256", "download-button"} {
		b.waitVisible(tid(name), stepTimeout)
	}
	if got := b.text(tid("file-sha256")); !strings.Contains(got, j.File.SHA256) {
		t.Errorf("file-sha256 says %q, the API %s", got, j.File.SHA256)
	}
	if b.count(tid("cancel-button")) != 0 {
		t.Errorf("a succeeded job still offers to cancel")
	}

	data, name := b.download(tid("download-button"))
	if shown := b.text(tid("file-name")); name != shown {
		t.Errorf("the browser saved the download as %q, the page names the file %q", name, shown)
	}
	if !strings.HasPrefix(string(data), "PK") {
		t.Fatalf("the download is not an xlsx (zip) file: %q…", data[:min(len(data), 16)])
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != j.File.SHA256 {
		t.Fatalf("downloaded %d bytes with sha256 %x, the job says %s", len(data), sum, j.File.SHA256)
	}
	b.checkMarker("after the download")

	b.open("/")
	b.waitAttr(rowSel(id), "data-status", "SUCCEEDED", stepTimeout)
	b.waitVisible(rowSel(id)+" "+tid("download"), stepTimeout)

	// Deleted through the API, the export leaves the open page without a reload.
	b.setMarker()
	req, err := http.NewRequest(http.MethodDelete, p.url+"/api/v1/exports/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: status %d", res.StatusCode)
	}
	b.waitFor("the deleted export's row to go", stepTimeout, `!document.querySelector(`+js(rowSel(id))+`)`, nil)
	b.checkMarker("after the deletion")
}

// Cancel from the job page: the job page and an open home page both show CANCELED
// without a reload.
func TestBrowserCancelRunningJob(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	j := p.submit(t, `{"report":"demo","params":{"rows":100000,"seconds":120}}`)
	b := newTab(t, p.url)
	home := b.another()
	home.open("/")
	home.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
	home.waitVisible(rowSel(j.ID), stepTimeout)
	home.setMarker()

	b.open("/exports/" + j.ID)
	b.waitFor("PROCESSING", jobTimeout, statusIs("PROCESSING"), nil)
	if b.count(tid("retry-button")) != 0 {
		t.Errorf("a running job offers to retry")
	}
	b.click(tid("cancel-button"))
	b.waitFor("CANCELED", jobTimeout, statusIs("CANCELED"), nil)
	b.waitVisible(tid("retry-button"), stepTimeout)
	b.waitFor("no cancel button", stepTimeout, `!document.querySelector(`+js(tid("cancel-button"))+`) || !(`+visibleExpr(tid("cancel-button"))+`)`, nil)
	b.waitVisible(tid("timeline-item")+`[data-type="canceled"]`, stepTimeout)
	if got := p.get(t, j.ID); got.Status != "CANCELED" {
		t.Fatalf("the page says CANCELED, the API %s", got.Status)
	}

	home.waitFor("the home row CANCELED", stepTimeout, rowStatusIs(j.ID, "CANCELED"), nil)
	home.checkMarker("after the cancel")
}

// A job that fails every attempt shows its retries and, at the end, its error.
func TestBrowserFailedJobShowsRetries(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--max-attempts", "2")
	b := newTab(t, p.url)
	b.open("/exports/new?report=demo")
	b.waitVisible(tid("export-form"), stepTimeout)
	b.do("fill in the form", stepTimeout,
		chromedp.SetValue(chromedp.CSS(tid("param-rows")), "100"),
		chromedp.SetValue(chromedp.CSS(tid("param-fail_first")), "5"))
	b.click(tid("submit-export"))
	b.waitFor("the job page", stepTimeout, `location.pathname !== "/exports/new" && !!document.querySelector(`+js(tid("job-status"))+`)`, nil)
	id, err := jobIDFromURL(mustEval[string](b, `location.pathname`))
	if err != nil {
		b.fatalf("after submitting: %v", err)
	}
	b.setMarker()

	attemptInfo := map[string]bool{}
	sample := func() {
		if v, err := eval[string](b, `(() => { const e = document.querySelector(`+js(tid("attempt-info"))+`); return e && !e.closest("[hidden]") ? e.textContent.trim() : ""; })()`); err == nil && v != "" {
			attemptInfo[v] = true
		}
	}
	b.waitFor("FAILED", jobTimeout, statusIs("FAILED"), sample)
	b.checkMarker("at FAILED")
	sample()
	if len(attemptInfo) == 0 {
		t.Errorf("attempt-info never showed while the job retried or after it failed")
	}
	t.Logf("attempt-info texts seen: %q", keys(attemptInfo))

	b.waitVisible(tid("timeline-item")+`[data-type="failed"]`, stepTimeout)
	types := mustEval[[]string](b, `[...document.querySelectorAll(`+js(tid("timeline-item"))+`)].map(e => e.dataset.type)`)
	want := []string{"accepted", "started", "attempt_failed", "started", "failed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("timeline %q, want %q (oldest first)", types, want)
	}
	j := p.get(t, id)
	if j.Status != "FAILED" || j.Attempt != 2 {
		t.Fatalf("API: %+v, want FAILED after 2 attempts", j)
	}
	jobErr := b.text(tid("job-error"))
	for _, want := range []string{"upstream", "simulated upstream failure"} {
		if !strings.Contains(jobErr, want) {
			t.Errorf("job-error %q does not say %q", jobErr, want)
		}
	}
	b.waitVisible(tid("retry-button"), stepTimeout)

	b.open("/")
	b.waitAttr(rowSel(id), "data-status", "FAILED", stepTimeout)
	if got := b.text(rowSel(id) + " " + tid("error")); !strings.Contains(got, "simulated upstream failure") {
		t.Errorf("the home row's error says %q", got)
	}
}

// A restart while the home page is open: the banner shows while the server is down,
// the page reconnects by itself, and then shows jobs that changed meanwhile.
func TestBrowserReconnectsAfterRestart(t *testing.T) {
	data := t.TempDir()
	// No shutdown grace: the running job goes back to PENDING and finishes after the restart.
	args := []string{"--shutdown-grace", "0s"}
	p := startBinary(t, data, nil, args...)
	addr := strings.TrimPrefix(p.url, "http://")
	b := newTab(t, p.url)
	b.open("/")
	b.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
	b.setMarker()

	running := p.submit(t, `{"report":"demo","params":{"rows":4000,"seconds":4}}`)
	b.waitFor("the new job PROCESSING", jobTimeout, rowStatusIs(running.ID, "PROCESSING"), nil)

	p.terminate(t)
	b.waitAttr(tid("conn-state"), "data-state", "down", stepTimeout)
	b.waitVisible(tid("reconnect-banner"), stepTimeout)

	p2 := startBinary(t, data, nil, append(args, "--addr", addr)...)
	if p2.url != p.url {
		t.Fatalf("restarted on %s, not %s", p2.url, p.url)
	}
	b.waitAttr(tid("conn-state"), "data-state", "live", jobTimeout)
	b.waitFor("the banner hidden again", stepTimeout, `!!document.querySelector(`+js(tid("reconnect-banner")+"[hidden]")+`)`, nil)

	fresh := p2.submit(t, `{"report":"demo","params":{"rows":100}}`)
	b.waitFor("the job submitted after the restart SUCCEEDED", jobTimeout, rowStatusIs(fresh.ID, "SUCCEEDED"), nil)
	b.waitFor("the interrupted job SUCCEEDED", jobTimeout, rowStatusIs(running.ID, "SUCCEEDED"), nil)
	if first := mustEval[string](b, `document.querySelector(`+js(tid("export-row"))+`).dataset.id`); first != fresh.ID {
		t.Errorf("the newest job %s is not at the top (%s is)", fresh.ID, first)
	}
	b.checkMarker("after the restart")
}

// Report files edited on disk change the reports page live; a broken file shows its
// error with file and line.
func TestBrowserReportsLive(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil)
	reports := filepath.Join(data, "reports")
	b := newTab(t, p.url)
	b.open("/reports")
	b.waitVisible(tid("report")+`[data-id="orders"]`, stepTimeout)
	b.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
	b.setMarker()

	live := tid("report") + `[data-id="e2e_live"]`
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(reports, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("e2e_live.sql", "-- title: Live report\n-- source: shop\n-- param: n int \"How many\" = 5\nSELECT id FROM orders LIMIT :n;\n")
	b.waitVisible(live, stepTimeout)
	if got := b.text(live + " " + tid("report-title")); got != "Live report" {
		t.Errorf("report-title %q", got)
	}
	if got := b.text(live + " " + tid("report-source")); !strings.Contains(got, "shop") {
		t.Errorf("report-source %q", got)
	}
	if got := b.text(live + " " + tid("report-sql")); !strings.Contains(got, "LIMIT :n") {
		t.Errorf("report-sql %q", got)
	}

	write("e2e_live.sql", "-- title: Live report, edited\n-- source: shop\nSELECT id FROM orders LIMIT 3;\n")
	b.waitFor("the edited title", stepTimeout, `(() => { const e = document.querySelector(`+js(live+" "+tid("report-title"))+`); return !!e && e.textContent.trim() === "Live report, edited"; })()`, nil)

	// The unknown parameter is on line 4.
	write("e2e_broken.sql", "-- title: Broken\n-- source: shop\nSELECT id FROM orders\nWHERE id = :missing;\n")
	broken := tid("report-error") + `[data-file*="e2e_broken.sql"]`
	b.waitVisible(broken, stepTimeout)
	if got := b.text(broken); !strings.Contains(got, "e2e_broken.sql:4:") || !strings.Contains(got, "missing") {
		t.Errorf("report-error %q, want it to say e2e_broken.sql:4: and name the parameter", got)
	}

	if err := os.Remove(filepath.Join(reports, "e2e_live.sql")); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the removed report gone", stepTimeout, `!document.querySelector(`+js(live)+`)`, nil)
	b.checkMarker("after the report files changed")
}

// Screenshots of every page, with jobs in several states, at desktop and phone widths.
// SHEETQ_SCREENSHOTS=docs/screenshots writes them into the repository.
func TestBrowserScreenshots(t *testing.T) {
	// A short data path, as a user's would be, not the test's long temporary one.
	data, err := os.MkdirTemp("", "sheetq-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	p := startBinary(t, data, nil, "--workers", "1", "--max-attempts", "2")
	dir := screenshotDir(t)

	ok, failed, _, running := p.exportInEachStatus(t)
	p.submit(t, `{"report":"orders","params":{"from":"2025-01-01","to":"2025-02-01"}}`) // waits behind the running one: PENDING
	if err := os.WriteFile(filepath.Join(data, "reports", "broken.sql"), []byte("-- title: Broken\n-- source: shop\nSELECT id FROM orders\nWHERE id = :missing;\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Each page in a tab of its own, closing the one before: the screenshots must not
	// depend on what a long walk through the pages leaves open (TestBrowserLayout does that).
	first := newTab(t, p.url)
	var b *tab
	page := func(path string) {
		if b != nil && b != first {
			b.close()
		}
		b = first.another()
		b.open(path)
	}

	page("/")
	b.waitFor("five rows", stepTimeout, `document.querySelectorAll(`+js(tid("export-row"))+`).length === 5`, nil)
	b.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
	b.shoot(dir, "home")

	page("/exports/new")
	b.waitVisible(tid("report-choice"), stepTimeout)
	b.shoot(dir, "new-export-choose")

	page("/exports/new?report=demo")
	b.waitVisible(tid("export-form"), stepTimeout)
	b.shoot(dir, "new-export")
	// The browser's own checks would stop a bad value before the server sees it.
	mustEval[bool](b, `(document.querySelector(`+js(tid("export-form"))+`).noValidate = true)`)
	b.do("type a bad value", stepTimeout, chromedp.SetValue(chromedp.CSS(tid("param-rows")), "-5"))
	b.click(tid("submit-export"))
	b.waitVisible(tid("error-rows"), stepTimeout)
	if got := b.attr(tid("param-rows"), "value"); got != "-5" {
		t.Errorf("the re-rendered form lost the typed value: %q", got)
	}
	b.shoot(dir, "new-export-error")

	page("/exports/" + ok.ID)
	b.waitVisible(tid("file-sha256"), stepTimeout)
	b.shoot(dir, "job-succeeded")
	page("/exports/" + failed.ID)
	b.waitVisible(tid("job-error"), stepTimeout)
	b.shoot(dir, "job-failed")
	page("/exports/" + running.ID)
	b.waitFor("PROCESSING", stepTimeout, statusIs("PROCESSING"), nil)
	b.shoot(dir, "job-running")

	page("/reports")
	b.waitVisible(tid("report-error"), stepTimeout)
	b.shoot(dir, "reports")

	page("/queue")
	b.waitVisible(tid("chart-throughput"), stepTimeout)
	b.shoot(dir, "queue")
	t.Logf("screenshots in %s", dir)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
