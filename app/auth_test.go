package app

import (
	"bytes"
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"sheetq/app/access"
	"sheetq/app/middleware"
	"sheetq/internal/apptest"
)

// noRedirects makes the test server's client return redirects instead of following them.
func noRedirects(ts *testServer) {
	ts.HC.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
}

func sessionFrom(t *testing.T, res apptest.Response) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == middleware.SessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie; Set-Cookie %q", middleware.SessionCookie, res.Header.Values("Set-Cookie"))
	return nil
}

func withCookie(c *http.Cookie, h http.Header) http.Header {
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add("Cookie", c.Name+"="+c.Value)
	return h
}

// Every named token works on the API, its name (never its secret) is recorded on the
// jobs it creates, and no token, a wrong one or a near miss is refused.
func TestNamedTokens(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Token: "default-secret-0123", Tokens: []Token{
		{Name: "ci", Secret: "ci-secret-0123456789"}, {Name: "alice", Secret: "alice-secret-0123"},
	}})
	c := newContractAuthorized(t, ts, "ci-secret-0123456789")
	body := []byte(`{"report":"demo","params":{"rows":1}}`)
	for _, tt := range []struct{ name, secret string }{
		{DefaultTokenName, "default-secret-0123"}, {"ci", "ci-secret-0123456789"}, {"alice", "alice-secret-0123"},
	} {
		res := c.do(exchange{op: "POST /api/v1/exports", body: body, status: http.StatusAccepted, checkRequest: true,
			header: http.Header{"Authorization": {"Bearer " + tt.secret}, "Content-Type": {"application/json"}}})
		j := apptest.DecodeJob(t, res)
		if j.CreatedBy != tt.name {
			t.Errorf("token %s: created_by %q", tt.name, j.CreatedBy)
		}
		if bytes.Contains(res.Body, []byte(tt.secret)) {
			t.Errorf("token %s: the job shows the secret: %s", tt.name, res.Body)
		}
		got := c.do(exchange{op: "GET /api/v1/exports/{id}", vars: map[string]string{"id": j.ID}, status: http.StatusOK,
			header: http.Header{"Authorization": {"Bearer alice-secret-0123"}}})
		if apptest.DecodeJob(t, got).CreatedBy != tt.name {
			t.Errorf("token %s: read back created_by %s", tt.name, got.Body)
		}
	}
	for _, h := range []string{"", "Bearer nope", "Bearer ci-secret-012345678", "Bearer ci-secret-01234567890", "Bearer default-secret-0123x"} {
		hdr := http.Header{"Content-Type": {"application/json"}}
		if h != "" {
			hdr.Set("Authorization", h)
		}
		res := ts.Request(http.MethodPost, "/api/v1/exports", bytes.NewReader(body), hdr)
		apptest.CheckProblem(t, res, http.StatusUnauthorized, "unauthorized")
	}
	if n := ts.jobCount(); n != 3 {
		t.Errorf("%d jobs, want the 3 authorised ones", n)
	}
}

