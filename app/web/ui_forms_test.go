package web_test

import (
	"net/http"
	"net/url"
	"sheetq/internal/apptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

// The New export chooser: every card shows its report's title, id and description, and
// a broken file's card shows its error, cut to a few lines with the whole of it below.
func TestUIFormsReportCards(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "described.sql", "-- title: Described\n-- description: Orders of one week.\n-- source: demo\nSELECT 1;\n")
	long := strings.Repeat("averyveryverylongidentifierwithoutanyspace", 8)
	apptest.WriteReport(t, ts.dir, "broken.sql", "-- title: Broken\n-- "+long+": x\nSELECT 1;\n")
	var doc *goquery.Document
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		doc = apptest.Page(t, ts.Get("/exports/new"), http.StatusOK)
		return doc.Find(`[data-testid="report-card"][data-id="broken"]`).Length() == 1 &&
			doc.Find(`[data-testid="report-card"][data-id="described"]`).Length() == 1, "reports not loaded yet"
	})
	card := doc.Find(`[data-testid="report-card"][data-id="described"]`)
	if got := card.Find("strong").Text(); got != "Described" {
		t.Errorf("title %q", got)
	}
	if got := apptest.TID(card, "report-description").Text(); got != "Orders of one week." {
		t.Errorf("description %q", got)
	}
	if !strings.Contains(card.Text(), "described") {
		t.Errorf("card has no id: %q", card.Text())
	}
	broken := doc.Find(`[data-testid="report-card"][data-id="broken"]`)
	msg := apptest.TID(broken, "report-broken")
	if title := msg.AttrOr("title", ""); !strings.Contains(title, long) {
		t.Errorf("the broken card's error has not the whole error in its title: %q", title)
	}
	if !strings.Contains(apptest.TID(broken, "report-broken-full").Text(), long) {
		t.Error("a long error is not offered whole")
	}
	if apptest.TID(broken, "report-choice").Length() != 0 {
		t.Error("a broken report can be chosen")
	}
}

// A number out of its bounds gets one message, with thousands separators, and no hint
// that says the same under it; other errors keep the hint.
func TestUIFormsRangeErrorSaysOneThing(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	key := apptest.FormOf(t, apptest.Page(t, ts.Get("/exports/new?report=demo"), http.StatusOK)).Get("idempotency_key")
	bad := url.Values{"report": {"demo"}, "idempotency_key": {key}, "rows": {"20000000"}, "seconds": {"x"}, "fail_first": {"0"}}
	doc := apptest.Page(t, ts.PostForm("/exports", bad, nil), http.StatusUnprocessableEntity)
	help := doc.Find("#help-rows")
	if got := strings.Join(strings.Fields(help.Text()), " "); got != "Must be from 0 to 10,000,000." {
		t.Errorf("rows help %q, want one message with separators", got)
	}
	if got := apptest.TID(doc, "error-seconds").Text(); !strings.Contains(got, "number") {
		t.Errorf("seconds error %q", got)
	}
	if got := doc.Find("#help-seconds .muted").Text(); got != "From 0 to 86,400." {
		t.Errorf("seconds hint %q: another error keeps the hint", got)
	}
}

// /exports/new?report=ID&NAME=VALUE... opens the form filled in: unknown keys are
// ignored, a wrong value is shown as given, format and BOM are taken.
func TestUIFormsPrefill(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "kinds.sql", "-- title: Kinds\n-- source: demo\n-- param: on bool \"On\" = true\n"+
		"-- param: at datetime \"At\" = 2025-01-01T00:00:00Z\n-- param: n int \"N\" = 5\nSELECT :on, :at, :n;\n")
	doc := apptest.Page(t, ts.Get("/exports/new?report=demo&rows=25&seconds=oops&nosuch=1&format=csv&bom=1"), http.StatusOK)
	for name, want := range map[string]string{"rows": "25", "seconds": "oops", "fail_first": "0"} {
		if got := apptest.TID(doc, "param-"+name).AttrOr("value", ""); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if doc.Find(`[name="nosuch"]`).Length() != 0 {
		t.Error("an unknown key became a field")
	}
	if v := apptest.TID(doc, "file-format").Find("option[selected]").AttrOr("value", ""); v != "csv" {
		t.Errorf("format %q, want csv", v)
	}
	if _, on := apptest.TID(doc, "file-bom").Attr("checked"); !on {
		t.Error("bom=1 did not check the BOM box")
	}
	if apptest.TID(doc, "error-seconds").Length() != 0 {
		t.Error("a prefilled wrong value is marked before submit")
	}
	// The prefilled form submits as it is, with its values.
	form := apptest.FormOf(t, doc)
	form.Set("seconds", "0")
	form.Set("file-format", "csv")
	res := ts.PostForm("/exports", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", res.StatusCode, res.Body)
	}
	j := ts.job(strings.TrimPrefix(res.Header.Get("Location"), "/exports/"))
	if j.Params["rows"] != float64(25) || j.Format != "csv" || !j.BOM {
		t.Errorf("job params %v format %q bom %v", j.Params, j.Format, j.BOM)
	}
	// A script's "on" (a checkbox without a value sends it) is a checked box too, as it
	// is for a bool parameter.
	form.Set("idempotency_key", "prefill-bom-on-0001")
	form.Set("file-bom", "on")
	res = ts.PostForm("/exports", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit with file-bom=on: %d %s", res.StatusCode, res.Body)
	}
	if j := ts.job(strings.TrimPrefix(res.Header.Get("Location"), "/exports/")); !j.BOM {
		t.Errorf("file-bom=on: job bom %v", j.BOM)
	}

	// A bool's default holds unless the query names it; a datetime in RFC 3339 fits the
	// datetime-local input.
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return ts.Get("/exports/new?report=kinds").StatusCode == http.StatusOK, "kinds not loaded"
	})
	doc = apptest.Page(t, ts.Get("/exports/new?report=kinds&n=7"), http.StatusOK)
	if _, on := apptest.TID(doc, "param-on").Attr("checked"); !on {
		t.Error("a bool default true was cleared by a prefill that does not name it")
	}
	doc = apptest.Page(t, ts.Get("/exports/new?report=kinds&on=false&at=2025-03-04T05:06:00Z"), http.StatusOK)
	if _, on := apptest.TID(doc, "param-on").Attr("checked"); on {
		t.Error("on=false left the box checked")
	}
	if got := apptest.TID(doc, "param-at").AttrOr("value", ""); got != "2025-03-04T05:06" {
		t.Errorf("at = %q", got)
	}
}

