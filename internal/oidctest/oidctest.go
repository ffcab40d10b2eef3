// Package oidctest starts a real OpenID Connect provider for tests: zitadel/oidc's
// example server, which .ci/oidc builds from the Go module proxy at the version pinned in
// .ci/tools/oidc/go.mod and names in SHEETQ_TEST_OIDC_BIN. It is no stand-in: it issues
// signed ID tokens, checks PKCE, redirect URLs and client secrets, and takes each code
// once.
//
// A provider registers exact redirect URLs, so each test starts its own, after it knows
// its sheetq server's address:
//
//	ts := httptest.NewServer(handler)
//	p := oidctest.Start(t, ts.URL+"/auth/callback", oidctest.User{Username: "alice", Password: "pw", Email: "alice@example.com"})
//	// [oidc] issuer = p.Issuer(), client_id = oidctest.ClientID, client_secret = oidctest.ClientSecret
//
// The browser (or an HTTP client) must use the same host name as the registered redirect
// URL. The provider's login form is at /login/username: fields "username" and
// "password", and a button "Login"; Login drives it with an HTTP client. Without
// SHEETQ_TEST_OIDC_BIN the test is skipped, except in CI (CI set), where it fails.
package oidctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The client the provider knows (its example "web" client): a confidential client
// with client_secret_basic, the authorization code flow, and PKCE when asked.
const (
	ClientID     = "web"
	ClientSecret = "secret"
)

// User is a person the provider can sign in with Username and Password.
type User struct {
	// ID is the subject (sub); default Username.
	ID string
	// Username and Password are what the login form takes.
	Username, Password string
	// FirstName and LastName make the name claim ("First Last").
	FirstName, LastName string
	// Email is sent with the email scope; "" sends an empty email.
	Email string
	// Unverified makes email_verified false (the zero value: verified).
	Unverified bool
}

// DefaultUser is the one user of a provider started without users.
var DefaultUser = User{Username: "alice", Password: "alice-password", FirstName: "Alice", LastName: "Archer", Email: "alice@example.com"}

// Provider is a running provider, stopped when its test ends.
type Provider struct {
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	log    *lockedWriter
}

// Bin is the provider's binary from SHEETQ_TEST_OIDC_BIN; without it the test is skipped,
// or fails in CI, where .ci/run has built it.
func Bin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("SHEETQ_TEST_OIDC_BIN")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SHEETQ_TEST_OIDC_BIN is not set; CI runs .ci/oidc first")
		}
		t.Skip(`SHEETQ_TEST_OIDC_BIN is not set; oidcenv=$(bash .ci/oidc) && eval "$oidcenv" to run this test`)
	}
	return bin
}

// Start starts a provider that sends browsers back to redirectURL only (exact match),
// with users (none: DefaultUser), waits until its discovery document answers, and stops
// it when the test ends.
func Start(t testing.TB, redirectURL string, users ...User) *Provider {
	t.Helper()
	bin := Bin(t)
	if len(users) == 0 {
		users = []User{DefaultUser}
	}
	file := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(file, usersJSON(t, users), 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port could be taken between closing it and the provider's listen: then the
	// provider exits at once, and another port is tried.
	var last string
	for range 3 {
		p := &Provider{port: freePort(t), exited: make(chan struct{}), log: &lockedWriter{}}
		p.cmd = exec.Command(bin)
		p.cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(p.port), "REDIRECT_URI="+redirectURL, "USERS_FILE="+file)
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start the OpenID provider %s: %v", bin, err)
		}
		cmd, exited := p.cmd, p.exited
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(p.Stop)
		if err := p.waitReady(30 * time.Second); err != nil {
			p.Stop()
			last = fmt.Sprintf("%v\n%s", err, p.Log())
			continue
		}
		return p
	}
	t.Fatalf("the OpenID provider did not start: %s", last)
	return nil
}

