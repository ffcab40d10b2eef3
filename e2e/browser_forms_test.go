//go:build !windows

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The New export form's estimate follows the values: changing the end date of the
// orders report turns "with these parameters" into the runs scaled to the new span,
// without a reload.
func TestBrowserFormsEstimate(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	for range 2 {
		j := p.submit(t, `{"report":"orders","params":{"from":"2025-01-01","to":"2025-02-01"}}`)
		p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	}
	b := newTab(t, p.url)
	b.open("/exports/new?report=orders")
	b.waitVisible(tid("estimate-basis"), stepTimeout)
	if got := b.text(tid("estimate-basis")); got != "Estimated from 2 recent runs with these parameters." {
		t.Errorf("estimate-basis %q", got)
	}
	rows := b.attr(tid("estimate"), "data-rows")
	if rows == "" || rows == "0" {
		t.Fatalf("estimate rows %q", rows)
	}
	b.setMarker()
	setValue := func(name, value string) {
		t.Helper()
		mustEval[bool](b, `(() => { const e = document.querySelector(`+js(tid("param-"+name))+`); e.value = `+js(value)+
			`; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	}
	basisIs := func(want string) string {
		return `(() => { const e = document.querySelector(` + js(tid("estimate-basis")) + `); return !!e && e.textContent.trim() === ` + js(want) + `; })()`
	}
	setValue("to", "2025-03-04")
	b.waitFor("the estimate scaled to 62 days", stepTimeout, basisIs("Estimated from 2 recent runs of this report, scaled to 62 days."), nil)
	if got := b.attr(tid("estimate"), "data-rows"); got == rows {
		t.Errorf("twice the days, the same rows: %s", got)
	}
	setValue("to", "2025-02-01")
	b.waitFor("the estimate back to the same parameters", stepTimeout, basisIs("Estimated from 2 recent runs with these parameters."), nil)
	b.checkMarker("after the estimate changed")
	if got := b.text(tid("estimate-queue")); !strings.Contains(got, "exports queue") {
		t.Errorf("estimate-queue %q", got)
	}
}

// The Queue page: a count opens the list filtered by its state, a running export's
// clock counts on by itself, and the waiting ones have their positions.
func TestBrowserFormsQueueDashboard(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--workers", "1")
	done := p.submit(t, `{"report":"demo","params":{"rows":5}}`)
	p.waitJob(t, done.ID, "SUCCEEDED", status("SUCCEEDED"))
	slow := p.submit(t, `{"report":"demo","params":{"rows":1000,"seconds":300}}`)
	p.waitJob(t, slow.ID, "PROCESSING", status("PROCESSING"))
	next := p.submit(t, `{"report":"demo","params":{"rows":5}}`)

	b := newTab(t, p.url)
	b.open("/queue")
	b.waitVisible(tid("running-row")+`[data-id="`+slow.ID+`"]`, stepTimeout)
	if got := b.attr(tid("waiting-row")+`[data-id="`+next.ID+`"]`, "data-position"); got != "1" {
		t.Errorf("waiting position %q, want 1", got)
	}
	clock := tid("running-row") + `[data-id="` + slow.ID + `"] ` + tid("running-for")
	first := b.text(clock)
	b.setMarker()
	b.waitFor("the running clock to move", stepTimeout, `(() => { const e = document.querySelector(`+js(clock)+`); return !!e && e.textContent.trim() !== `+js(first)+`; })()`, nil)
	b.checkMarker("while the clock ran")

	b.shoot(screenshotDir(t), "queue-busy")
	b.click(tid("count-link-SUCCEEDED"))
	b.waitFor("the filtered list", stepTimeout, `location.pathname === "/" && location.search === "?status=SUCCEEDED"`, nil)
	b.waitVisible(rowSel(done.ID), stepTimeout)
	if n := b.count(rowSel(slow.ID)); n != 0 {
		t.Errorf("the SUCCEEDED list shows the running export")
	}
}

// At 375 px wide the form, the reports and the queue pages fit the screen, and the
// charts' labels are at least 12 px.
func TestBrowserFormsPhoneWidth(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil)
	long := strings.Repeat("averyveryverylongidentifierwithoutanyspace", 6)
	if err := os.WriteFile(filepath.Join(data, "reports", "zz_broken.sql"), []byte("-- title: Broken\n-- "+long+": x\nSELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := p.submit(t, `{"report":"demo","params":{"rows":5}}`)
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	b := newTab(t, p.url)
	b.do("emulate a phone", stepTimeout, chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	for _, path := range []string{"/exports/new", "/exports/new?report=orders", "/exports/new?report=demo", "/reports", "/queue"} {
		b.open(path)
		b.waitVisible("main h1", stepTimeout)
		if path == "/reports" {
			b.waitVisible(tid("report-error"), stepTimeout)
		}
		if w := mustEval[float64](b, `document.documentElement.scrollWidth`); w > 375 {
			wide := mustEval[string](b, `(() => { const out = []; document.querySelectorAll("main *").forEach(e => { const r = e.getBoundingClientRect(); if (r.right > 376 && !e.closest(".table-wrap")) out.push(e.tagName + "." + e.className + " " + Math.round(r.right)); }); return out.slice(0, 8).join(", "); })()`)
			t.Errorf("%s is %v px wide at 375: %s", path, w, wide)
		}
	}
	b.open("/queue")
	b.waitVisible(tid("chart-throughput"), stepTimeout)
	if px := mustEval[float64](b, `Math.min(...[...document.querySelectorAll("svg text")].map(e => parseFloat(getComputedStyle(e).fontSize) * e.getScreenCTM().a))`); px < 12 {
		t.Errorf("the smallest chart label is %v px on a phone", px)
	}
	dir := screenshotDir(t)
	b.shoot(dir, "queue-forms")
	b.open("/exports/new?report=orders")
	b.waitVisible(tid("estimate"), stepTimeout)
	b.shoot(dir, "estimate-forms")
}

// A broken report's long error does not stretch the chooser's grid: every card keeps one
// width, at desktop and phone width, and the whole error is one click away.
func TestBrowserFormsReportCards(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil)
	long := strings.Repeat("averyveryverylongidentifierwithoutanyspace", 6)
	if err := os.WriteFile(filepath.Join(data, "reports", "zz_broken.sql"), []byte("-- title: Broken\n-- "+long+": x\nSELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newTab(t, p.url)
	cards := tid("report-card")
	widths := `(() => { const ws = [...document.querySelectorAll(` + js(cards) + `)].map(e => Math.round(e.getBoundingClientRect().width)); return Math.max(...ws) - Math.min(...ws); })()`
	for _, v := range []struct {
		name  string
		width int64
	}{{"desktop", 1280}, {"phone", 375}} {
		b.do("emulate "+v.name, stepTimeout, chromedp.EmulateViewport(v.width, 800))
		b.open("/exports/new")
		b.waitVisible(cards+`[data-id="zz_broken"] `+tid("report-broken"), stepTimeout)
		if n := b.count(tid("report-description")); n < 3 {
			t.Errorf("%s: %d sample reports show a description, want the 3 sample reports'", v.name, n)
		}
		if d := mustEval[float64](b, widths); d > 1 {
			t.Errorf("%s: the cards' widths differ by %v px", v.name, d)
		}
		if w := mustEval[float64](b, `document.documentElement.scrollWidth`); w > float64(v.width) {
			t.Errorf("%s: the page is %v px wide", v.name, w)
		}
		if h := mustEval[float64](b, `document.querySelector(`+js(tid("report-broken"))+`).getBoundingClientRect().height`); h > 100 {
			t.Errorf("%s: the error takes %v px of height, want it cut to a few lines", v.name, h)
		}
	}
	b.click(cards + `[data-id="zz_broken"] details summary`)
	b.waitVisible(tid("report-broken-full"), stepTimeout)
}
