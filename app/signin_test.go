package app

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/app/access"
	"sheetq/internal/apptest"
	"sheetq/internal/oidctest"
)

// startSignInApp starts the app with [oidc] pointing at a real provider (started when
// provider is nil) and file's other tables, and returns a browser-like client of it
// (cookies kept, no redirects followed).
func startSignInApp(t *testing.T, file FileConfig, users ...oidctest.User) (*App, *apptest.Client, *oidctest.Provider) {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	p := oidctest.Start(t, "http://"+hs.Listener.Addr().String()+"/auth/callback", users...)
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte(oidctest.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file.OIDC = OIDCConfig{Issuer: p.Issuer(), ClientID: oidctest.ClientID, ClientSecret: "file:" + secret, ButtonLabel: "Example SSO"}
	cfg := testConfig(t, testOpts{Idle: true})
	cfg.File = &file
	a := serveOn(t, hs, cfg)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return a, &apptest.Client{T: t, URL: hs.URL, HC: hc}, p
}

// serveOn builds the app of cfg, starts it, and serves it on hs, an unstarted server
// whose address the provider was given as the redirect URL's; all of it stops when the
// test ends.
func serveOn(t *testing.T, hs *httptest.Server, cfg Config) *App {
	t.Helper()
	ctx := context.Background()
	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	t.Cleanup(a.Stop)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = a.Handler()
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(a.hub.Stop)
	return a
}

// A person signs in at the provider through the whole app: the sign-in page offers the
// provider's button beside the token form, the callback sets the session, the pages
// and the API serve the person, an export records them as its creator, and /logout
// ends the session.
func TestSignInThroughTheApp(t *testing.T) {
	t.Parallel()
	ann := oidctest.User{Username: "ann", Password: "ann-pw-123", FirstName: "Ann", LastName: "Lee", Email: "Ann@Example.com"}
	a, c, p := startSignInApp(t, FileConfig{
		Tokens: []TokenConfig{{Name: "ops", Token: "ops-secret-0123456789"}},
		// An admin: [access] default = "admins" closes the demo report to members.
		People: []PersonConfig{{Email: "ann@example.com", Role: "admin", Groups: []string{"sales"}}},
		Access: AccessConfig{Default: "admins"},
	}, ann)
	if got := a.cfg.File.Access.Policy(); !got.AdminsOnly {
		t.Errorf("[access] default = admins: %+v", got)
	}
	html := http.Header{"Accept": {"text/html"}}
	res := c.Request(http.MethodGet, "/exports/new", nil, html)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next=%2Fexports%2Fnew" {
		t.Fatalf("a page before signing in: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res = c.Request(http.MethodGet, "/login?next=%2Fexports%2Fnew", nil, html)
	doc := apptest.Page(t, res, http.StatusOK)
	button := apptest.TID(doc, "login-oidc")
	if button.Length() != 1 || strings.TrimSpace(button.Text()) != "Sign in with Example SSO" ||
		button.AttrOr("href", "") != "/auth/login?next=%2Fexports%2Fnew" || apptest.TID(doc, "login-form").Length() != 1 {
		t.Fatalf("sign-in page: %d %s", res.StatusCode, res.Body)
	}

	res = c.Request(http.MethodGet, button.AttrOr("href", ""), nil, html)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /auth/login: %d %s", res.StatusCode, res.Body)
	}
	back := p.Login(t, c.HC, res.Header.Get("Location"), ann.Username, ann.Password)
	res = c.Request(http.MethodGet, strings.TrimPrefix(back.String(), c.URL), nil, html)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/exports/new" {
		t.Fatalf("callback: %d %q %s", res.StatusCode, res.Header.Get("Location"), res.Body)
	}
	sessionFrom(t, res)
	if res := c.Request(http.MethodGet, "/exports/new", nil, html); res.StatusCode != http.StatusOK {
		t.Errorf("the page after signing in: %d", res.StatusCode)
	}
	job := apptest.DecodeJob(t, c.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo","params":{"rows":1}}`),
		http.Header{"Content-Type": {"application/json"}}))
	if job.CreatedBy != "ann@example.com" {
		t.Errorf("created_by %q", job.CreatedBy)
	}

	res = c.PostForm("/logout", url.Values{}, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d %s", res.StatusCode, res.Body)
	}
	if res := c.Request(http.MethodGet, "/api/v1/exports", nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API after signing out: %d", res.StatusCode)
	}
}

