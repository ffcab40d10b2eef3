//go:build !windows

package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sheetq/internal/client"
)

// What a newcomer meets on the pages (issue 37): each test drives one item at desktop and
// phone width.

// widths are the two widths every test here looks at.
var widths = []struct {
	name  string
	width int64
}{{"desktop", 1280}, {"phone", 390}}

// at sets the tab's viewport to one of widths.
func (b *tab) at(name string, width int64) {
	b.t.Helper()
	emulate := chromedp.EmulateViewport(width, 844)
	if width < 500 {
		emulate = chromedp.EmulateViewport(width, 844, chromedp.EmulateMobile)
	}
	b.do("emulate "+name, stepTimeout, emulate)
}

// setField sets a form field's value as a person would, firing input and change.
func (b *tab) setField(sel, value string) {
	b.t.Helper()
	mustEval[bool](b, `(() => { const e = document.querySelector(`+js(sel)+`); e.value = `+js(value)+
		`; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
}

// rect is an element's box as the page lays it out.
type rect struct{ Left, Right, Top, Bottom, Height float64 }

func (b *tab) rect(sel string) rect {
	b.t.Helper()
	return mustEval[rect](b, `(() => { const r = document.querySelector(`+js(sel)+`).getBoundingClientRect();
		return {Left: r.left, Right: r.right, Top: r.top, Bottom: r.bottom, Height: r.height}; })()`)
}

// Item 2 and 6: a schedule's page lists each export it made with the time it was for
// (a space before it), its status, rows, size and a download; its buttons are one size
// and its status badge sits on the title's line. The list says where files go when
// nothing delivers them, and puts "* * * * *" into words.
func TestBrowserNewcomerSchedulePage(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil)
	sc, _, err := client.New(p.url, "", nil).CreateSchedule(t.Context(), client.ScheduleRequest{
		Report: "demo", Params: map[string]string{"rows": "20"}, Cron: "* * * * *", TimeZone: "UTC"})
	if err != nil {
		t.Fatalf("create a schedule: %v", err)
	}
	// Due a minute ago: the restarted node fires it at once.
	p.stop(t)
	makeDue(t, data, sc.ID)
	p = startBinary(t, data, nil)
	b := newTab(t, p.url)
	firing := tid("schedule-firing") + `:has(.s-SUCCEEDED)`
	for _, w := range widths {
		b.at(w.name, w.width)
		b.open("/schedules/" + sc.ID)
		deadline := time.Now().Add(jobTimeout)
		for b.count(firing) == 0 {
			if time.Now().After(deadline) {
				b.fatalf("no succeeded export of the schedule")
			}
			time.Sleep(200 * time.Millisecond) // the page is static: open it again
			b.open("/schedules/" + sc.ID)
		}
		text := b.text(firing)
		if !regexp.MustCompile(`\bfor \d{4}-\d\d-\d\d \d\d:\d\d`).MatchString(text) {
			t.Errorf("%s: a firing reads %q, want \"for <time>\" with a space", w.name, text)
		}
		if got := b.text(firing + " " + tid("schedule-firing-rows")); got != "20 rows" {
			t.Errorf("%s: firing rows %q, want \"20 rows\"", w.name, got)
		}
		if got := b.text(firing + " " + tid("schedule-firing-size")); !regexp.MustCompile(`^\d+(\.\d+)? (B|KB|KiB|kB)$`).MatchString(got) {
			t.Errorf("%s: firing size %q", w.name, got)
		}
		if href := b.attr(firing+" "+tid("schedule-firing-download"), "href"); !strings.HasSuffix(href, "/file") {
			t.Errorf("%s: firing download link %q", w.name, href)
		}
		if got := b.text(firing + " " + tid("schedule-firing-status")); got == "" {
			t.Errorf("%s: no status on the firing", w.name)
		}

		// Item 6: the buttons are one size, the badge on the title's line.
		edit, pause, del := b.rect(tid("edit-button")), b.rect(tid("pause-button")), b.rect(tid("delete-button"))
		if d := edit.Height - pause.Height; d > 1 || d < -1 || edit.Height-del.Height > 1 || del.Height-edit.Height > 1 {
			t.Errorf("%s: button heights edit %v, pause %v, delete %v", w.name, edit.Height, pause.Height, del.Height)
		}
		title, badge := b.rect(tid("schedule-title")), b.rect(tid("schedule-state"))
		if mid := (badge.Top + badge.Bottom) / 2; mid < title.Top || mid > title.Bottom || badge.Left < title.Right || badge.Left-title.Right > 32 {
			t.Errorf("%s: the status badge (%v..%v, from x %v) is not on the title's line, after it (%v..%v, to x %v)",
				w.name, badge.Top, badge.Bottom, badge.Left, title.Top, title.Bottom, title.Right)
		}

		// Item 6: the list's words.
		b.open("/schedules")
		row := tid("schedule-row") + `[data-id="` + sc.ID + `"]`
		b.waitVisible(row, stepTimeout)
		if got := b.text(row + " " + tid("schedule-deliveries")); !strings.Contains(got, "kept on the Exports page") || strings.Contains(got, "not delivered") {
			t.Errorf("%s: deliveries %q, want the files kept on the Exports page", w.name, got)
		}
		if got := b.text(row + " .sched-when"); !strings.Contains(got, "every minute") {
			t.Errorf("%s: * * * * * reads %q, want \"every minute\"", w.name, got)
		}
	}
}

// Item 3: without [smtp] and [deliveries] folders, the schedule form says so beside
// Email and Folder, with the config lines to add; with an SMTP relay set, Email does not.
func TestBrowserNewcomerScheduleDeliveryHints(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	b := newTab(t, p.url)
	for _, w := range widths {
		b.at(w.name, w.width)
		b.open("/schedules/new?report=demo")
		b.waitVisible(tid("schedule-email-setup"), stepTimeout)
		if got := b.text(tid("schedule-email-setup")); !strings.Contains(got, "[smtp]") || !strings.Contains(got, "host = ") {
			t.Errorf("%s: email hint %q, want the [smtp] lines", w.name, got)
		}
		b.waitVisible(tid("schedule-folder-setup"), stepTimeout)
		if got := b.text(tid("schedule-folder-setup")); !strings.Contains(got, "[deliveries]") || !strings.Contains(got, "folders = ") {
			t.Errorf("%s: folder hint %q, want the [deliveries] lines", w.name, got)
		}
		if sw := mustEval[float64](b, `document.documentElement.scrollWidth`); sw > float64(w.width) {
			t.Errorf("%s: the form is %v px wide", w.name, sw)
		}
	}
	relay := startBinary(t, sampleWithRelay(t), nil)
	rb := newTab(t, relay.url)
	rb.open("/schedules/new?report=demo")
	rb.waitVisible(tid("schedule-email"), stepTimeout)
	if n := rb.count(tid("schedule-email-setup")); n != 0 {
		t.Errorf("with [smtp] host set, the form still asks for it")
	}
}

// Item 4: the estimate's values do not run into their labels at phone width; an empty
// run is left out while others are not, and the basis says how many runs it used;
// values the form refuses ("To" before "From") get no estimate.
func TestBrowserNewcomerEstimate(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	for _, body := range []string{`{"report":"demo","params":{"rows":0}}`, `{"report":"demo","params":{"rows":2000}}`,
		`{"report":"orders","params":{"from":"2025-01-01","to":"2025-02-01"}}`} {
		j := p.submit(t, body)
		p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	}
	b := newTab(t, p.url)
	for _, w := range widths {
		b.at(w.name, w.width)
		b.open("/exports/new?report=demo&rows=3000")
		b.waitVisible(tid("estimate-rows"), stepTimeout)
		if got := b.attr(tid("estimate"), "data-rows"); got != "2000" {
			t.Errorf("%s: estimated %s rows from a run of 2,000 and an empty one, want 2000", w.name, got)
		}
		if got := b.text(tid("estimate-basis")); !strings.Contains(got, "from 1 run") || !strings.Contains(got, "1 empty run left out") {
			t.Errorf("%s: basis %q, want 1 run used and the empty one left out", w.name, got)
		}
		// The label and its value keep a gap.
		for _, dd := range []string{"estimate-rows", "estimate-size", "estimate-time"} {
			v := b.rect(tid(dd))
			l := mustEval[rect](b, `(() => { const r = document.querySelector(`+js(tid(dd))+`).previousElementSibling.getBoundingClientRect();
				return {Left: r.left, Right: r.right, Top: r.top, Bottom: r.bottom, Height: r.height}; })()`)
			sameLine := v.Top < l.Bottom && l.Top < v.Bottom
			if sameLine && v.Left-l.Right < 6 {
				t.Errorf("%s: %s starts %v px after its label", w.name, dd, v.Left-l.Right)
			}
		}

		b.open("/exports/new?report=orders")
		b.waitVisible(tid("estimate-rows"), stepTimeout)
		b.setField(tid("param-from"), "2025-03-01")
		b.setField(tid("param-to"), "2025-02-01")
		b.waitVisible(tid("estimate-refused"), stepTimeout)
		if n := b.count(tid("estimate-rows")); n != 0 {
			t.Errorf("%s: an estimate for To before From", w.name)
		}
	}
}

// Item 5: the byte order mark box (and the New export form's box that keeps formulas,
// issue 41) is disabled, and says why, unless CSV is chosen: with the script as the
// format changes, and in the markup without it.
func TestBrowserNewcomerBOM(t *testing.T) {
	p := startBinary(t, sampleWithRelay(t), nil)
	boxes := map[string][]string{
		"/exports/new?report=demo":   {"file-bom", "file-csv-formulas"},
		"/schedules/new?report=demo": {"file-bom"},
	}
	for path, ids := range boxes {
		res, err := http.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		html, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, id := range ids {
			box := regexp.MustCompile(`<input[^>]*id="` + id + `"[^>]*>`).FindString(string(html))
			if !strings.Contains(box, " disabled") {
				t.Errorf("%s without script: the box %s is enabled with Excel chosen", path, box)
			}
		}
	}
	b := newTab(t, p.url)
	for _, w := range widths {
		b.at(w.name, w.width)
		for _, path := range []string{"/exports/new?report=demo", "/schedules/new?report=demo"} {
			b.open(path)
			b.waitVisible(tid("file-bom"), stepTimeout)
			for _, id := range boxes[path] {
				disabled := `document.querySelector(` + js(tid(id)) + `).disabled`
				if !mustEval[bool](b, disabled) {
					t.Errorf("%s %s: the box %s is enabled with Excel chosen", w.name, path, id)
				}
				if got := b.text(`#help-` + id); !strings.Contains(got, "Only for CSV") {
					t.Errorf("%s %s: the box %s's help %q", w.name, path, id, got)
				}
				b.setField(tid("file-format"), "csv")
				b.waitFor("the box "+id+" enabled", stepTimeout, "!"+disabled, nil)
				b.setField(tid("file-format"), "xlsx")
				b.waitFor("the box "+id+" disabled", stepTimeout, disabled, nil)
			}
		}
	}
}

