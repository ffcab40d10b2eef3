package app

import (
	"encoding/json"
	"net/http"
	"sheetq/internal/apptest"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Token: "s3cret-token-0123"})
	bearer := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	// The right token first: the wrong ones below use up the sign-in limit of this
	// client address (TestSignInLimit).
	ok := bearer("Bearer s3cret-token-0123")
	if res := ts.Request(http.MethodGet, "/api/v1/exports", nil, ok); res.StatusCode != http.StatusOK {
		t.Errorf("with the token: status %d; body %s", res.StatusCode, res.Body)
	}
	h := ok.Clone()
	h.Set("Content-Type", "application/json")
	if res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo","params":{"rows":1}}`), h); res.StatusCode != http.StatusAccepted {
		t.Errorf("POST with the token: status %d; body %s", res.StatusCode, res.Body)
	}
	for _, tt := range []struct {
		name   string
		header http.Header
	}{
		{"no token", nil},
		{"wrong token", bearer("Bearer nope")},
		{"token prefix", bearer("Bearer s3cret-token-012")},
		{"not bearer", bearer("Basic s3cret-token-0123")},
		{"bare token", bearer("s3cret-token-0123")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/api/v1/exports", "/api/v1/reports", "/api/v1/exports/x/file", "/"} {
				res := ts.Request(http.MethodGet, path, nil, tt.header)
				apptest.CheckProblem(t, res, http.StatusUnauthorized, "unauthorized")
				if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("GET %s: WWW-Authenticate %q", path, res.Header.Get("WWW-Authenticate"))
				}
			}
			h := tt.header.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set("Content-Type", "application/json")
			res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo","params":{"rows":1}}`), h)
			apptest.CheckProblem(t, res, http.StatusUnauthorized, "unauthorized")
			if n := ts.jobCount(); n != 1 {
				t.Errorf("an unauthenticated POST made %d jobs", n-1)
			}
		})
	}

	if res := ts.Get("/healthz"); res.StatusCode != http.StatusOK {
		t.Errorf("/healthz without a token: status %d; body %s", res.StatusCode, res.Body)
	}
}

func TestHostCheck(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.nip.io", "10.0.0.1"} {
		res := ts.Request(http.MethodGet, "/api/v1/exports", nil, http.Header{"Host": {host}})
		apptest.CheckProblem(t, res, http.StatusMisdirectedRequest, "bad_host")
	}
	res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo"}`),
		http.Header{"Host": {"evil.example"}, "Content-Type": {"application/json"}})
	apptest.CheckProblem(t, res, http.StatusMisdirectedRequest, "bad_host")
	if n := ts.jobCount(); n != 0 {
		t.Errorf("a refused host made %d jobs", n)
	}
	for _, host := range []string{"localhost", "localhost:1234", "127.0.0.1", "[::1]:8080"} {
		if res := ts.Request(http.MethodGet, "/healthz", nil, http.Header{"Host": {host}}); res.StatusCode != http.StatusOK {
			t.Errorf("Host %s: status %d; body %s", host, res.StatusCode, res.Body)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	res := ts.Get("/healthz")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var body struct {
		Status  string `json:"status"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil || body.Status != "ok" || body.Version != "test" {
		t.Errorf("body %s (%v), want status ok and version test", res.Body, err)
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
}

// The probes and the metrics are the API's, for machines: another method is the API's
// 405 problem with an Allow header, not the pages' HTML one. With tokens, /metrics asks
// for the token first, as its GET does.
func TestProbesRefuseOtherMethodsAsProblems(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			res := ts.Request(method, path, nil, nil)
			apptest.CheckProblem(t, res, http.StatusMethodNotAllowed, "method_not_allowed")
			if allow := res.Header.Get("Allow"); allow != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q, want GET, HEAD", method, path, allow)
			}
		}
	}
	ts = newTestServer(t, testOpts{Token: "s3cret-token-for-tests"})
	apptest.CheckProblem(t, ts.Request(http.MethodPost, "/metrics", nil, nil), http.StatusUnauthorized, "")
	apptest.CheckProblem(t, ts.Request(http.MethodPost, "/healthz", nil, nil), http.StatusMethodNotAllowed, "method_not_allowed")
}

func TestReports(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	res := ts.Get("/api/v1/reports")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d; body %s", res.StatusCode, res.Body)
	}
	var body struct {
		Reports []struct {
			ID     string `json:"id"`
			Params []struct {
				Name string `json:"name"`
			} `json:"params"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil {
		t.Fatalf("decode: %v; body %s", err, res.Body)
	}
	if len(body.Reports) == 0 || body.Reports[0].ID != "demo" || len(body.Reports[0].Params) != 3 {
		t.Errorf("reports %s, want demo with 3 params", res.Body)
	}
}

func TestHomePage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	res := ts.Get("/")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	page := string(res.Body)
	if !strings.Contains(page, `data-testid="no-exports"`) || strings.Contains(page, `data-testid="exports"`) {
		t.Errorf("empty home page lacks no-exports or shows exports:\n%s", page)
	}

	j := ts.Create(`{"report":"demo","params":{"rows":5}}`)
	ts.WaitStatus(j.ID, "SUCCEEDED")
	page = string(ts.Get("/").Body)
	for _, want := range []string{`data-testid="exports"`, `data-id="` + j.ID + `"`, `href="/api/v1/exports/` + j.ID + `/file"`} {
		if !strings.Contains(page, want) {
			t.Errorf("home page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, `data-testid="no-exports"`) {
		t.Error("home page still says no exports")
	}
	if res := ts.Get("/nope"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: status %d", res.StatusCode)
	}
}
