//go:build !windows

package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// Times in the browser's zone (issue 37, item 1): the pages' script tells the server the
// browser's zone (a cookie), loading the first page again once if it was written in
// another; then every time is in that zone, by its short name, said once per place: the
// exports table in its heading, the timeline above its items, the queue's "as of" and
// its charts' legend. No time is shown in UTC, or as RFC 3339; at 1280 and 390 px.
func TestBrowserTimesInViewerZone(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	id := submitMany(t, p, 1)[0]
	for _, tc := range []struct{ zone, short string }{
		{"Europe/Berlin", "CE"},   // CET or CEST
		{"America/New_York", "E"}, // EST or EDT
	} {
		loc, err := time.LoadLocation(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		short, _ := time.Now().In(loc).Zone()
		if !strings.HasPrefix(short, tc.short) {
			t.Fatalf("%s is %s now", tc.zone, short)
		}
		b := newTab(t, p.url)
		if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: tc.zone}); err != nil {
			t.Fatalf("time zone override: %v", err)
		}
		// The first page tells the server the zone, and is loaded again once, in it. (A
		// server that never learns it fails below, on what the pages say.)
		b.open("/")
		if !eventually(b, stepTimeout, `document.body.dataset.zone === `+js(tc.zone)+` && document.readyState === "complete"`) {
			t.Errorf("%s: the first page was not written in the browser's zone", tc.zone)
		}
		for _, w := range []struct {
			width int64
			path  string
		}{
			{1280, "/"}, {1280, "/exports/" + id}, {1280, "/queue"},
			{390, "/"}, {390, "/exports/" + id}, {390, "/queue"},
		} {
			path := w.path
			b.do("width", stepTimeout, chromedp.EmulateViewport(w.width, 800))
			b.open(path)
			times := mustEval[[][]string](b, `[...document.querySelectorAll("time[datetime]")].map(e => [e.getAttribute("datetime"), e.textContent.trim()])`)
			if len(times) == 0 {
				b.fatalf("%s %s: no times", tc.zone, path)
			}
			for _, tm := range times {
				at, err := time.Parse(time.RFC3339Nano, tm[0])
				if err != nil {
					t.Fatalf("%s %s: datetime %q: %v", tc.zone, path, tm[0], err)
				}
				if want := at.In(loc).Format("2006-01-02 15:04"); !strings.HasPrefix(tm[1], want) {
					t.Errorf("%s %s: %q shows %q, want %s…", tc.zone, path, tm[0], tm[1], want)
				}
			}
			text := mustEval[string](b, `document.body.innerText`)
			if !strings.Contains(text, short) {
				t.Errorf("%s %s: the page never names the zone %s", tc.zone, path, short)
			}
			if m := regexp.MustCompile(`\d{2}:\d{2}(:\d{2})?\s*(UTC|GMT)|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|\d{2}:\d{2}(:\d{2})?\s+` +
				regexp.QuoteMeta(tc.zone)).FindString(text); m != "" {
				t.Errorf("%s %s: a time not in the viewer's zone by its short name: %q", tc.zone, path, m)
			}
		}
		// Once per place: not on the table's rows, nor on the timeline's items.
		b.do("width", stepTimeout, chromedp.EmulateViewport(1280, 800))
		b.open("/")
		if got := b.text(tid("list-zone")); got != "("+short+")" {
			t.Errorf("%s: the Created heading says %q", tc.zone, got)
		}
		if got := b.text(tid("export-row") + " time"); strings.Contains(got, short) {
			t.Errorf("%s: a row names the zone: %q", tc.zone, got)
		}
		b.open("/exports/" + id)
		if got := b.text(tid("timeline-zone")); got != "Times in "+short+"." {
			t.Errorf("%s: timeline-zone %q", tc.zone, got)
		}
		if got := b.text(tid("timeline-item") + " time"); strings.Contains(got, short) {
			t.Errorf("%s: a timeline item names the zone: %q", tc.zone, got)
		}
	}
}

// eventually is waitFor that says whether expr came to hold within d instead of ending
// the test, so that what the page shows can be reported.
func eventually(b *tab, d time.Duration, expr string) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, err := eval[bool](b, expr); err == nil && ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}
