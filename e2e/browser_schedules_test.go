//go:build !windows

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"sheetq/jobs/export/sample"
)

// sampleWithRelay is a data directory as a first run leaves it (the sample shop and its
// reports), whose config file also names an SMTP relay, which a schedule that emails
// needs to be saved; no test mails through it.
func sampleWithRelay(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	if _, err := sample.Install(t.Context(), sample.Layout{DataDir: data}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(data, "sheetq.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n[smtp]\nhost = \"smtp.example.com\"\nfrom = \"sheetq <reports@example.com>\"\n"); err != nil {
		t.Fatal(err)
	}
	return data
}

// Creating a schedule in the browser: the form takes the viewer's time zone, follows a
// change of report, and previews the next five runs with their relative dates resolved
// as fields change, without a reload; saved, the schedule's page shows it; Pause and
// Resume work from its page and from the list; Delete asks and deletes.
func TestBrowserSchedulesCreatePreviewPause(t *testing.T) {
	p := startBinary(t, sampleWithRelay(t), nil)
	b := newTab(t, p.url)
	if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"}); err != nil {
		t.Fatalf("time zone override: %v", err)
	}
	b.open("/schedules")
	// Written in the browser's zone, after the one reload that tells the server.
	b.waitFor("the page in the browser's zone", stepTimeout, `document.body.dataset.zone === "Europe/Berlin" && document.readyState === "complete"`, nil)
	b.waitVisible(tid("schedules-empty"), stepTimeout)
	b.click(tid("new-schedule"))
	b.waitVisible(tid("schedule-form"), stepTimeout)
	b.waitFor("the viewer's time zone", stepTimeout, `document.querySelector(`+js(tid("schedule-timezone"))+`).value === "Europe/Berlin"`, nil)

	// Another report: its parameters, the zone kept.
	mustEval[bool](b, `(() => { const s = document.querySelector(`+js(tid("schedule-report"))+`); s.value = "orders";
		s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	b.waitVisible(tid("param-param.from"), stepTimeout)
	if got := b.attr(tid("schedule-timezone"), "value"); got != "Europe/Berlin" {
		t.Errorf("zone after the change of report %q", got)
	}

	b.setMarker()
	setValue := func(sel, value string) {
		t.Helper()
		mustEval[bool](b, `(() => { const e = document.querySelector(`+js(sel)+`); e.value = `+js(value)+
			`; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	}
	setValue(tid("param-param.from"), "month_start(-1)")
	setValue(tid("param-param.to"), "month_start(0)")
	b.click(tid("cron-preset") + `[data-cron="0 6 1 * *"]`)
	if got := mustEval[string](b, `document.querySelector(`+js(tid("schedule-cron-input"))+`).value`); got != "0 6 1 * *" {
		t.Fatalf("preset set cron %q", got)
	}
	// The next 1st at 06:00 in Berlin, and the month before it.
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(berlin)
	first := time.Date(now.Year(), now.Month(), 1, 6, 0, 0, 0, berlin)
	if !first.After(now) {
		first = first.AddDate(0, 1, 0)
	}
	wantParams := "from = " + first.AddDate(0, -1, 0).Format("2006-01-02") + ", to = " + first.Format("2006-01-02")
	runs := tid("schedule-preview") + " " + tid("schedule-run")
	b.waitFor("five runs on the 1st with last month's dates", stepTimeout, `(() => {
		const rs = [...document.querySelectorAll(`+js(runs)+`)];
		return rs.length === 5 && rs[0].querySelector("time").textContent.includes(`+js(first.Format("2006-01-02 15:04"))+`) &&
			rs[0].textContent.replace(/\s+/g, " ").includes(`+js(wantParams)+`); })()`, nil)

	// A wrong expression says so in the preview; put right, the runs come back.
	setValue(tid("schedule-cron-input"), "0 6 32 * *")
	b.waitVisible(tid("preview-error"), stepTimeout)
	if got := b.text(tid("preview-error")); !strings.Contains(got, "Cron expression") {
		t.Errorf("preview error %q", got)
	}
	setValue(tid("schedule-cron-input"), "0 6 1 * *")
	b.waitFor("the runs again", stepTimeout, `document.querySelectorAll(`+js(runs)+`).length === 5`, nil)
	b.checkMarker("while previewing")

	setValue(tid("schedule-email"), "ann@example.com")
	b.click(tid("schedule-save"))
	b.waitFor("the schedule's page", stepTimeout, `/^\/schedules\/[^/]+$/.test(location.pathname) && !!document.querySelector(`+js(tid("schedule-title"))+`)`, nil)
	page := mustEval[string](b, `location.pathname`)
	if got := b.text(tid("schedule-title")); got != "Orders in a period" {
		t.Errorf("title %q", got)
	}
	if got := b.count(tid("schedule-run")); got != 5 {
		t.Errorf("%d next runs on the page", got)
	}
	if got := b.text(tid("schedule-deliveries")); got != "email to ann@example.com" {
		t.Errorf("deliveries %q", got)
	}

	// Pause on its page; resume from the list.
	b.click(tid("pause-button"))
	b.waitFor("paused", stepTimeout, `(() => { const e = document.querySelector(`+js(tid("schedule-state"))+`); return !!e && e.textContent.trim() === "paused"; })()`, nil)
	b.waitVisible(tid("schedule-runs-paused"), stepTimeout)
	b.open("/schedules")
	row := tid("schedule-row") + `[data-id="` + strings.TrimPrefix(page, "/schedules/") + `"]`
	b.waitAttr(row, "data-paused", "true", stepTimeout)
	b.click(row + " " + tid("resume-button"))
	b.waitAttr(row, "data-paused", "false", stepTimeout)
	if got := b.text(row + " " + tid("schedule-cron")); got != "0 6 1 * *" {
		t.Errorf("list cron %q", got)
	}
	if got := b.text(row + " " + tid("schedule-zone")); got != "Europe/Berlin" {
		t.Errorf("list zone %q", got)
	}
	// The next run in the viewer's zone, which the list names once.
	if got, want := b.text(row+" time"), first.Format("2006-01-02 15:04"); got != want {
		t.Errorf("list's next run %q, want %q", got, want)
	}
	if got := b.text(tid("schedules-zone")); !regexp.MustCompile(`^Times in CES?T\.$`).MatchString(got) {
		t.Errorf("schedules-zone %q", got)
	}

	// Delete: the script asks (answered yes here) and the list says it is gone.
	b.open(page)
	mustEval[bool](b, `(window.confirm = () => true, true)`)
	b.click(tid("delete-button"))
	b.waitVisible(tid("schedule-deleted"), stepTimeout)
	if got := b.count(tid("schedule-row")); got != 0 {
		t.Errorf("%d schedules after delete", got)
	}
}

// At 375 px wide the Schedules pages fit the screen.
func TestBrowserSchedulesPhoneWidth(t *testing.T) {
	p := startBinary(t, sampleWithRelay(t), nil)
	b := newTab(t, p.url)
	b.do("emulate a phone", stepTimeout, chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	b.open("/schedules/new?report=orders")
	b.waitVisible(tid("schedule-form"), stepTimeout)
	mustEval[bool](b, `(() => { const f = document.querySelector(`+js(tid("param-param.from"))+`); f.value = "month_start(-1)";
		document.querySelector(`+js(tid("param-param.to"))+`).value = "month_start(0)";
		document.querySelector(`+js(tid("schedule-email"))+`).value = "a-rather-long-address-for-a-phone@reports.example.com";
		return true; })()`)
	b.click(tid("schedule-save"))
	b.waitVisible(tid("schedule-title"), stepTimeout)
	page := mustEval[string](b, `location.pathname`)
	for _, path := range []string{"/schedules", "/schedules/new?report=orders", page, page + "/edit"} {
		b.open(path)
		b.waitVisible("main h1", stepTimeout)
		if w := mustEval[float64](b, `document.documentElement.scrollWidth`); w > 375 {
			wide := mustEval[string](b, `(() => { const out = []; document.querySelectorAll("main *").forEach(e => { const r = e.getBoundingClientRect(); if (r.right > 376) out.push(e.tagName + "." + e.className + " " + Math.round(r.right)); }); return out.slice(0, 8).join(", "); })()`)
			t.Errorf("%s is %v px wide at 375: %s", path, w, wide)
		}
	}
	b.open("/schedules")
	b.shoot(screenshotDir(t), "schedules-list")
	b.open(page + "/edit")
	b.waitVisible(tid("schedule-run"), stepTimeout)
	b.shoot(screenshotDir(t), "schedules-form")
}
