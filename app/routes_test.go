package app

import (
	"net/http"
	"testing"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// TestUncleanAPIPath: an API path with an empty, . or .. segment is 404, not ServeMux's
// redirect to the clean path, which a client follows with GET: DELETE
// /api/v1/exports/. would read the list and take the 200 for a deletion.
func TestUncleanAPIPath(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	for _, tt := range []struct{ method, path string }{
		{http.MethodDelete, "/api/v1/exports/."},
		{http.MethodGet, "/api/v1/exports/."},
		{http.MethodGet, "/api/v1/exports/./"},
		{http.MethodDelete, "/api/v1/exports/" + j.ID + "/.."},
		{http.MethodGet, "/api/v1//exports"},
		{http.MethodGet, "/api/v1/exports/x/../" + j.ID},
	} {
		apptest.CheckProblem(t, ts.Request(tt.method, tt.path, nil, nil), http.StatusNotFound, "not_found")
	}
	if cur, _ := ts.Job(j.ID); cur.ID != j.ID {
		t.Fatalf("job %s is gone after requests to unclean paths", j.ID)
	}
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"), http.StatusNotFound, "no_route") // clean, and unrouted
}