// A report without parameters says so in words, not with an empty table.
func TestUIFormsReportWithoutParams(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "plain.sql", "-- title: Plain\n-- source: demo\nSELECT 1;\n")
	var doc *goquery.Document
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		doc = apptest.Page(t, ts.Get("/reports"), http.StatusOK)
		return doc.Find(`[data-testid="report"][data-id="plain"]`).Length() == 1, "plain not loaded"
	})
	plain := doc.Find(`[data-testid="report"][data-id="plain"]`)
	if got := apptest.TID(plain, "report-no-params").Text(); got != "No parameters." {
		t.Errorf("no-params %q", got)
	}
	if apptest.TID(plain, "report-params").Length() != 0 {
		t.Error("an empty parameters table is still shown")
	}
	if apptest.TID(doc.Find(`[data-testid="report"][data-id="demo"]`), "report-params").Length() != 1 {
		t.Error("demo lost its parameters table")
	}
}

// A report's `after=` rule is marked beside the later field, with the other values kept.
func TestUIFormsAfterRuleMarksTheField(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "period.sql", "-- title: Period\n-- source: demo\n-- param: from date \"From\" = 2025-01-01\n"+
		"-- param: to date \"To\" after=from = 2025-02-01\nSELECT :from, :to;\n")
	ts.WaitReport("period")
	doc := apptest.Page(t, ts.Get("/exports/new?report=period"), http.StatusOK)
	form := apptest.FormOf(t, doc)
	form.Set("from", "2025-03-01")
	form.Set("to", "2025-02-01")
	doc = apptest.Page(t, ts.PostForm("/exports", form, nil), http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "error-to").Text(); !strings.Contains(got, "after") {
		t.Errorf("error-to %q", got)
	}
	if doc.Find("#help-to").Length() != 1 || apptest.TID(doc, "error-to").Closest(".field").Find("#param-to").Length() != 1 {
		t.Error("the error is not beside the to field")
	}
	if apptest.TID(doc, "error-from").Length() != 0 || apptest.TID(doc, "param-from").AttrOr("value", "") != "2025-03-01" {
		t.Error("from: marked, or its value lost")
	}
	if apptest.TID(doc, "estimate").Length() != 1 {
		t.Error("the form shown again has no estimate")
	}
	if n := ts.jobCount(); n != 0 {
		t.Errorf("%d jobs from a wrong period", n)
	}
}

