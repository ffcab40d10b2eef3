package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/app/access"
	"sheetq/app/middleware"
	"sheetq/internal/oidctest"
)

// The people of the tests' provider. Alice has groups and an attribute from [[people]],
// Carol is an admin by [[people]], Bob has no entry (a member without groups), and Dora's
// provider sends no email. (The example provider leaves email_verified out rather than
// send false: claims_test.go covers a false one.)
var (
	alice = oidctest.User{Username: "alice", Password: "alice-pw-1", FirstName: "Alice", LastName: "Archer", Email: "Alice@Example.com"}
	bob   = oidctest.User{Username: "bob", Password: "bob-pw-1", FirstName: "Bob", LastName: "Baker", Email: "bob@example.com"}
	carol = oidctest.User{Username: "carol", Password: "carol-pw-1", FirstName: "Carol", LastName: "Cook", Email: "carol@example.com"}
	dora  = oidctest.User{Username: "dora", Password: "dora-pw-1", FirstName: "Dora"}
)

const (
	adminSecret  = "admin-token-0123456789"
	memberSecret = "member-token-0123456789"
)

// harness is a sheetq front door over a real provider: the middleware with two tokens
// and [[people]], the sign-in routes, and /whoami, which prints whom a request acts as.
type harness struct {
	url  string
	p    *oidctest.Provider
	mw   *middleware.Stack
	logs *bytes.Buffer

	mu       sync.Mutex
	events   []middleware.SignInEvent
	persons  []access.Who
	failHook error // OnSignIn's answer

	// ahead is how far the sign-in's clock is ahead of the real one.
	ahead atomic.Int64
}

// advance moves the sign-in's clock d ahead.
func (h *harness) advance(d time.Duration) { h.ahead.Add(int64(d)) }

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	h := &harness{url: base, logs: &bytes.Buffer{}}
	h.p = oidctest.Start(t, base+CallbackPath, alice, bob, carol, dora)
	log := slog.New(slog.NewTextHandler(&syncWriter{w: h.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	key := bytes.Repeat([]byte{42}, 32)
	var err error
	h.mw, err = middleware.New(middleware.Config{
		Tokens: []middleware.Token{
			{Name: "ops", Secret: adminSecret},
			{Name: "sales-bot", Secret: memberSecret, Role: access.Member, Groups: []string{"sales"}, Attrs: map[string]string{"region": "South"}},
		},
		OIDC: &middleware.OIDC{Provider: h.p.Issuer() + "\x00" + oidctest.ClientID, Label: "Example", People: []middleware.Person{
			{Email: "alice@example.com", Groups: []string{"sales"}, Attrs: map[string]string{"region": "North"}},
			{Email: "CAROL@example.com", Role: access.Admin},
		}},
		SessionKey: key, Log: log,
		OnSignIn: func(_ context.Context, ev middleware.SignInEvent) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, ev)
			return h.failHook
		},
		OnPerson: func(_ context.Context, _ middleware.Identity, who access.Who) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.persons = append(h.persons, who)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sign, err := New(Config{Issuer: h.p.Issuer(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret,
		Key: key, Middleware: h.mw, Log: log, Now: func() time.Time { return time.Now().Add(time.Duration(h.ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	sign.Routes(mux)
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(access.From(r.Context()))
	})
	srv.Config.Handler = h.mw.Wrap(mux, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		// Nothing secret in the log: no client secret, no token.
		for _, s := range []string{oidctest.ClientSecret + "\"", adminSecret, memberSecret, "eyJ"} {
			if strings.Contains(h.logs.String(), s) {
				t.Errorf("the log shows %q:\n%s", s, h.logs)
			}
		}
		if t.Failed() {
			t.Logf("sheetq's log:\n%s\nthe provider's log:\n%s", h.logs, h.p.Log())
		}
	})
	return h
}

// browser is an HTTP client with its own cookies that follows no redirects.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   string
	res    *http.Response
}

func get(t *testing.T, c *http.Client, u string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: string(b), res: res}
}

// begin opens /auth/login in c and returns the provider's authorization URL it leads to.
func (h *harness) begin(t *testing.T, c *http.Client, next string) *url.URL {
	t.Helper()
	a := get(t, c, h.url+"/auth/login?next="+url.QueryEscape(next))
	if a.status != http.StatusSeeOther {
		t.Fatalf("GET /auth/login: %d %s", a.status, a.body)
	}
	u, err := url.Parse(a.header.Get("Location"))
	if err != nil || !strings.HasPrefix(u.String(), h.p.Issuer()) {
		t.Fatalf("GET /auth/login sent the browser to %q, not the provider %s", a.header.Get("Location"), h.p.Issuer())
	}
	return u
}

// signIn signs u in through the provider in c and returns the answer to the callback.
func (h *harness) signIn(t *testing.T, c *http.Client, u oidctest.User, next string) (answer, *url.URL) {
	t.Helper()
	back := h.p.Login(t, c, h.begin(t, c, next).String(), u.Username, u.Password)
	return get(t, c, back.String()), back
}

// whoami is whom c's session (or header) acts as; status is the answer's.
func (h *harness) whoami(t *testing.T, c *http.Client, header ...string) (access.Who, int) {
	t.Helper()
	a := get(t, c, h.url+"/whoami", header...)
	var who access.Who
	if a.status == http.StatusOK {
		if err := json.Unmarshal([]byte(a.body), &who); err != nil {
			t.Fatalf("/whoami: %v: %s", err, a.body)
		}
	}
	return who, a.status
}

func sessionCookie(a answer) *http.Cookie {
	for _, c := range a.res.Cookies() {
		if c.Name == middleware.SessionCookie && c.Value != "" {
			return c
		}
	}
	return nil
}

func (h *harness) signIns() []middleware.SignInEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]middleware.SignInEvent(nil), h.events...)
}