// Token configuration mistakes are refused at start with a message naming them.
func TestTokenConfigErrors(t *testing.T) {
	t.Setenv("SHEETQ_TEST_CI_TOKEN", "from-env-0123456789")
	t.Setenv("SHEETQ_TEST_SHORT_TOKEN", "short")
	dir := t.TempDir()
	secretFile := dir + "/secret"
	if err := os.WriteFile(secretFile, []byte("from-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := Config{DataDir: dir, Token: "x1-0123456789abcdef", File: &FileConfig{Tokens: []TokenConfig{
		{Name: "ci", Token: "env:SHEETQ_TEST_CI_TOKEN"}, {Name: "ops", Token: "file:" + secretFile}, {Name: "lit", Token: "literal-0123456789"},
	}}}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	want := []Token{{Name: "default", Secret: "x1-0123456789abcdef"}, {Name: "ci", Secret: "from-env-0123456789"}, {Name: "ops", Secret: "from-file-0123456789"}, {Name: "lit", Secret: "literal-0123456789"}}
	if len(ok.tokens) != len(want) {
		t.Fatalf("tokens %v", ok.tokens)
	}
	for i := range want {
		// Tokens without a role are admins, as before roles existed.
		if got := ok.tokens[i]; got.Name != want[i].Name || got.Secret != want[i].Secret || got.Role != access.Admin {
			t.Errorf("token %d = %+v, want %+v", i, ok.tokens[i], want[i])
		}
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unset env", Config{File: &FileConfig{Tokens: []TokenConfig{{Name: "ci", Token: "env:SHEETQ_TEST_UNSET"}}}}, "SHEETQ_TEST_UNSET"},
		{"missing file", Config{File: &FileConfig{Tokens: []TokenConfig{{Name: "ci", Token: "file:" + dir + "/nope"}}}}, "nope"},
		{"no name", Config{File: &FileConfig{Tokens: []TokenConfig{{Token: "abc"}}}}, "no name"},
		{"bad name", Config{Tokens: []Token{{Name: "a b", Secret: "abc-0123456789abcdef"}}}, "a b"},
		{"duplicate name", Config{Token: "abc-0123456789abcdef", Tokens: []Token{{Name: "default", Secret: "def-0123456789abcdef"}}}, "two tokens"},
		{"duplicate secret", Config{Tokens: []Token{{Name: "a", Secret: "same-0123456789abcdef"}, {Name: "b", Secret: "same-0123456789abcdef"}}}, "same secret"},
		// Too weak to withstand guessing: each refusal says how to make a good token.
		{"empty secret", Config{Tokens: []Token{{Name: "a", Secret: ""}}}, `token "a" is blank: use at least 16 random characters, such as the output of ` + "`openssl rand -hex 32`"},
		{"blank secret", Config{Tokens: []Token{{Name: "a", Secret: "   \t "}}}, `token "a" is blank`},
		{"short --token", Config{Token: "s3cret"}, `token "default" is too short (6 characters): use at least 16`},
		{"15 characters", Config{Token: "0123456789abcde"}, "too short (15 characters)"},
		{"short file token", Config{File: &FileConfig{Tokens: []TokenConfig{{Name: "ci", Token: "literal"}}}}, `token "ci" is too short`},
		{"short env token", Config{File: &FileConfig{Tokens: []TokenConfig{{Name: "ci", Token: "env:SHEETQ_TEST_SHORT_TOKEN"}}}}, "openssl rand -hex 32"},
		{"base url with a path", Config{BaseURL: "https://example.com/sheetq/"}, "root"},
		{"base url not http", Config{BaseURL: "ftp://example.com/"}, "http"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.DataDir = dir
			if err := tt.cfg.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate: %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
	// A token from the config file is enough to listen beyond loopback.
	c := Config{DataDir: dir, Addr: "0.0.0.0:0", File: &FileConfig{Tokens: []TokenConfig{{Name: "ci", Token: "literal-0123456789"}}}}
	if err := c.validate(); err != nil {
		t.Fatalf("non-loopback with a config token: %v", err)
	}
}

// A browser without a session is sent to the sign-in page; the right token sets an
// HttpOnly, SameSite, path-wide cookie (not the token) that then opens pages, the API's
// GET routes including the event stream, and same-origin changes; sign-out ends it.
func TestLoginFlow(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Token: "s3cret-token-0123", Tokens: []Token{{Name: "ci", Secret: "ci-secret-0123456"}}})
	noRedirects(ts)
	html := http.Header{"Accept": {"text/html,application/xhtml+xml"}}

	res := ts.Request(http.MethodGet, "/?x=1", nil, html)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next=%2F%3Fx%3D1" {
		t.Fatalf("page without a session: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	// The API keeps answering 401 problems, whatever the Accept header.
	apptest.CheckProblem(t, ts.Request(http.MethodGet, "/api/v1/exports", nil, html), http.StatusUnauthorized, "unauthorized")

	res = ts.Request(http.MethodGet, "/login?next=/jobs", nil, html)
	if res.StatusCode != http.StatusOK || !bytes.Contains(res.Body, []byte(`data-testid="login-form"`)) ||
		!bytes.Contains(res.Body, []byte(`value="/jobs"`)) || bytes.Contains(res.Body, []byte(ts.dir.Root)) {
		t.Fatalf("GET /login: %d\n%s", res.StatusCode, res.Body)
	}

	res = ts.PostForm("/login", url.Values{"token": {"wrong"}, "next": {"/"}}, nil)
	if res.StatusCode != http.StatusUnauthorized || !bytes.Contains(res.Body, []byte(`data-testid="login-error"`)) {
		t.Fatalf("wrong token: %d\n%s", res.StatusCode, res.Body)
	}
	if len(res.Cookies()) != 0 {
		t.Fatalf("a wrong token set cookies: %v", res.Cookies())
	}
	// A cross-site post of a token (signing the victim in as the attacker) is refused.
	res = ts.PostForm("/login", url.Values{"token": {"ci-secret-0123456"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}})
	if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("cross-site sign-in: %d, cookies %v", res.StatusCode, res.Cookies())
	}

	res = ts.PostForm("/login", url.Values{"token": {"ci-secret-0123456"}, "next": {"//evil.example/"}}, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d, Location %q (an off-site next must become /)", res.StatusCode, res.Header.Get("Location"))
	}
	ck := sessionFrom(t, res)
	if !ck.HttpOnly || ck.Secure || ck.Path != "/" || (ck.SameSite != http.SameSiteLaxMode && ck.SameSite != http.SameSiteStrictMode) ||
		ck.MaxAge <= 0 || strings.Contains(ck.Value, "ci-secret") {
		t.Fatalf("cookie %+v", ck)
	}

	if res := ts.Request(http.MethodGet, "/", nil, withCookie(ck, html)); res.StatusCode != http.StatusOK ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("home page with the session: %d %s", res.StatusCode, res.Body)
	}
	if res := ts.Request(http.MethodGet, "/api/v1/exports", nil, withCookie(ck, nil)); res.StatusCode != http.StatusOK {
		t.Fatalf("API GET with the session: %d %s", res.StatusCode, res.Body)
	}
	// The event stream (EventSource cannot send headers, only cookies).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/events", nil)
	req.Header = withCookie(ck, http.Header{"Accept": {"text/event-stream"}})
	stream, err := ts.HC.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if stream.StatusCode != http.StatusOK || !strings.HasPrefix(stream.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("event stream with the session: %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	stream.Body.Close()
	cancel()

	// A change with the cookie: same-origin works and is recorded under the token's
	// name; from another site it is refused.
	h := withCookie(ck, http.Header{"Content-Type": {"application/json"}, "Sec-Fetch-Site": {"same-origin"}})
	res = ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo","params":{"rows":1}}`), h)
	if res.StatusCode != http.StatusAccepted || apptest.DecodeJob(t, res).CreatedBy != "ci" {
		t.Fatalf("same-origin POST with the session: %d %s", res.StatusCode, res.Body)
	}
	h.Set("Sec-Fetch-Site", "cross-site")
	res = ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo","params":{"rows":1}}`), h)
	apptest.CheckProblem(t, res, http.StatusForbidden, "cross_origin")

	res = ts.Request(http.MethodPost, "/logout", nil, withCookie(ck, nil))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	if out := sessionFrom(t, res); out.MaxAge >= 0 || out.Value != "" {
		t.Fatalf("logout cookie %+v, want it cleared", out)
	}
}

// A session is worth no more than its token: a cookie for a removed token, for a token
// whose secret changed, a forged or expired one, or one signed with another key fails.
func TestSessionCookieRejected(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Token: "s3cret-token-0123"})
	key, err := os.ReadFile(ts.dir.SessionKey())
	if err != nil {
		t.Fatal(err)
	}
	cookie := func(a *middleware.Auth, name string) *http.Cookie {
		v, _, err := a.NewSession(name)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Cookie{Name: middleware.SessionCookie, Value: v}
	}
	same := middleware.NewAuth([]Token{{Name: "default", Secret: "s3cret-token-0123"}, {Name: "gone", Secret: "removed-token"}}, key, nil)
	good := cookie(same, "default")
	if res := ts.Request(http.MethodGet, "/api/v1/exports", nil, withCookie(good, nil)); res.StatusCode != http.StatusOK {
		t.Fatalf("a cookie the server's key signed for a live token: %d", res.StatusCode)
	}
	forged := *good
	name, rest, _ := strings.Cut(good.Value, ".")
	_ = name
	forged.Value = "Z29uZQ." + rest // "gone" with default's signature
	for what, c := range map[string]*http.Cookie{
		"removed token":  cookie(same, "gone"),
		"rotated secret": cookie(middleware.NewAuth([]Token{{Name: "default", Secret: "old-secret"}}, key, nil), "default"),
		"other key":      cookie(middleware.NewAuth([]Token{{Name: "default", Secret: "s3cret-token-0123"}}, bytes.Repeat([]byte{7}, 32), nil), "default"),
		"expired": cookie(middleware.NewAuth([]Token{{Name: "default", Secret: "s3cret-token-0123"}}, key,
			func() time.Time { return time.Now().Add(-middleware.SessionTTL - time.Minute) }), "default"),
		"forged name": &forged,
		"garbage":     {Name: middleware.SessionCookie, Value: "s3cret-token-0123"},
	} {
		res := ts.Request(http.MethodGet, "/api/v1/exports", nil, withCookie(c, nil))
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", what, res.StatusCode)
		}
	}
}