// A report's parameters named as the form's own fields (report, idempotency_key) or the
// prefill query's (report, format, bom) keep what was typed: the export runs with it,
// and "Run again with changes" opens the form with it.
func TestUIFormsParamsNamedAsTheFormsOwnFields(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "clash.sql", "-- title: Clash\n-- source: demo\n-- param: report text \"Report\"\n"+
		"-- param: idempotency_key text \"Key\"\n-- param: format text \"Format\" = wide\n-- param: bom bool \"BOM\"\n"+
		"SELECT :report, :idempotency_key, :format, :bom;\n")
	ts.WaitReport("clash")
	doc := apptest.Page(t, ts.Get("/exports/new?report=clash"), http.StatusOK)
	// The form as a browser sends it: every field in order, with the parameters typed.
	typed := map[string]string{"report": "north", "idempotency_key": "k-typed", "format": "narrow", "bom": "true"}
	form := url.Values{}
	apptest.TID(doc, "export-form").Find("input, select").Each(func(_ int, in *goquery.Selection) {
		name, val := in.AttrOr("name", ""), in.AttrOr("value", "")
		if in.Is("select") {
			val = in.Find("option[selected]").AttrOr("value", "")
		}
		// The parameter's field, under whatever name the form gives it.
		id := strings.TrimPrefix(strings.TrimPrefix(in.AttrOr("id", ""), "param-"), "param.")
		v, isParam := typed[id]
		if isParam && strings.HasPrefix(in.AttrOr("id", ""), "param-") {
			val = v
		}
		if _, on := in.Attr("checked"); in.AttrOr("type", "") == "checkbox" && !on && !isParam {
			return
		}
		form.Add(name, val)
	})
	res := ts.PostForm("/exports", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", res.StatusCode, res.Body)
	}
	loc := res.Header.Get("Location")
	j := ts.job(strings.TrimPrefix(loc, "/exports/"))
	if j.Report != "clash" || j.Params["report"] != "north" || j.Params["idempotency_key"] != "k-typed" ||
		j.Params["format"] != "narrow" || j.Params["bom"] != true || j.Format != "xlsx" || j.BOM {
		t.Fatalf("job %s params %v format %q bom %v", j.Report, j.Params, j.Format, j.BOM)
	}

	href := apptest.TID(apptest.Page(t, ts.Get(loc), http.StatusOK), "run-again-changes").AttrOr("href", "")
	doc = apptest.Page(t, ts.Get(href), http.StatusOK)
	field := func(param string) *goquery.Selection {
		return apptest.TID(doc, "export-form").Find(`[id="param-` + param + `"], [id="param-param.` + param + `"]`)
	}
	for param, want := range map[string]string{"report": "north", "idempotency_key": "k-typed", "format": "narrow"} {
		if got := field(param).AttrOr("value", ""); got != want {
			t.Errorf("run again (%s): %s = %q, want %q", href, param, got, want)
		}
	}
	if _, on := field("bom").Attr("checked"); !on {
		t.Errorf("run again (%s): the bom parameter is not checked", href)
	}
	if _, on := apptest.TID(doc, "file-bom").Attr("checked"); on {
		t.Errorf("run again (%s): the file's BOM box is checked", href)
	}
	if v := apptest.TID(doc, "file-format").Find("option[selected]").AttrOr("value", ""); v != "xlsx" {
		t.Errorf("run again (%s): file format %q", href, v)
	}
}

// A form whose text is not UTF-8 (a script's: a browser sends the page's UTF-8) is
// refused with a 400 page, as the API refuses such a body, instead of an export or a
// schedule whose text encoding/json had turned into U+FFFD.
func TestUIFormsRefuseTextThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "note.sql", "-- title: Note\n-- source: demo\n-- param: note text \"Note\"\nSELECT :note;\n")
	ts.WaitReport("note")
	key := apptest.FormOf(t, apptest.Page(t, ts.Get("/exports/new?report=note"), http.StatusOK)).Get("idempotency_key")
	doc := apptest.Page(t, ts.PostForm("/exports", url.Values{"report": {"note"}, "idempotency_key": {key}, "note": {"M\xfcller"}}, nil),
		http.StatusBadRequest)
	if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, "UTF-8") {
		t.Errorf("export form: %q", msg)
	}
	sched := url.Values{"report": {"note"}, "param.note": {"M\xfcller"}, "cron": {"0 6 * * *"}, "timezone": {"UTC"}, "action": {"save"}}
	doc = apptest.Page(t, ts.PostForm("/schedules", sched, nil), http.StatusBadRequest)
	if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, "UTF-8") {
		t.Errorf("schedule form: %q", msg)
	}
	if n := ts.jobCount(); n != 0 {
		t.Errorf("%d jobs", n)
	}
	if list, err := ts.sched.List(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("schedules %d (%v)", len(list), err)
	}
}

// A form larger than the server reads (64 KiB) gets a 413 page that says so, instead of
// a 400 asking to reload and submit it again, which fails again.
func TestUIFormsTooLargeSaysSo(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "note.sql", "-- title: Note\n-- source: demo\n-- param: note text \"Note\"\nSELECT :note;\n")
	ts.WaitReport("note")
	key := apptest.FormOf(t, apptest.Page(t, ts.Get("/exports/new?report=note"), http.StatusOK)).Get("idempotency_key")
	long := strings.Repeat("x", 70<<10)
	doc := apptest.Page(t, ts.PostForm("/exports", url.Values{"report": {"note"}, "idempotency_key": {key}, "note": {long}}, nil),
		http.StatusRequestEntityTooLarge)
	if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, "64 KiB") || !strings.Contains(msg, "shorten") {
		t.Errorf("export form: %q", msg)
	}
	sched := url.Values{"report": {"note"}, "param.note": {long}, "cron": {"0 6 * * *"}, "timezone": {"UTC"}, "action": {"save"}}
	apptest.Page(t, ts.PostForm("/schedules", sched, nil), http.StatusRequestEntityTooLarge)
	if n := ts.jobCount(); n != 0 {
		t.Errorf("%d jobs", n)
	}
}