// lastRefusal is the detail of the last failed sign-in recorded.
func (h *harness) lastRefusal(t *testing.T) string {
	t.Helper()
	evs := h.signIns()
	if len(evs) == 0 || evs[len(evs)-1].OK {
		t.Fatalf("no failed sign-in recorded: %+v", evs)
	}
	return evs[len(evs)-1].Detail
}

// A person signs in at the provider: the session cookie names them, with the groups and
// attributes of their [[people]] entry, and the sign-in is recorded.
func TestSignInWithProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	if _, status := h.whoami(t, c); status != http.StatusUnauthorized {
		t.Fatalf("/whoami before signing in: %d", status)
	}
	a, _ := h.signIn(t, c, alice, "/whoami?x=1")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/whoami?x=1" {
		t.Fatalf("callback: %d to %q: %s", a.status, a.header.Get("Location"), a.body)
	}
	sc := sessionCookie(a)
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteLaxMode || sc.Path != "/" {
		t.Fatalf("session cookie %+v", sc)
	}
	if len(sc.Value) > middleware.MaxSessionValue {
		t.Errorf("session cookie of %d bytes", len(sc.Value))
	}
	who, status := h.whoami(t, c)
	if status != http.StatusOK {
		t.Fatalf("/whoami after signing in: %d", status)
	}
	if who.Kind != access.Person || who.Name != "alice@example.com" || who.Display != "Alice Archer" || who.Role != access.Member ||
		strings.Join(who.Groups, ",") != "sales" || who.Attrs["region"] != "North" || who.Claims["sub"] != "alice" {
		t.Errorf("alice acts as %+v", who)
	}
	evs := h.signIns()
	if len(evs) != 1 || !evs[0].OK || evs[0].Actor != "alice@example.com" || evs[0].IP == "" || evs[0].Who.Name != "alice@example.com" {
		t.Errorf("sign-ins recorded: %+v", evs)
	}
	h.mu.Lock()
	persons := h.persons
	h.mu.Unlock()
	if len(persons) != 1 || persons[0].Name != "alice@example.com" {
		t.Errorf("people recorded: %+v", persons)
	}

	// Carol is an admin by [[people]] (matched whatever the case); Bob, without an
	// entry, is a member of no group.
	for _, tt := range []struct {
		u      oidctest.User
		role   access.Role
		groups int
	}{{carol, access.Admin, 0}, {bob, access.Member, 0}} {
		c := browser(t)
		if a, _ := h.signIn(t, c, tt.u, "/"); a.status != http.StatusSeeOther || sessionCookie(a) == nil {
			t.Fatalf("%s: callback %d %s", tt.u.Username, a.status, a.body)
		}
		who, _ := h.whoami(t, c)
		if who.Name != tt.u.Email || who.Role != tt.role || len(who.Groups) != tt.groups || who.Kind != access.Person {
			t.Errorf("%s acts as %+v", tt.u.Username, who)
		}
	}
}