// A provider that is down when the server starts does not stop it: tokens work, and a
// sign-in is a page that says what is wrong, in the layout.
func TestSignInProviderDownAtStart(t *testing.T) {
	t.Parallel()
	hs := httptest.NewUnstartedServer(nil)
	p := oidctest.Start(t, "http://"+hs.Listener.Addr().String()+"/auth/callback")
	p.Stop()
	cfg := testConfig(t, testOpts{Idle: true, Token: "ops-secret-0123456789"})
	cfg.File = &FileConfig{OIDC: OIDCConfig{Issuer: p.Issuer(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret}}
	serveOn(t, hs, cfg)
	c := apptest.NewClient(t, hs)
	res := c.Request(http.MethodGet, "/auth/login?next=/", nil, http.Header{"Accept": {"text/html"}})
	doc := apptest.Page(t, res, http.StatusServiceUnavailable)
	if !strings.Contains(doc.Find("main").Text(), "not answering") ||
		!strings.Contains(doc.Find("main").Text(), "localhost:") {
		t.Errorf("sign-in with the provider down: %d %s", res.StatusCode, res.Body)
	}
	if res := c.Request(http.MethodGet, "/api/v1/exports", nil, http.Header{"Authorization": {"Bearer ops-secret-0123456789"}}); res.StatusCode != http.StatusOK {
		t.Errorf("a token with the provider down: %d", res.StatusCode)
	}
}

// [oidc], [[people]], [access] and [[tokens]] role mistakes are refused at start with a
// line that names the file and the key.
func TestSignInConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := OIDCConfig{Issuer: "https://accounts.example.com", ClientID: "sheetq", ClientSecret: "s"}
	for _, tt := range []struct {
		name string
		file FileConfig
		want string
	}{
		{"no issuer", FileConfig{OIDC: OIDCConfig{ClientID: "x"}}, "[oidc] issuer"},
		{"http issuer", FileConfig{OIDC: OIDCConfig{Issuer: "http://idp.example.com", ClientID: "x"}}, "https://"},
		{"not a URL", FileConfig{OIDC: OIDCConfig{Issuer: "accounts.example.com", ClientID: "x"}}, "[oidc] issuer"},
		{"no client id", FileConfig{OIDC: OIDCConfig{Issuer: "https://a.example"}}, "[oidc] client_id"},
		{"secret unset", FileConfig{OIDC: OIDCConfig{Issuer: "https://a.example", ClientID: "x", ClientSecret: "env:SHEETQ_TEST_UNSET_OIDC"}}, "[oidc] client_secret"},
		{"redirect elsewhere", FileConfig{OIDC: OIDCConfig{Issuer: "https://a.example", ClientID: "x", RedirectURL: "https://s.example/callback"}}, "[oidc] redirect_url"},
		{"no openid scope", FileConfig{OIDC: OIDCConfig{Issuer: "https://a.example", ClientID: "x", Scopes: []string{"email"}}}, `"openid"`},
		{"people without oidc", FileConfig{People: []PersonConfig{{Email: "a@b.c"}}}, "no [oidc]"},
		{"person's role", FileConfig{OIDC: good, People: []PersonConfig{{Email: "a@b.c", Role: "boss"}}}, `[[people]] "a@b.c": role "boss"`},
		{"person twice", FileConfig{OIDC: good, People: []PersonConfig{{Email: "a@b.c"}, {Email: "A@B.C"}}}, "twice"},
		{"person not an email", FileConfig{OIDC: good, People: []PersonConfig{{Email: "ann"}}}, "not an email"},
		{"token's role", FileConfig{Tokens: []TokenConfig{{Name: "ci", Token: "ci-secret-0123456789", Role: "owner"}}}, `[[tokens]] "ci": role "owner"`},
		{"access default", FileConfig{Access: AccessConfig{Default: "nobody"}}, `[access] default "nobody"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.file.path = "/etc/sheetq.toml"
			c := Config{DataDir: dir, File: &tt.file}
			err := c.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "/etc/sheetq.toml") {
				t.Fatalf("validate: %v, want an error naming the file and %q", err, tt.want)
			}
		})
	}

	// [oidc] is a way to sign in: enough to listen beyond loopback. Its redirect URL
	// follows --base-url, and [[tokens]] roles, groups and attributes reach the tokens.
	c := Config{DataDir: dir, Addr: "0.0.0.0:0", BaseURL: "https://sheetq.example.com", File: &FileConfig{OIDC: good,
		Tokens: []TokenConfig{{Name: "bot", Token: "bot-secret-0123456789", Role: "Member", Groups: []string{"b", "a"}, Attrs: map[string]string{"region": "North"}}}}}
	if err := c.validate(); err != nil {
		t.Fatalf("non-loopback with [oidc]: %v", err)
	}
	if got := c.signIn.oidc.RedirectURL; got != "https://sheetq.example.com/auth/callback" {
		t.Errorf("redirect URL %q", got)
	}
	if tok := c.tokens[0]; tok.Role != access.Member || strings.Join(tok.Groups, ",") != "a,b" || tok.Attrs["region"] != "North" {
		t.Errorf("token %+v", tok)
	}
	if c.File.Access.Policy().AdminsOnly {
		t.Error("no [access]: everyone")
	}
}

// The config file's new tables read as written; a misspelt key is refused.
func TestSignInConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sheetq.toml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
[oidc]
issuer = "https://login.example.com/tenant/v2.0"
client_id = "sheetq"
client_secret = "env:SHEETQ_OIDC_SECRET"
groups_claim = "roles"
scopes = ["openid", "email", "profile", "groups"]

[[people]]
email = "ann@example.com"
role = "admin"
groups = ["finance"]
attrs = { region = "North" }

[[tokens]]
name = "bot"
token = "bot-secret-0123456789"
role = "member"
groups = ["sales"]
attrs = { region = "South" }

[access]
default = "admins"
`)
	fc, err := LoadFileConfig(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if fc.OIDC.GroupsClaim != "roles" || len(fc.OIDC.Scopes) != 4 || fc.People[0].Attrs["region"] != "North" ||
		fc.Tokens[0].Role != "member" || fc.Tokens[0].Attrs["region"] != "South" || !fc.Access.Policy().AdminsOnly {
		t.Errorf("read %+v", fc)
	}
	write("[oidc]\nisuer = \"https://x\"\n")
	if _, err := LoadFileConfig(path, false); err == nil || !strings.Contains(err.Error(), "oidc.isuer") {
		t.Errorf("misspelt key: %v", err)
	}
}

// With [oidc] and no tokens, the sign-in page offers the provider alone, every page and
// the API need a session, and the zero-config local admin is gone.
func TestSignInPageWithoutTokens(t *testing.T) {
	t.Parallel()
	_, c, _ := startSignInApp(t, FileConfig{})
	html := http.Header{"Accept": {"text/html"}}
	doc := apptest.Page(t, c.Request(http.MethodGet, "/login", nil, html), http.StatusOK)
	if apptest.TID(doc, "login-oidc").Length() != 1 || apptest.TID(doc, "login-form").Length() != 0 {
		t.Errorf("sign-in page without tokens: %s", doc.Find("main").Text())
	}
	if res := c.Request(http.MethodGet, "/", nil, html); res.StatusCode != http.StatusSeeOther {
		t.Errorf("home page without a session: %d", res.StatusCode)
	}
	if res := c.Request(http.MethodGet, "/api/v1/exports", nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("API without a session: %d", res.StatusCode)
	}
}
