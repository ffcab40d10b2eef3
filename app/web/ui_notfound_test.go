package web_test

import (
	"net/http"
	"sheetq/internal/apptest"
	"strings"
	"testing"
)

// "No such report" tells the user to pick a report from New export, and its link goes
// there, not to the exports list.
func TestUIUnknownReportLinksToNewExport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	doc := apptest.Page(t, ts.Get("/exports/new?report=nope"), http.StatusNotFound)
	if got := strings.TrimSpace(doc.Find("h1").Text()); got != "No such report" {
		t.Fatalf("heading %q", got)
	}
	if href, _ := apptest.TID(doc, "page-error-back").Attr("href"); href != "/exports/new" {
		t.Errorf("the way on goes to %q, want /exports/new", href)
	}
	doc = apptest.Page(t, ts.Get("/exports/nope"), http.StatusNotFound)
	if href, _ := apptest.TID(doc, "page-error-back").Attr("href"); href != "/" {
		t.Errorf("an unknown export's page: the way on goes to %q, want /", href)
	}
}