// A callback whose state is not this browser's sign-in's is refused, and so is one
// without the browser's sign-in cookie.
func TestCallbackWithWrongState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	authz := h.begin(t, c, "/")
	q := authz.Query()
	q.Set("state", "forged-"+q.Get("state"))
	authz.RawQuery = q.Encode()
	back := h.p.Login(t, c, authz.String(), alice.Username, alice.Password)
	a := get(t, c, back.String())
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "does not belong to the sign-in this browser started") || sessionCookie(a) != nil {
		t.Fatalf("callback with a forged state: %d %s", a.status, a.body)
	}
	if d := h.lastRefusal(t); d != "oidc: state mismatch" {
		t.Errorf("recorded %q", d)
	}
	// Another browser, with no sign-in of its own, brings the first one's callback.
	other := browser(t)
	back = h.p.Login(t, c, h.begin(t, c, "/").String(), alice.Username, alice.Password)
	if a := get(t, other, back.String()); a.status != http.StatusBadRequest || sessionCookie(a) != nil ||
		!strings.Contains(a.body, "not started in this browser") {
		t.Fatalf("callback in another browser: %d %s", a.status, a.body)
	}
	if _, status := h.whoami(t, other); status != http.StatusUnauthorized {
		t.Errorf("the other browser is signed in: %d", status)
	}
}

// A callback opened a second time is refused, even with a copy of the sign-in cookie.
func TestReplayedCallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	authz := h.begin(t, c, "/")
	flight := c.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(h.url, "http://"), Path: "/auth/callback"})
	if len(flight) != 1 || flight[0].Name != flightCookie {
		t.Fatalf("sign-in cookie %v", flight)
	}
	back := h.p.Login(t, c, authz.String(), alice.Username, alice.Password)
	if a := get(t, c, back.String()); a.status != http.StatusSeeOther || sessionCookie(a) == nil {
		t.Fatalf("first callback: %d %s", a.status, a.body)
	}
	// The same browser again: its sign-in cookie is gone.
	if a := get(t, c, back.String()); a.status != http.StatusBadRequest || sessionCookie(a) != nil {
		t.Fatalf("second callback: %d %s", a.status, a.body)
	}
	// An attacker who kept the cookie and the URL.
	thief := &http.Client{CheckRedirect: c.CheckRedirect}
	a := get(t, thief, back.String(), "Cookie", flightCookie+"="+flight[0].Value)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "already been used") || sessionCookie(a) != nil {
		t.Fatalf("replayed callback: %d %s", a.status, a.body)
	}
	if d := h.lastRefusal(t); d != "oidc: callback replayed" {
		t.Errorf("recorded %q", d)
	}
}

// An ID token issued for another nonce than this browser's sign-in's is refused.
func TestNonceMismatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	authz := h.begin(t, c, "/")
	q := authz.Query()
	if q.Get("nonce") == "" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		t.Fatalf("authorization URL without a nonce or PKCE: %s", authz)
	}
	q.Set("nonce", "another-nonce")
	authz.RawQuery = q.Encode()
	back := h.p.Login(t, c, authz.String(), alice.Username, alice.Password)
	a := get(t, c, back.String())
	if a.status != http.StatusBadRequest || sessionCookie(a) != nil || !strings.Contains(a.body, "not issued for the sign-in") {
		t.Fatalf("callback with another nonce: %d %s", a.status, a.body)
	}
	if d := h.lastRefusal(t); d != "oidc: nonce mismatch" {
		t.Errorf("recorded %q", d)
	}
}

