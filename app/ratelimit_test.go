package app

import (
	"bytes"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"sheetq/app/middleware"
	"sheetq/internal/apptest"
)

// Wrong tokens are limited per client address, bearer tokens and the sign-in form
// together: after 10, that address gets 429 with Retry-After for every token it sends,
// the right one too, logged once; other addresses, and a session cookie got earlier, are
// not held back.
func TestSignInLimit(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token-0123"
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{Token: secret, Log: &logs,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	noRedirects(ts)
	from := func(ip string, h http.Header) http.Header {
		h = h.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("X-Forwarded-For", ip)
		return h
	}
	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	const attacker, other = "198.51.100.7", "203.0.113.9"

	// A session signed in from the attacker's address before the attack (a colleague
	// behind the same NAT).
	res := ts.PostForm("/login", url.Values{"token": {secret}}, from(attacker, nil))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d\n%s", res.StatusCode, res.Body)
	}
	session := sessionFrom(t, res)

	// Wrong tokens count together, from the form and as bearer tokens.
	for i := range middleware.SignInFailures {
		if i%2 == 0 {
			res = ts.PostForm("/login", url.Values{"token": {fmt.Sprintf("guess-%d", i)}}, from(attacker, nil))
		} else {
			res = ts.Request(http.MethodGet, "/api/v1/exports", nil, from(attacker, bearer(fmt.Sprintf("guess-%d", i))))
		}
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d of %d: status %d, want 401", i+1, middleware.SignInFailures, res.StatusCode)
		}
	}

	c := newContractAuthorized(t, ts, secret) // from the proxy's own address: not limited
	for _, token := range []string{"guess-again", secret} {
		res = c.do(exchange{op: "GET /api/v1/exports", header: from(attacker, bearer(token)),
			status: http.StatusTooManyRequests, code: "too_many_attempts"})
		checkRetryAfter(t, res)
		res = ts.PostForm("/login", url.Values{"token": {token}}, from(attacker, nil))
		if res.StatusCode != http.StatusTooManyRequests || !bytes.Contains(res.Body, []byte(`data-testid="login-error"`)) ||
			!bytes.Contains(res.Body, []byte("Too many wrong tokens")) || len(res.Cookies()) != 0 {
			t.Fatalf("sign-in form from a locked-out address: %d, cookies %v\n%s", res.StatusCode, res.Cookies(), res.Body)
		}
		checkRetryAfter(t, res)
	}
	for i := range 30 {
		ts.Request(http.MethodGet, "/api/v1/exports", nil, from(attacker, bearer("more-"+strconv.Itoa(i))))
	}

	// Not held back: another address, with the right token or a wrong one; a session.
	if res := ts.Request(http.MethodGet, "/api/v1/exports", nil, from(other, bearer(secret))); res.StatusCode != http.StatusOK {
		t.Errorf("the right token from another address: %d %s", res.StatusCode, res.Body)
	}
	if res := ts.PostForm("/login", url.Values{"token": {secret}}, from(other, nil)); res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in from another address: %d", res.StatusCode)
	}
	apptest.CheckProblem(t, ts.Request(http.MethodGet, "/api/v1/exports", nil, from(other, bearer("nope"))),
		http.StatusUnauthorized, "unauthorized")
	if res := ts.Request(http.MethodGet, "/api/v1/exports", nil, from(attacker, withCookie(session, nil))); res.StatusCode != http.StatusOK {
		t.Errorf("a session cookie from the locked-out address: %d %s", res.StatusCode, res.Body)
	}

	if n := strings.Count(logs.String(), "sign-in attempts limited"); n != 1 {
		t.Errorf("the lockout was logged %d times, want once:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "guess-") {
		t.Errorf("a token reached the log:\n%s", logs.String())
	}
}

func checkRetryAfter(t *testing.T, res apptest.Response) {
	t.Helper()
	secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > int(middleware.SignInLockout.Seconds()) {
		t.Errorf("Retry-After %q, want 1 to %d seconds", res.Header.Get("Retry-After"), int(middleware.SignInLockout.Seconds()))
	}
}
