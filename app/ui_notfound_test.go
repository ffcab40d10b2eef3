package app

import (
	"net/http"
	"sheetq/internal/apptest"
	"strings"
	"testing"
)

// A path with no page gets a 404 page inside the layout, with its navigation and a
// link back, instead of Go's bare "404 page not found"; a page asked with a method it
// does not take gets a 405 page with an Allow header. API paths keep problem+json.
func TestUIUnknownPathsGetAPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	for _, path := range []string{"/nope", "/exports/abc/nothing", "/reports/x/y"} {
		doc := apptest.Page(t, ts.Get(path), http.StatusNotFound)
		if got := strings.TrimSpace(doc.Find("h1").Text()); got != "Page not found" {
			t.Errorf("%s: heading %q", path, got)
		}
		if msg := apptest.TID(doc, "page-error").Text(); !strings.Contains(msg, path) {
			t.Errorf("%s: message %q does not name the path", path, msg)
		}
		for _, id := range []string{"nav-exports", "nav-new", "nav-reports", "nav-queue"} {
			if apptest.TID(doc, id).Length() != 1 {
				t.Errorf("%s: no %s in the 404 page", path, id)
			}
		}
		if doc.Find(`a[href="/"]`).Length() == 0 {
			t.Errorf("%s: no way back to the exports", path)
		}
	}

	res := ts.Request(http.MethodPost, "/queue", nil, nil)
	apptest.Page(t, res, http.StatusMethodNotAllowed)
	if allow := res.Header.Get("Allow"); allow != "GET, HEAD" {
		t.Errorf("POST /queue: Allow %q, want GET, HEAD", allow)
	}

	// Paths that only take a form's POST, which GET /exports/{id} or /schedules/{id}
	// would take for an id: the address of a bulk action's page, entered again.
	for _, path := range []string{"/exports/bulk", "/schedules/preview"} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			res := ts.Request(method, path, nil, nil)
			doc := apptest.Page(t, res, http.StatusMethodNotAllowed)
			if allow := res.Header.Get("Allow"); allow != "POST" {
				t.Errorf("%s %s: Allow %q, want POST", method, path, allow)
			}
			if got := strings.TrimSpace(doc.Find("h1").Text()); got != "Not allowed here" {
				t.Errorf("%s %s: heading %q", method, path, got)
			}
		}
	}

	apptest.CheckProblem(t, ts.Get("/api/v1/nope"), http.StatusNotFound, "no_route")
	apptest.CheckProblem(t, ts.Request(http.MethodPut, "/api/v1/exports", nil, nil), http.StatusMethodNotAllowed, "method_not_allowed")
}
