package oidc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"sheetq/app/access"
	"sheetq/app/middleware"
)

// decode is claims as an ID token's JSON gives them.
func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGroupsOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("g", maxGroupName+1)
	for _, tt := range []struct {
		claim string
		want  []string
	}{
		{`{"groups": ["sales", "finance"]}`, []string{"finance", "sales"}},
		{`{"groups": "sales"}`, []string{"sales"}},
		{`{"groups": [" sales ", "Sales", "", "hr", 7, null, {"a": 1}]}`, []string{"hr", "sales"}},
		{`{"groups": ["` + long + `", "ok"]}`, []string{"ok"}},
		{`{"groups": ""}`, nil},
		{`{"groups": 3}`, nil},
		{`{"groups": []}`, nil},
		{`{}`, nil},
	} {
		if got := groupsOf(decode(t, tt.claim)["groups"]); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.claim, got, tt.want)
		}
	}
}

func TestIdentityFromClaims(t *testing.T) {
	t.Parallel()
	names := claimNames{email: "email", name: "name", groups: "groups"}
	custom := claimNames{email: "upn", name: "display", groups: "roles"}
	for _, tt := range []struct {
		name   string
		names  claimNames
		claims string
		want   middleware.Identity
		err    error
	}{
		{"full", names, `{"sub": "1", "iss": "https://p", "aud": "x", "exp": 1, "nonce": "n", "email": " Ann@Example.COM ",
			"email_verified": true, "name": "Ann A", "groups": ["b", "a"], "region": "North", "level": 3}`,
			middleware.Identity{Email: "ann@example.com", Display: "Ann A", Groups: []string{"a", "b"},
				Claims: map[string]string{"sub": "1", "email": " Ann@Example.COM ", "name": "Ann A", "region": "North"}}, nil},
		{"given and family names", names, `{"email": "a@b.c", "given_name": "Ann", "family_name": "Bee"}`,
			middleware.Identity{Email: "a@b.c", Display: "Ann Bee", Claims: map[string]string{"email": "a@b.c", "given_name": "Ann", "family_name": "Bee"}}, nil},
		{"preferred username", names, `{"email": "a@b.c", "preferred_username": "ann"}`,
			middleware.Identity{Email: "a@b.c", Display: "ann", Claims: map[string]string{"email": "a@b.c", "preferred_username": "ann"}}, nil},
		{"email as the name", names, `{"email": "a@b.c"}`,
			middleware.Identity{Email: "a@b.c", Display: "a@b.c", Claims: map[string]string{"email": "a@b.c"}}, nil},
		{"verified as a string", names, `{"email": "a@b.c", "email_verified": "true"}`,
			middleware.Identity{Email: "a@b.c", Display: "a@b.c", Claims: map[string]string{"email": "a@b.c", "email_verified": "true"}}, nil},
		{"other claim names", custom, `{"upn": "a@b.c", "display": "Ann", "roles": "admins", "email": "other@x.y"}`,
			middleware.Identity{Email: "a@b.c", Display: "Ann", Groups: []string{"admins"},
				Claims: map[string]string{"upn": "a@b.c", "display": "Ann", "roles": "admins", "email": "other@x.y"}}, nil},
		{"no email", names, `{"sub": "1", "name": "Ann"}`, middleware.Identity{}, errNoEmail},
		{"blank email", names, `{"email": "  "}`, middleware.Identity{}, errNoEmail},
		{"email not a string", names, `{"email": ["a@b.c"]}`, middleware.Identity{}, errNoEmail},
		{"not an email", names, `{"email": "ann"}`, middleware.Identity{}, errNoEmail},
		{"two @", names, `{"email": "a@b@c"}`, middleware.Identity{}, errNoEmail},
		{"space", names, `{"email": "a b@c.d"}`, middleware.Identity{}, errNoEmail},
		{"not verified", names, `{"email": "a@b.c", "email_verified": false}`, middleware.Identity{}, errUnverified},
		{"not verified, a string", names, `{"email": "a@b.c", "email_verified": "False"}`, middleware.Identity{}, errUnverified},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.names.identity(decode(t, tt.claims))
			if err != tt.err || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("identity = %+v, %v; want %+v, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// Claims are bounded: none too long, none of the token's mechanics, at most maxClaims.
func TestStringClaimsBounded(t *testing.T) {
	t.Parallel()
	claims := map[string]any{"long": strings.Repeat("x", maxClaimValue+1), strings.Repeat("k", maxClaimName+1): "v",
		"at_hash": "h", "ctl": "a\nb", "ok": "yes"}
	for i := range 2 * maxClaims {
		claims[fmt.Sprintf("c%03d", i)] = "v"
	}
	got := stringClaims(claims)
	if len(got) != maxClaims || got["c000"] != "v" || got["long"] != "" || got["at_hash"] != "" || got["ctl"] != "" {
		t.Errorf("%d claims: %v", len(got), got)
	}
}

// An identity too large for a cookie loses its longest claims first, the same ones
// every time; groups that cannot fit refuse the sign-in with a page that names the
// groups claim.
func TestOversizedIdentity(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{1}, 32)
	mw, err := middleware.New(middleware.Config{OIDC: &middleware.OIDC{Provider: "p"}, SessionKey: key, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Issuer: "https://p.example", ClientID: "c", Key: key, Middleware: mw, GroupsClaim: "grp", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"email": "a@b.c"}
	for i := range maxClaims - 1 {
		claims[fmt.Sprintf("c%02d", i)] = strings.Repeat("v", 200+i)
	}
	run := func(claims map[string]any) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.finish(w, httptest.NewRequest(http.MethodGet, CallbackPath, nil), flight{Next: "/"}, claims)
		return w
	}
	w := run(claims)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	who := sessionWho(t, mw, w)
	kept := len(who.Claims) - 1 // c00 up, and email
	if who.Name != "a@b.c" || kept < 1 || kept == maxClaims-1 {
		t.Fatalf("%s kept %d claims", who.Name, kept)
	}
	// The longest went: what is kept are the shortest, c00 up.
	for i := range kept {
		if _, ok := who.Claims[fmt.Sprintf("c%02d", i)]; !ok {
			t.Errorf("c%02d dropped, but %d claims kept: %v", i, kept, who.Claims)
		}
	}
	if again := sessionWho(t, mw, run(claims)); !reflect.DeepEqual(again.Claims, who.Claims) {
		t.Errorf("another sign-in kept other claims")
	}

	var groups []any
	for i := range 400 {
		groups = append(groups, fmt.Sprintf("group-%04d", i))
	}
	w = run(map[string]any{"email": "a@b.c", "grp": groups})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `sent 400 groups in the claim "grp"`) ||
		len(w.Result().Cookies()) != 0 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// sessionWho is whom the session cookie that w set signs in, read back through mw.
func sessionWho(t *testing.T, mw *middleware.Stack, w *httptest.ResponseRecorder) access.Who {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name != middleware.SessionCookie {
			continue
		}
		if len(c.Value) > middleware.MaxSessionValue {
			t.Errorf("cookie of %d bytes", len(c.Value))
		}
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.AddCookie(c)
		var who access.Who
		mw.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { who = access.From(r.Context()) }), nil).
			ServeHTTP(httptest.NewRecorder(), r)
		return who
	}
	t.Fatalf("no session cookie: %d %s", w.Code, w.Body)
	return access.Who{}
}