// A provider that is down gives a page that says so (503 at the start of a sign-in, 502
// in its middle), tokens keep working, and the next sign-in after it is back succeeds.
func TestProviderDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.p.Stop()
	c := browser(t)
	a := get(t, c, h.url+"/auth/login?next=/")
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" ||
		!strings.Contains(a.body, "could not reach the sign-in provider") || !strings.Contains(a.body, "access token") {
		t.Fatalf("sign-in with the provider down: %d %s", a.status, a.body)
	}
	if who, status := h.whoami(t, c, "Authorization", "Bearer "+adminSecret); status != http.StatusOK || who.Name != "ops" {
		t.Fatalf("a token while the provider is down: %d %+v", status, who)
	}
	if evs := h.signIns(); len(evs) != 0 {
		t.Errorf("an outage recorded as sign-ins: %+v", evs)
	}

	h.p.Restart(t)
	// Sign-ins right after a failure do not ask the provider again; the next one after
	// a pause does.
	if a := get(t, c, h.url+"/auth/login?next=/"); a.status != http.StatusServiceUnavailable {
		t.Fatalf("sign-in right after the failure: %d %s", a.status, a.body)
	}
	h.advance(discoveryPause)
	authz := h.begin(t, c, "/")
	back := h.p.Login(t, c, authz.String(), alice.Username, alice.Password)
	// Down between the login and the way back: the code cannot be exchanged.
	h.p.Stop()
	if a := get(t, c, back.String()); a.status != http.StatusBadGateway || sessionCookie(a) != nil ||
		!strings.Contains(a.body, "could not exchange the code") {
		t.Fatalf("callback with the provider down: %d %s", a.status, a.body)
	}
	h.p.Restart(t)
	if a, _ := h.signIn(t, c, alice, "/"); a.status != http.StatusSeeOther || sessionCookie(a) == nil {
		t.Fatalf("sign-in once the provider is back: %d %s", a.status, a.body)
	}
}

// A person whose provider sends no email (neither in the ID token nor from userinfo) is
// refused: sheetq names people by their email.
func TestSignInRefusesWithoutEmail(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	a, _ := h.signIn(t, c, dora, "/")
	if a.status != http.StatusForbidden || !strings.Contains(a.body, `sent none in the claim "email"`) || sessionCookie(a) != nil {
		t.Errorf("dora: %d %s", a.status, a.body)
	}
	if d := h.lastRefusal(t); d != "oidc: no email" {
		t.Errorf("recorded %q", d)
	}
	if _, status := h.whoami(t, c); status != http.StatusUnauthorized {
		t.Errorf("signed in anyway: %d", status)
	}
}

// A sign-in that cannot be recorded is refused.
func TestSignInNotRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mu.Lock()
	h.failHook = errors.New("audit log full")
	h.mu.Unlock()
	c := browser(t)
	a, _ := h.signIn(t, c, alice, "/")
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "Could not record the sign-in") || sessionCookie(a) != nil {
		t.Fatalf("callback: %d %s", a.status, a.body)
	}
	if _, status := h.whoami(t, c); status != http.StatusUnauthorized {
		t.Errorf("signed in anyway: %d", status)
	}
}