// Item 7: at phone width the exports list shows each export's parameters whole and its
// created time, and the navigation keeps its links on one line.
func TestBrowserNewcomerPhoneList(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	j := p.submit(t, `{"report":"demo","params":{"rows":1234,"seconds":0.5,"fail_first":0}}`)
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	b := newTab(t, p.url)
	for _, w := range widths {
		b.at(w.name, w.width)
		b.open("/")
		row := rowSel(j.ID)
		b.waitVisible(row, stepTimeout)
		params := row + " " + tid("row-params")
		if got := b.text(params); strings.HasSuffix(got, "…") || !strings.Contains(got, "1234") || !strings.Contains(got, "0.5") {
			t.Errorf("%s: parameters read %q", w.name, got)
		}
		if cut := mustEval[bool](b, `(() => { const e = document.querySelector(`+js(params)+`); let n = e;
			while (n && n.tagName !== "TR") { if (n.scrollWidth > n.clientWidth + 1) return true; n = n.parentElement; } return false; })()`); cut {
			t.Errorf("%s: the parameters are cut", w.name)
		}
		if !mustEval[bool](b, visibleExpr(row+" time[datetime]")) {
			t.Errorf("%s: the created time is not shown", w.name)
		}
		tops := mustEval[[]float64](b, `[...document.querySelectorAll("header.top nav a")].map(a => Math.round(a.getBoundingClientRect().top))`)
		for _, top := range tops {
			if top != tops[0] {
				t.Errorf("%s: the navigation wraps: link tops %v", w.name, tops)
				break
			}
		}
		if sw := mustEval[float64](b, `document.documentElement.scrollWidth`); sw > float64(w.width) {
			t.Errorf("%s: the list is %v px wide", w.name, sw)
		}
	}
}

