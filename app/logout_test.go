package app

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sheetq/app/middleware"
	"sheetq/internal/apptest"
)

// Signing out ends every session of the token, not only the cookie of the browser that
// signed out: a copy of the cookie, another browser's cookie of the same token and a
// cookie issued before session generations existed are all refused (pages go to
// /login, the API answers 401), after a restart too; a new sign-in works, and another
// token's sessions are not touched (issue 36, 7g).
func TestLogoutEndsCopiedSessions(t *testing.T) {
	t.Parallel()
	const secret, other = "ci-secret-0123456789", "ops-secret-0123456789"
	tokens := []Token{{Name: "ci", Secret: secret}, {Name: "ops", Secret: other}}
	dir := t.TempDir()
	ts := newTestServer(t, testOpts{DataDir: dir, Tokens: tokens, Idle: true})
	noRedirects(ts)

	signIn := func(ts *testServer, token string) *http.Cookie {
		t.Helper()
		res := ts.PostForm("/login", url.Values{"token": {token}, "next": {"/"}}, nil)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %s", res.StatusCode, res.Body)
		}
		return sessionFrom(t, res)
	}
	html := http.Header{"Accept": {"text/html"}}
	valid := func(ts *testServer, what string, c *http.Cookie) {
		t.Helper()
		if res := ts.Request(http.MethodGet, "/", nil, withCookie(c, html)); res.StatusCode != http.StatusOK {
			t.Errorf("%s: home page %d, want 200", what, res.StatusCode)
		}
		if res := ts.Request(http.MethodGet, "/api/v1/exports", nil, withCookie(c, nil)); res.StatusCode != http.StatusOK {
			t.Errorf("%s: API %d, want 200", what, res.StatusCode)
		}
	}
	refused := func(ts *testServer, what string, c *http.Cookie) {
		t.Helper()
		res := ts.Request(http.MethodGet, "/exports/new", nil, withCookie(c, html))
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login?") {
			t.Errorf("%s: page %d, Location %q; want a redirect to /login", what, res.StatusCode, res.Header.Get("Location"))
		}
		res = ts.Request(http.MethodGet, "/api/v1/exports", nil, withCookie(c, nil))
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: API %d, want 401", what, res.StatusCode)
			return
		}
		apptest.CheckProblem(t, res, http.StatusUnauthorized, "unauthorized")
	}

	mine := signIn(ts, secret)
	copied := &http.Cookie{Name: mine.Name, Value: mine.Value} // taken from the browser
	elsewhere := signIn(ts, secret)                            // the same token in another browser
	ops := signIn(ts, other)
	legacy := legacySession(t, dir, "ci", secret)
	for what, c := range map[string]*http.Cookie{"mine": mine, "copied": copied, "elsewhere": elsewhere, "ops": ops, "legacy": legacy} {
		valid(ts, what+" before sign-out", c)
	}

	res := ts.Request(http.MethodPost, "/logout", nil, withCookie(mine, nil))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("logout: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if out := sessionFrom(t, res); out.MaxAge >= 0 || out.Value != "" {
		t.Fatalf("logout cookie %+v, want it cleared", out)
	}
	for what, c := range map[string]*http.Cookie{"copied": copied, "elsewhere": elsewhere, "legacy": legacy} {
		refused(ts, what+" after sign-out", c)
	}
	valid(ts, "the other token's session", ops)
	again := signIn(ts, secret)
	valid(ts, "a new sign-in", again)

	// A logout with a cookie that is no longer valid, or with none, ends nothing more.
	for _, h := range []http.Header{withCookie(copied, nil), nil} {
		if res := ts.Request(http.MethodPost, "/logout", nil, h); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout without a valid session: %d %s", res.StatusCode, res.Body)
		}
	}
	valid(ts, "the new sign-in after a stale logout", again)

	// The file beside the session key keeps the generations, and no secret.
	b, err := os.ReadFile(filepath.Join(dir, "session.generations"))
	if err != nil || bytes.Contains(b, []byte(secret)) || !bytes.Contains(b, []byte(`"ci":1`)) {
		t.Fatalf("session.generations: %q, %v", b, err)
	}

	ts.Stop()
	ts = newTestServer(t, testOpts{DataDir: dir, Tokens: tokens, Idle: true})
	noRedirects(ts)
	for what, c := range map[string]*http.Cookie{"copied": copied, "elsewhere": elsewhere, "legacy": legacy} {
		refused(ts, what+" after a restart", c)
	}
	valid(ts, "the new sign-in after a restart", again)
	valid(ts, "the other token's session after a restart", ops)
	valid(ts, "a sign-in after the restart", signIn(ts, secret))
}

// legacySession is a session cookie as versions before session generations issued it:
// name.expiry.mac over "sheetq session v1", the name, the expiry and the secret's hash.
func legacySession(t *testing.T, dir, name, secret string) *http.Cookie {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(dir, "session.key"))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	sum := sha256.Sum256([]byte(secret))
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "sheetq session v1\x00%s\x00%d\x00", name, exp)
	m.Write(sum[:])
	enc := base64.RawURLEncoding
	return &http.Cookie{Name: middleware.SessionCookie,
		Value: enc.EncodeToString([]byte(name)) + "." + strconv.FormatInt(exp, 10) + "." + enc.EncodeToString(m.Sum(nil))}
}