// Signing out ends every session of the person, in every browser; another person's
// session is not touched.
func TestSignOutEndsEverySessionOfThePerson(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	one, two, other := browser(t), browser(t), browser(t)
	var cookie *http.Cookie
	for _, c := range []*http.Client{one, two} {
		a, _ := h.signIn(t, c, alice, "/")
		if cookie = sessionCookie(a); cookie == nil {
			t.Fatalf("no session: %d %s", a.status, a.body)
		}
	}
	if a, _ := h.signIn(t, other, bob, "/"); sessionCookie(a) == nil {
		t.Fatalf("no session for bob: %d %s", a.status, a.body)
	}
	name, err := h.mw.Auth().SignOut(cookie.Value)
	if err != nil || name != "alice@example.com" {
		t.Fatalf("sign out: %q, %v", name, err)
	}
	for i, c := range []*http.Client{one, two} {
		if _, status := h.whoami(t, c); status != http.StatusUnauthorized {
			t.Errorf("browser %d still signed in: %d", i+1, status)
		}
	}
	if who, status := h.whoami(t, other); status != http.StatusOK || who.Name != "bob@example.com" {
		t.Errorf("bob: %d %+v", status, who)
	}
	// Signing in again works: a new session of the new generation.
	if a, _ := h.signIn(t, one, alice, "/"); sessionCookie(a) == nil {
		t.Fatalf("signing in again: %d %s", a.status, a.body)
	}
	if who, status := h.whoami(t, one); status != http.StatusOK || who.Name != "alice@example.com" {
		t.Errorf("signed in again: %d %+v", status, who)
	}
}

// Tokens act with their role, groups and attributes, by bearer and by a session signed
// with the token; a public path acts as nobody.
func TestTokensActAsTheirRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	for _, tt := range []struct {
		secret, name string
		role         access.Role
		groups       string
		region       string
	}{
		{adminSecret, "ops", access.Admin, "", ""},
		{memberSecret, "sales-bot", access.Member, "sales", "South"},
	} {
		who, status := h.whoami(t, c, "Authorization", "Bearer "+tt.secret)
		if status != http.StatusOK || who.Kind != access.Token || who.Name != tt.name || who.Role != tt.role ||
			strings.Join(who.Groups, ",") != tt.groups || who.Attrs["region"] != tt.region {
			t.Errorf("token %s acts as %+v (%d)", tt.name, who, status)
		}
		value, _, err := h.mw.Auth().NewSession(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		byCookie, status := h.whoami(t, &http.Client{}, "Cookie", middleware.SessionCookie+"="+value)
		if status != http.StatusOK || byCookie.Name != who.Name || byCookie.Role != who.Role || byCookie.Kind != access.Token {
			t.Errorf("token %s's session acts as %+v (%d)", tt.name, byCookie, status)
		}
	}
}

// syncWriter lets the server's goroutines log into one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Callbacks that match no sign-in of the browser count as failed sign-ins of their
// address: after middleware.SignInFailures of them it is refused (429) for a while,
// without more records, so that nobody can fill the audit log; a provider's error
// carried by a forged callback is refused as a forgery.
func TestForgedCallbacksAreLimited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := browser(t)
	a := get(t, c, h.url+"/auth/callback?state=forged&error=access_denied")
	if a.status != http.StatusBadRequest || strings.Contains(a.body, "access_denied") {
		t.Fatalf("forged provider error: %d %s", a.status, a.body)
	}
	for i := 1; i < middleware.SignInFailures; i++ {
		if a := get(t, c, h.url+"/auth/callback?state=forged&code=x"); a.status != http.StatusBadRequest {
			t.Fatalf("forged callback %d: %d %s", i+1, a.status, a.body)
		}
	}
	a = get(t, c, h.url+"/auth/callback?state=forged&code=x")
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("callback after %d forged ones: %d %s", middleware.SignInFailures, a.status, a.body)
	}
	if n := len(h.signIns()); n != middleware.SignInFailures {
		t.Errorf("%d failed sign-ins recorded, want %d", n, middleware.SignInFailures)
	}
	// A token from that address is refused too: one limit for every way in.
	if _, status := h.whoami(t, c, "Authorization", "Bearer "+adminSecret); status != http.StatusTooManyRequests {
		t.Errorf("a token from the locked-out address: %d", status)
	}
}