// Restart starts the provider again after Stop, on the same port with the same users
// and redirect URL (a provider that was down and came back), and waits until it answers.
// Its signing keys are new, as after a real provider's restart.
func (p *Provider) Restart(t testing.TB) {
	t.Helper()
	<-p.exited // stopped
	cmd := exec.Command(p.cmd.Path)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.cmd.Env, p.log, p.log
	p.cmd, p.exited = cmd, make(chan struct{})
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart the OpenID provider: %v", err)
	}
	exited := p.exited
	go func() { cmd.Wait(); close(exited) }()
	if err := p.waitReady(30 * time.Second); err != nil {
		t.Fatalf("restart the OpenID provider: %v\n%s", err, p.Log())
	}
}

// Issuer is the provider's issuer URL: http://localhost:PORT/ (the example server names
// itself localhost).
func (p *Provider) Issuer() string { return "http://localhost:" + strconv.Itoa(p.port) + "/" }

// Stop kills the provider and waits for it to exit: a test of a provider that is down
// calls it, and the test's end calls it again.
func (p *Provider) Stop() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	<-p.exited
}

// Log is what the provider has written so far, for a failing test's message.
func (p *Provider) Log() string { return p.log.String() }

// waitReady polls the discovery document until it answers 200, the provider exits, or
// the timeout passes.
func (p *Provider) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Issuer()+".well-known/openid-configuration", nil)
		if res, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return errors.New("the provider exited")
		case <-ctx.Done():
			return fmt.Errorf("no discovery document at %s within %s", p.Issuer(), timeout)
		case <-tick.C:
		}
	}
}

// loginID finds the hidden auth request id of the provider's login form.
var loginID = regexp.MustCompile(`name="id" value="([^"]*)"`)

// Login signs username in at the provider as a browser would: it follows authorizeURL
// (the provider's authorization URL, where sheetq's /auth/login sends a browser) to the
// login form, posts username and password, follows the provider's redirects, and returns
// the URL the provider sends the browser back to (the redirect URL with its code and
// state) without opening it. client keeps its cookies; its own redirect policy is not
// used.
func (p *Provider) Login(t testing.TB, client *http.Client, authorizeURL, username, password string) *url.URL {
	t.Helper()
	hc := *client
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next, err := url.Parse(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	posted := false
	for range 10 {
		if !strings.HasPrefix(next.String(), p.Issuer()) {
			return next // out of the provider: the way back
		}
		res, err := hc.Get(next.String())
		if err != nil {
			t.Fatalf("GET %s: %v", next, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case res.StatusCode >= 300 && res.StatusCode < 400:
			if next, err = next.Parse(res.Header.Get("Location")); err != nil {
				t.Fatal(err)
			}
			continue
		case res.StatusCode != http.StatusOK:
			t.Fatalf("GET %s: %d %s", next, res.StatusCode, body)
		case posted:
			t.Fatalf("the provider did not take %s's password: %s", username, body)
		}
		m := loginID.FindSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no login form: %s", next, body)
		}
		res, err = hc.PostForm(p.Issuer()+"login/username", url.Values{
			"id": {html.UnescapeString(string(m[1]))}, "username": {username}, "password": {password}})
		if err != nil {
			t.Fatalf("POST the login form: %v", err)
		}
		body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusFound && res.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST the login form for %s: %d %s", username, res.StatusCode, body)
		}
		posted = true
		if next, err = next.Parse(res.Header.Get("Location")); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the provider did not send the browser back after 10 steps (last %s)", next)
	return nil
}

// usersJSON is the example server's users file: a JSON object of users by id.
func usersJSON(t testing.TB, users []User) []byte {
	type user struct {
		ID, Username, Password, FirstName, LastName, Email string
		EmailVerified                                      bool
		PreferredLanguage                                  string
	}
	m := map[string]user{}
	for _, u := range users {
		id := u.ID
		if id == "" {
			id = u.Username
		}
		m[id] = user{ID: id, Username: u.Username, Password: u.Password, FirstName: u.FirstName, LastName: u.LastName,
			Email: u.Email, EmailVerified: !u.Unverified, PreferredLanguage: "en"}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// freePort is a TCP port free on this machine a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedWriter is the provider's output, written by exec's copying goroutine and read by
// the test.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