// Behind a trusted proxy the client address, scheme and host come from X-Forwarded-*;
// from anyone else those headers are ignored.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	ts := newTestServer(t, testOpts{Token: "s3cret-token-0123", TrustedProxies: loopback,
		BaseURL: "https://sheetq.example.com/", Log: &logs})
	noRedirects(ts)
	fwd := http.Header{"X-Forwarded-For": {"198.51.100.7, 203.0.113.9"}, "X-Forwarded-Proto": {"https"},
		"X-Forwarded-Host": {"sheetq.example.com"}, "X-Request-Id": {"proxied-1"}}
	res := ts.PostForm("/login", url.Values{"token": {"s3cret-token-0123"}}, fwd)
	if res.StatusCode != http.StatusSeeOther || !sessionFrom(t, res).Secure {
		t.Fatalf("sign-in through an https proxy: %d, cookie %+v", res.StatusCode, res.Cookies())
	}
	apptest.WaitFor(t, 5*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "request_id=proxied-1") && strings.Contains(logs.String(), "client_ip=203.0.113.9"), logs.String()
	})
	// The public host passes the Host check; other names do not.
	if res := ts.Request(http.MethodGet, "/healthz", nil, http.Header{"Host": {"sheetq.example.com"}}); res.StatusCode != http.StatusOK {
		t.Errorf("Host of the base URL: %d", res.StatusCode)
	}
	apptest.CheckProblem(t, ts.Request(http.MethodGet, "/healthz", nil, http.Header{"X-Forwarded-Host": {"evil.example"}}),
		http.StatusMisdirectedRequest, "bad_host")
	// The curl example on the home page names the public URL.
	page := ts.Request(http.MethodGet, "/", nil, http.Header{"Authorization": {"Bearer s3cret-token-0123"}})
	if !bytes.Contains(page.Body, []byte("https://sheetq.example.com/api/v1/exports")) {
		t.Errorf("home page does not show the base URL:\n%s", page.Body)
	}

	plain := newTestServer(t, testOpts{Token: "s3cret-token-0123"})
	noRedirects(plain)
	res = plain.PostForm("/login", url.Values{"token": {"s3cret-token-0123"}}, fwd)
	if res.StatusCode != http.StatusSeeOther || sessionFrom(t, res).Secure {
		t.Fatalf("forwarded headers from an untrusted peer made the cookie Secure: %+v", res.Cookies())
	}
	apptest.CheckProblem(t, plain.Request(http.MethodGet, "/healthz", nil, http.Header{"X-Forwarded-Host": {"sheetq.example.com"}, "Host": {"sheetq.example.com"}}),
		http.StatusMisdirectedRequest, "bad_host")
}

// Every line logged while serving a request carries its id, not only the access line.
func TestRequestIDOnEveryLogLine(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{Token: "s3cret-token-0123", Log: &logs})
	res := ts.PostForm("/login", url.Values{"token": {"wrong"}}, http.Header{"X-Request-Id": {"req-42"}})
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("X-Request-Id") != "req-42" {
		t.Fatalf("status %d, X-Request-Id %q", res.StatusCode, res.Header.Get("X-Request-Id"))
	}
	var warn, access bool
	apptest.WaitFor(t, 5*time.Second, func() (bool, string) {
		warn, access = false, false
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "sign-in with a wrong token") {
				warn = strings.Contains(line, "request_id=req-42")
			}
			if strings.Contains(line, "msg=request") && strings.Contains(line, "path=/login") {
				access = strings.Contains(line, "request_id=req-42")
			}
		}
		return warn && access, logs.String()
	})
	if strings.Contains(logs.String(), "wrong") && strings.Contains(logs.String(), "token=wrong") {
		t.Errorf("a token value reached the log:\n%s", logs.String())
	}
}
