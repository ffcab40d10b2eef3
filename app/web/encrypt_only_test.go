package web_test

import (
	"net/http"
	"strings"
	"testing"

	"sheetq/internal/apptest"
)

// secretReport hands out its files only encrypted with a password.
const secretReport = "-- title: Salaries\n-- source: demo\n-- encrypt: required\n-- param: rows int \"Rows\" = 5\nSELECT :rows;\n"

// A report with "-- encrypt: required": the reports page notes it, and the New export
// form offers no csv for it (nor takes one from the query), says why, and refuses a csv
// sent anyway beside the choice.
func TestEncryptOnlyReportForms(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "salaries.sql", secretReport)
	ts.WaitReport("salaries")

	doc := apptest.Page(t, ts.Get("/reports"), http.StatusOK)
	salaries := doc.Find(`[data-testid="report"][data-id="salaries"]`)
	if got := apptest.TID(salaries, "report-encrypt").Text(); got != "Files only with a password" {
		t.Errorf("the salaries report's note %q", got)
	}
	if n := apptest.TID(doc.Find(`[data-testid="report"][data-id="demo"]`), "report-encrypt").Length(); n != 0 {
		t.Error("the demo report says its files are only with a password")
	}

	doc = apptest.Page(t, ts.Get("/exports/new?report=salaries&format=csv&bom=1"), http.StatusOK)
	csv := apptest.TID(doc, "file-format").Find(`option[value="csv"]`)
	if _, disabled := csv.Attr("disabled"); !disabled {
		t.Error("csv can be chosen")
	}
	if _, selected := csv.Attr("selected"); selected {
		t.Error("csv is chosen, from the query")
	}
	if _, disabled := apptest.TID(doc, "file-bom").Attr("disabled"); !disabled {
		t.Error("the byte order mark box is enabled")
	}
	if apptest.TID(doc, "file-format-encrypt-only").Length() != 1 {
		t.Error("the form does not say why there is no csv")
	}
	demo := apptest.Page(t, ts.Get("/exports/new?report=demo"), http.StatusOK)
	if _, disabled := apptest.TID(demo, "file-format").Find(`option[value="csv"]`).Attr("disabled"); disabled {
		t.Error("csv is disabled for the demo report")
	}

	form := apptest.FormOf(t, doc)
	form.Set("file-format", "csv")
	before := ts.jobCount()
	doc = apptest.Page(t, ts.PostForm("/exports", form, nil), http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "error-file-format").Text(); !strings.Contains(got, "only encrypted with a password") {
		t.Errorf("a csv sent: the format's error %q", got)
	}
	if n := ts.jobCount(); n != before {
		t.Errorf("a csv sent: %d exports, want %d", n, before)
	}
}
