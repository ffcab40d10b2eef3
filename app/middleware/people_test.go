package middleware

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sheetq/app/access"
)

// peopleAuth is an Auth that accepts people's sessions of provider, with people as
// [[people]], on clock now.
func authWithPeople(key []byte, provider string, now func() time.Time, people ...Person) *Auth {
	a := NewAuth([]Token{{Name: "ci", Secret: "ci-secret-0123456789"}}, key, now)
	a.people = newPeopleAuth(OIDC{Provider: provider, Label: "Example", People: people})
	return a
}

// A person's session carries what the provider said; [[people]] is applied when the
// session is read, so a change of the file takes effect at once. A session of another
// provider or client, a changed one or an expired one signs nobody in.
func TestPersonSession(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{3}, 32)
	clock := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	ann := Person{Email: "ANN@example.com", Role: access.Admin, Groups: []string{"finance"}, Attrs: map[string]string{"region": "North"}}
	a := authWithPeople(key, "https://idp\x00web", now, ann)
	value, expires, err := a.NewPersonSession(Identity{Email: " Ann@Example.com", Display: "Ann", Groups: []string{"sales"},
		Claims: map[string]string{"region": "South", "sub": "42"}})
	if err != nil {
		t.Fatal(err)
	}
	if !expires.Equal(clock.Add(SessionTTL)) {
		t.Errorf("expires %s", expires)
	}
	who, ok := a.session(value)
	if !ok || who.Kind != access.Person || who.Name != "ann@example.com" || who.Display != "Ann" || who.Role != access.Admin ||
		strings.Join(who.Groups, ",") != "finance,sales" {
		t.Fatalf("session: %v %+v", ok, who)
	}
	if r, _ := who.Attr("region"); r != "North" {
		t.Errorf("region %q: [[people]] attrs win over claims", r)
	}
	if s, _ := who.Attr("sub"); s != "42" {
		t.Errorf("sub %q", s)
	}

	// [[people]] changed: no entry for Ann any more. She is a member with the provider's
	// groups, on the same cookie.
	changed := authWithPeople(key, "https://idp\x00web", now)
	if who, ok := changed.session(value); !ok || who.Role != access.Member || strings.Join(who.Groups, ",") != "sales" || who.Attrs != nil {
		t.Errorf("after [[people]] changed: %v %+v", ok, who)
	}

	refused := map[string]struct {
		a     *Auth
		value string
	}{
		"another provider":    {authWithPeople(key, "https://other\x00web", now, ann), value},
		"another client":      {authWithPeople(key, "https://idp\x00cli", now, ann), value},
		"another key":         {authWithPeople(bytes.Repeat([]byte{4}, 32), "https://idp\x00web", now, ann), value},
		"no [oidc]":           {NewAuth(nil, key, now), value},
		"expired":             {authWithPeople(key, "https://idp\x00web", func() time.Time { return clock.Add(SessionTTL) }, ann), value},
		"identity changed":    {a, tamper(value, 0)},
		"expiry changed":      {a, tamper(value, 1)},
		"generation changed":  {a, tamper(value, 2)},
		"mac changed":         {a, tamper(value, 3)},
		"a part missing":      {a, value[:strings.LastIndexByte(value, '.')]},
		"a token's prefix":    {a, strings.TrimPrefix(value, personSessionPrefix)},
		"empty":               {a, ""},
		"just the prefix":     {a, personSessionPrefix},
		"far too long":        {a, value + strings.Repeat("A", 2*MaxSessionValue)},
		"a token's as person": {a, personSessionPrefix + tokenValue(t, a)},
	}
	for name, tt := range refused {
		if who, ok := tt.a.session(tt.value); ok {
			t.Errorf("%s: signed in as %+v", name, who)
		}
	}
}

// tamper changes one character of part i (of p1.identity.expiry.generation.mac).
func tamper(value string, i int) string {
	parts := strings.Split(strings.TrimPrefix(value, personSessionPrefix), ".")
	p := []byte(parts[i])
	p[len(p)/2] ^= 1
	if p[len(p)/2] == '.' {
		p[len(p)/2] = '0'
	}
	parts[i] = string(p)
	return personSessionPrefix + strings.Join(parts, ".")
}