// Item 9, the pages: a summary leaves out parameters at their defaults, the export page
// names parameters by their labels, and choosing a report in the schedule form keeps
// the form's URL.
func TestBrowserNewcomerParamsAndReportChange(t *testing.T) {
	p := startBinary(t, sampleWithRelay(t), nil)
	j := p.submit(t, `{"report":"demo","params":{"rows":5}}`)
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	b := newTab(t, p.url)
	for _, w := range widths {
		b.at(w.name, w.width)
		b.open("/")
		b.waitVisible(rowSel(j.ID), stepTimeout)
		if got := b.text(rowSel(j.ID) + " " + tid("row-params")); got != "rows 5" {
			t.Errorf("%s: summary %q, want only \"rows 5\"", w.name, got)
		}
		b.open("/exports/" + j.ID)
		b.waitVisible(tid("job-params"), stepTimeout)
		names := mustEval[[]string](b, `[...document.querySelectorAll(`+js(tid("job-params")+" dt")+`)].map(e => (e.querySelector(`+js(tid("job-param-label"))+`) || e).textContent.trim())`)
		if strings.Join(names, ",") != "Rows,Spread over seconds,Fail first attempts" {
			t.Errorf("%s: the export page names the parameters %q, want their labels", w.name, names)
		}

		b.open("/schedules/new?report=demo")
		b.waitVisible(tid("schedule-form"), stepTimeout)
		b.setField(tid("schedule-report"), "orders")
		b.waitVisible(tid("param-param.from"), stepTimeout)
		b.waitFor("the form's URL", stepTimeout, `location.pathname === "/schedules/new" && new URLSearchParams(location.search).get("report") === "orders"`, nil)
	}
}
