//go:build !windows

package e2e

import (
	"net/http"
	"sheetq/internal/client"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The exports list and one export's page, in daily use: filters without Apply, search
// by id, "Load more" in place, live timings, Delete and bulk actions (times in the
// viewer's zone: browser_times_test.go), the notification, and phone width.

// submitMany requests n quick exports and waits until the last has ended.
func submitMany(t *testing.T, p *proc, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		ids = append(ids, p.submit(t, `{"report":"demo","params":{"rows":0}}`).ID)
	}
	p.waitJob(t, ids[n-1], "SUCCEEDED", status("SUCCEEDED"))
	return ids
}

func TestBrowserListFiltersSearchLoadMore(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	ids := submitMany(t, p, 52)
	b := newTab(t, p.url)
	b.open("/")
	b.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
	if b.count(tid("export-row")) != 50 {
		b.fatalf("first page: %d rows", b.count(tid("export-row")))
	}
	if mustEval[bool](b, visibleExpr(tid("filter-apply"))) {
		b.fatalf("the Apply button shows although the filters apply on change")
	}

	// Load more appends in place and keeps the position in the URL.
	// A marker on window: replaceState changes the URL, so the helpers' (keyed on it) cannot tell.
	mustEval[bool](b, `(window.__sameList = true)`)
	b.click(tid("load-more"))
	b.waitFor("52 rows", stepTimeout, `document.querySelectorAll(`+js(tid("export-row"))+`).length === 52`, nil)
	if !mustEval[bool](b, `window.__sameList === true`) {
		b.fatalf("Load more left the page instead of appending")
	}
	if b.count(tid("load-more")) != 0 {
		b.fatalf("Load more stays on the last page")
	}
	if got := mustEval[string](b, `location.search`); !strings.Contains(got, "n=52") {
		b.fatalf("URL after Load more: %q, want n=52", got)
	}
	last := mustEval[string](b, `[...document.querySelectorAll(`+js(tid("export-row"))+`)].pop().dataset.id`)
	if last != ids[0] {
		b.fatalf("last row %s, want the oldest export %s", last, ids[0])
	}
	// The appended rows are live like the others: deleting one elsewhere removes it.
	req, err := http.NewRequest(http.MethodDelete, p.url+"/api/v1/exports/"+ids[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	b.waitFor("the appended row to go live", stepTimeout, `!document.querySelector(`+js(rowSel(ids[0]))+`)`, nil)
	if !mustEval[bool](b, `window.__sameList === true`) {
		b.fatalf("the page was reloaded")
	}
	b.open("/?n=51")
	if n := b.count(tid("export-row")); n != 51 {
		b.fatalf("reload at n=51: %d rows", n)
	}

	// Select all shown ticks every row.
	b.click(tid("select-all"))
	if n := mustEval[int](b, `document.querySelectorAll(`+js(tid("row-select")+`:checked`)+`).length`); n != b.count(tid("export-row")) {
		b.fatalf("select all ticked %d of %d", n, b.count(tid("export-row")))
	}

	// A filter applies on change, without a click on Apply.
	b.open("/")
	// (SetValue fires input and change, as a person's choice does.)
	b.do("choose Ready", stepTimeout, chromedp.SetValue(chromedp.CSS(tid("filter-status")), "SUCCEEDED"))
	b.waitFor("status=SUCCEEDED in the URL", stepTimeout, `location.search.includes("status=SUCCEEDED")`, nil)
	b.waitVisible(tid("clear-filters"), stepTimeout)

	// Search by a full id goes to the export's page.
	b.do("search", stepTimeout, chromedp.SetValue(chromedp.CSS(tid("search-id")), ids[3]))
	b.click(tid("search-go"))
	b.waitFor("the export's page", stepTimeout, `location.pathname === `+js("/exports/"+ids[3]), nil)
}

// stubNotification replaces window.Notification, in every page the tab opens, with one
// that grants permission and records what it shows in window.__notes.
func stubNotification(t *testing.T, b *tab) {
	t.Helper()
	src := `window.__notes = []; window.__asked = 0;
	window.Notification = function (title, opts) { window.__notes.push({ title: title, body: (opts || {}).body }); };
	window.Notification.permission = "default";
	window.Notification.requestPermission = function () { window.__asked++; window.Notification.permission = "granted"; return Promise.resolve("granted"); };`
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
		t.Fatalf("stub Notification: %v", err)
	}
}

func TestBrowserLiveTimingAndNotification(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	b := newTab(t, p.url)
	stubNotification(t, b)
	j := p.submit(t, `{"report":"demo","params":{"rows":40000,"seconds":8}}`)
	p.waitJob(t, j.ID, "PROCESSING", status("PROCESSING"))

	// In the list, the running row's "ran" ticks between events.
	b.open("/")
	ran := rowSel(j.ID) + " " + tid("row-ran")
	b.waitVisible(ran, stepTimeout)
	first := b.text(ran)
	mustEval[bool](b, `(document.querySelector(`+js(ran)+`).dataset.mark = "1", true)`)
	b.waitFor("the list's ran time to tick", stepTimeout, `(() => { const e = document.querySelector(`+js(ran)+`);
		return !!e && e.dataset.mark === "1" && e.textContent.trim() !== `+js(first)+`; })()`, nil)

	// On the export's page, Ran and Total tick too; then the notification.
	b.open("/exports/" + j.ID)
	b.waitFor("running", stepTimeout, statusIs("PROCESSING"), nil)
	for _, name := range []string{"timing-ran", "timing-total"} {
		sel := tid(name)
		before := b.text(sel)
		if !strings.HasSuffix(before, "so far") {
			b.fatalf("%s says %q while running", name, before)
		}
		b.waitFor(name+" to tick", stepTimeout, `(() => { const e = document.querySelector(`+js(sel)+`); return !!e && e.textContent.trim() !== `+js(before)+`; })()`, nil)
	}
	b.waitVisible(tid("notify-button"), stepTimeout)
	b.click(tid("notify-button"))
	b.waitFor("permission asked", stepTimeout, `window.__asked === 1`, nil)
	if n := mustEval[int](b, `window.__notes.length`); n != 0 {
		b.fatalf("%d notifications before the export ended", n)
	}
	b.waitFor("SUCCEEDED", jobTimeout, statusIs("SUCCEEDED"), nil)
	b.waitFor("a notification", stepTimeout, `window.__notes.length === 1`, nil)
	if title := mustEval[string](b, `window.__notes[0].title`); !strings.Contains(title, "Demo rows") || !strings.Contains(title, "ready") {
		b.fatalf("notification %q", title)
	}
	if b.count(tid("notify-button")) != 0 {
		b.fatalf("the notify button stays on a finished export")
	}
}

func TestBrowserDeleteAndBulk(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	ids := submitMany(t, p, 4)
	b := newTab(t, p.url)

	// Delete from the export's page: a confirmation, then the list says so.
	b.open("/exports/" + ids[0])
	b.click(tid("delete-button"))
	b.waitVisible(tid("confirm-message"), stepTimeout)
	b.click(tid("confirm-button"))
	b.waitVisible(tid("list-notice"), stepTimeout)
	if got := b.text(tid("list-notice")); !strings.Contains(got, ids[0]) {
		b.fatalf("after delete the list says %q", got)
	}
	if b.count(rowSel(ids[0])) != 0 {
		b.fatalf("the deleted export is still listed")
	}

	// Bulk: tick two, Delete, confirm; the result says what was done.
	b.click(rowSel(ids[1]) + " " + tid("row-select"))
	b.click(rowSel(ids[2]) + " " + tid("row-select"))
	b.click(tid("bulk-delete"))
	b.waitVisible(tid("confirm-message"), stepTimeout)
	if got := b.text(tid("confirm-message")); !strings.Contains(got, "Of the 2 selected exports, 2 can be deleted") {
		b.fatalf("confirm says %q", got)
	}
	b.click(tid("confirm-button"))
	b.waitVisible(tid("bulk-summary"), stepTimeout)
	if got := b.text(tid("bulk-summary")); got != "Deleted 2." {
		b.fatalf("summary %q", got)
	}
	b.click(tid("bulk-back"))
	b.waitVisible(rowSel(ids[3]), stepTimeout)
	if n := b.count(tid("export-row")); n != 1 {
		b.fatalf("%d rows left, want 1", n)
	}

	// Run again with changes opens the form filled in.
	b.open("/exports/" + ids[3])
	b.click(tid("run-again-changes"))
	b.waitFor("the form", stepTimeout, `location.pathname === "/exports/new" && new URLSearchParams(location.search).get("report") === "demo"`, nil)
}

func TestBrowserPhoneWidth(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	ids := submitMany(t, p, 50)
	b := newTab(t, p.url)
	b.do("phone", stepTimeout, chromedp.EmulateViewport(375, 800, chromedp.EmulateMobile))
	for _, path := range []string{"/", "/exports/" + ids[0]} {
		b.open(path)
		b.waitAttr(tid("conn-state"), "data-state", "live", stepTimeout)
		if w := mustEval[int](b, `document.documentElement.scrollWidth`); w > 375 {
			b.fatalf("%s is %d px wide at 375", path, w)
		}
		// The connection state shares the header's first line.
		dy := mustEval[float64](b, `Math.abs(document.querySelector(".brand").getBoundingClientRect().top - document.querySelector(`+js(tid("conn-state"))+`).getBoundingClientRect().top)`)
		if dy > 12 {
			b.fatalf("%s: the connection state is %.0f px below the brand: a line of its own", path, dy)
		}
	}
	// The height is that of 50 finished rows: a running row carries a progress bar, and
	// how many still run when the page is read depends on the machine's load.
	for _, id := range ids {
		p.waitJob(t, id, "finished", func(j client.Job) bool { return j.Status == "SUCCEEDED" })
	}
	b.open("/")
	if n := b.count(tid("export-row")); n != 50 {
		b.fatalf("%d rows", n)
	}
	h := mustEval[int](b, `document.documentElement.scrollHeight`)
	t.Logf("50 exports at 375 px: %d px", h)
	if h > 5000 {
		b.fatalf("50 exports make a %d px page at 375 px", h)
	}
	// Each filter's label is on its control's line.
	for _, id := range []string{"filter-status", "filter-report"} {
		dy := mustEval[float64](b, `(() => { const s = document.querySelector(`+js(tid(id))+`), l = document.querySelector('label[for="' + s.id + '"]');
			return Math.abs((l.getBoundingClientRect().top + l.getBoundingClientRect().bottom) - (s.getBoundingClientRect().top + s.getBoundingClientRect().bottom)) / 2; })()`)
		if dy > 6 {
			b.fatalf("the %s label is %.0f px off its control's line", id, dy)
		}
	}
}
