package assets

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesHashedFilesWithTheirTypes(t *testing.T) {
	h := Handler()
	for name, wantType := range map[string]string{"app.js": "javascript", "style.css": "text/css", "favicon.svg": "image/svg+xml"} {
		u := URL(name)
		if !strings.Contains(u, "?v=") || strings.HasSuffix(u, "?v=") {
			t.Errorf("URL(%s) = %q: no content hash", name, u)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		// Served with nosniff, a script or stylesheet must carry its real type.
		if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Type"), wantType) {
			t.Errorf("%s: status %d, Content-Type %q", u, rec.Code, rec.Header().Get("Content-Type"))
		}
		if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q", u, cc)
		}
		// A stale hash is served but not cached for long.
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/assets/"+name+"?v=old", nil))
		if cc := rec.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s with a stale hash: Cache-Control %q", name, cc)
		}
	}
}