func tokenValue(t *testing.T, a *Auth) string {
	v, _, err := a.NewSession("ci")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Signing out ends every session of the person, and only theirs; a token's sessions and
// another person's are not touched. The generation is saved, so a restart keeps them
// ended.
func TestPersonSignOut(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{5}, 32)
	path := t.TempDir() + "/session.generations"
	a := authWithPeople(key, "p", nil)
	if err := a.LoadGenerations(path); err != nil {
		t.Fatal(err)
	}
	session := func(a *Auth, email string) string {
		v, _, err := a.NewPersonSession(Identity{Email: email})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	one, two, bob, token := session(a, "ann@example.com"), session(a, "Ann@example.com"), session(a, "bob@example.com"), tokenValue(t, a)
	name, err := a.SignOut(two)
	if err != nil || name != "ann@example.com" {
		t.Fatalf("sign out: %q %v", name, err)
	}
	for label, v := range map[string]string{"one": one, "two": two} {
		if _, ok := a.session(v); ok {
			t.Errorf("ann's session %s still signs in", label)
		}
	}
	for label, v := range map[string]string{"bob": bob, "token": token} {
		if _, ok := a.session(v); !ok {
			t.Errorf("%s's session ended", label)
		}
	}
	if _, ok := a.session(session(a, "ann@example.com")); !ok {
		t.Error("a new session of ann does not sign in")
	}
	restarted := authWithPeople(key, "p", nil)
	if err := restarted.LoadGenerations(path); err != nil {
		t.Fatal(err)
	}
	if _, ok := restarted.session(one); ok {
		t.Error("a restart revived ann's session")
	}
	if _, ok := restarted.session(bob); !ok {
		t.Error("a restart ended bob's session")
	}
}

// An identity whose cookie would pass MaxSessionValue is refused, not cut.
func TestPersonSessionTooLarge(t *testing.T) {
	t.Parallel()
	a := authWithPeople(bytes.Repeat([]byte{6}, 32), "p", nil)
	var groups []string
	for i := range 300 {
		groups = append(groups, fmt.Sprintf("group-%03d", i))
	}
	if _, _, err := a.NewPersonSession(Identity{Email: "a@b.c", Groups: groups}); !errors.Is(err, ErrSessionTooLarge) {
		t.Fatalf("err %v", err)
	}
	if _, _, err := a.NewPersonSession(Identity{Email: "a@b.c", Groups: groups[:50]}); err != nil {
		t.Fatalf("50 groups: %v", err)
	}
	if _, _, err := NewAuth(nil, []byte("k"), nil).NewPersonSession(Identity{Email: "a@b.c"}); err == nil {
		t.Fatal("a person's session without [oidc]")
	}
}

// Without tokens or [oidc] every request acts as the local admin; with them, a public
// path acts as nobody and Principal is the token's name.
func TestWhoInContext(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	serve := func(s *Stack, path string, header ...string) (access.Who, string, int) {
		var who access.Who
		var principal string
		h := s.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			who, principal = access.From(r.Context()), Principal(r.Context())
		}), nil)
		r := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return who, principal, w.Code
	}
	open, err := New(Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if who, p, code := serve(open, "/api/v1/exports"); code != 200 || who.Kind != access.Local || !who.IsAdmin() || p != "" {
		t.Errorf("zero config: %d %+v %q", code, who, p)
	}
	closed, err := New(Config{Log: log, SessionKey: []byte("key"), Tokens: []Token{
		{Name: "bot", Secret: "bot-secret-0123456789", Role: access.Member, Groups: []string{"b", "a", "A"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if who, p, code := serve(closed, "/api/v1/exports", "Authorization", "Bearer bot-secret-0123456789"); code != 200 ||
		who.Kind != access.Token || who.Role != access.Member || strings.Join(who.Groups, ",") != "a,b" || p != "bot" {
		t.Errorf("member token: %d %+v %q", code, who, p)
	}
	for _, path := range []string{"/healthz", "/login", "/auth/login", "/auth/callback"} {
		if who, p, code := serve(closed, path); code != 200 || who.Role != "" || who.IsAdmin() || who.Name != "" || p != "" {
			t.Errorf("%s: %d %+v %q", path, code, who, p)
		}
	}
	if _, _, code := serve(closed, "/api/v1/exports"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	// [oidc] without tokens still requires signing in.
	people, err := New(Config{Log: log, SessionKey: []byte("key"), OIDC: &OIDC{Provider: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, code := serve(people, "/api/v1/exports"); code != http.StatusUnauthorized {
		t.Errorf("[oidc], nobody signed in: %d", code)
	}
	if _, err := New(Config{Log: log, OIDC: &OIDC{Provider: "p"}}); err == nil {
		t.Error("[oidc] without a session key")
	}
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/exports/1?x=y": "/exports/1?x=y", "": "/", "https://evil.example": "/", "//evil.example": "/",
		"/\\evil.example": "/", "/\t/evil.example": "/", "exports": "/",
	} {
		if got := SafeNext(in); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
