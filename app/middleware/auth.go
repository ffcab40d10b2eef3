package middleware

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"sheetq/app/access"
	"sheetq/app/problem"
	"sheetq/internal/durable"
)

// Token is a named access token.
type Token struct {
	// Name is what jobs record as created_by and logs show; never the secret.
	Name string
	// Secret is what a client sends as Authorization: Bearer.
	Secret string
	// Role is what the token may do; "" is admin, as before roles existed.
	Role access.Role
	// Groups are the groups the token belongs to ([[tokens]] groups).
	Groups []string
	// Attrs are the token's attributes ([[tokens]] attrs), for a report's
	// "from=person.NAME" parameters.
	Attrs map[string]string
}

// who is the identity a request signed in with t acts as.
func (t Token) who() access.Who {
	return access.Who{Kind: access.Token, Name: t.Name, Role: cmp.Or(t.Role, access.Admin),
		Groups: access.NormalizeGroups(t.Groups), Attrs: maps.Clone(t.Attrs)}
}

// DefaultTokenName is the name of the --token / SHEETQ_TOKEN token.
const DefaultTokenName = "default"

// minTokenLength is the shortest secret accepted: with failed attempts limited
// (ratelimit.go), 16 random characters are out of reach of guessing.
const minTokenLength = 16

// WeakSecret says what makes a token's secret too weak to accept ("blank", "too short
// (6 characters)"), or "" when it is long enough.
func WeakSecret(secret string) string {
	if strings.TrimSpace(secret) == "" {
		return "blank"
	}
	if n := utf8.RuneCountInString(secret); n < minTokenLength {
		return fmt.Sprintf("too short (%d characters)", n)
	}
	return ""
}

// TokenAdvice says how to make a good token, for the errors that refuse a bad one.
const TokenAdvice = "use at least 16 random characters, such as the output of `openssl rand -hex 32`"

// TokenName is the syntax of a token's name.
var TokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// credential is a token the server accepts, kept as the sha256 of its secret so that
// every comparison has the same length.
type credential struct {
	name string
	sum  [sha256.Size]byte
	// who is whom the token signs in as: its role, groups and attributes.
	who access.Who
}

// SessionTTL is how long a browser stays signed in.
const SessionTTL = 7 * 24 * time.Hour

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "sheetq_session"

// Auth checks Bearer tokens and browser sessions.
type Auth struct {
	creds []credential
	// key signs session cookies; it lives in the data directory, so sessions survive
	// restarts, and a new key (delete the file) signs everyone out.
	key []byte
	now func() time.Time
	// limits counts wrong tokens per client address (ratelimit.go).
	limits *attemptLimiter
	// gens are the tokens' and people's session generations: signing out ends every
	// session of the token or person, copies of the cookie included.
	gens generations
	// people accepts the sessions of people signed in with OpenID Connect (people.go);
	// nil: the server has no [oidc], and a person's session is refused.
	people *peopleAuth
}

// NewAuth returns the checker of tokens, signing sessions with key; now is the clock
// (nil: time.Now).
func NewAuth(tokens []Token, key []byte, now func() time.Time) *Auth {
	a := &Auth{key: key, now: now}
	if a.now == nil {
		a.now = time.Now
	}
	a.limits = newAttemptLimiter(a.now)
	a.gens.cur.Store(&map[string]uint64{})
	for _, t := range tokens {
		a.creds = append(a.creds, credential{name: t.Name, sum: sha256.Sum256([]byte(t.Secret)), who: t.who()})
	}
	return a
}

// Enabled reports whether any token or an OpenID provider is configured; without either
// everything is open, and every request acts as access.LocalUser.
func (a *Auth) Enabled() bool { return len(a.creds) > 0 || a.people != nil }

// HasTokens reports whether any token is configured, for the sign-in page's token form.
func (a *Auth) HasTokens() bool { return len(a.creds) > 0 }

// Match returns the name of the token equal to secret. It compares against every token,
// whatever matched earlier, so the time taken does not say which one (or whether any)
// matched; comparing hashes keeps the length of the secrets out of it too.
func (a *Auth) Match(secret string) (string, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i, c := range a.creds {
		eq := subtle.ConstantTimeCompare(sum[:], c.sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return "", false
	}
	return a.creds[found].name, true
}

// TokenWho is whom the token named name signs in as, with its current role, groups and
// attributes (a copy: the handlers may keep it).
func (a *Auth) TokenWho(name string) (access.Who, bool) {
	for _, c := range a.creds {
		if c.name == name {
			who := c.who
			who.Groups, who.Attrs = slices.Clone(who.Groups), maps.Clone(who.Attrs)
			return who, true
		}
	}
	return access.Who{}, false
}

// bearer returns the token of a request's Authorization: Bearer header; sent is false
// when the request has none.
func bearer(r *http.Request) (token string, sent bool) {
	// The auth scheme is case-insensitive (RFC 9110, section 11.1).
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(got), true
}

// sessionMAC signs a session: the token's name, the expiry, the token's session
// generation and the hash of the token's secret, so that removing the token or changing
// its secret ends its sessions, and so does moving it to a new generation (SignOut).
func (a *Auth) sessionMAC(c credential, expiry int64, gen uint64) []byte {
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "sheetq session v2\x00%s\x00%d\x00%d\x00", c.name, expiry, gen)
	m.Write(c.sum[:])
	return m.Sum(nil)
}

// sessionMACv1 signs a session as versions before session generations did, without one:
// such a cookie is of generation 0, valid until its token's first sign-out.
func (a *Auth) sessionMACv1(c credential, expiry int64) []byte {
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "sheetq session v1\x00%s\x00%d\x00", c.name, expiry)
	m.Write(c.sum[:])
	return m.Sum(nil)
}

// NewSession returns a cookie value for token name, of the token's current session
// generation: name.expiry.generation.mac, base64url.
func (a *Auth) NewSession(name string) (value string, expires time.Time, err error) {
	for _, c := range a.creds {
		if c.name == name {
			expires = a.now().Add(SessionTTL).Truncate(time.Second)
			exp, gen := expires.Unix(), a.gens.of(name)
			enc := base64.RawURLEncoding
			return enc.EncodeToString([]byte(name)) + "." + strconv.FormatInt(exp, 10) + "." +
				strconv.FormatUint(gen, 10) + "." + enc.EncodeToString(a.sessionMAC(c, exp, gen)), expires, nil
		}
	}
	return "", time.Time{}, fmt.Errorf("no token named %q", name)
}

// session returns whom a valid, unexpired session cookie value of its token's or
// person's current generation signs in: a token's with its current role, groups and
// attributes, a person's with those [[people]] gives them now (people.go).
func (a *Auth) session(value string) (access.Who, bool) {
	if strings.HasPrefix(value, personSessionPrefix) {
		return a.personSession(value)
	}
	name, ok := a.tokenSession(value)
	if !ok {
		return access.Who{}, false
	}
	return a.TokenWho(name)
}

// tokenSession returns the token name of a valid, unexpired session cookie value of its
// token's current generation. A value of three parts (name.expiry.mac) is one issued
// before generations: generation 0.
func (a *Auth) tokenSession(value string) (string, bool) {
	parts := strings.Split(value, ".")
	var gen uint64
	switch len(parts) {
	case 3:
	case 4:
		g, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil {
			return "", false
		}
		gen = g
	default:
		return "", false
	}
	enc := base64.RawURLEncoding
	name, err1 := enc.DecodeString(parts[0])
	exp, err2 := strconv.ParseInt(parts[1], 10, 64)
	mac, err3 := enc.DecodeString(parts[len(parts)-1])
	if err1 != nil || err2 != nil || err3 != nil || a.now().Unix() >= exp {
		return "", false
	}
	for _, c := range a.creds {
		if c.name == string(name) {
			want := a.sessionMAC(c, exp, gen)
			if len(parts) == 3 {
				want = a.sessionMACv1(c, exp)
			}
			return c.name, hmac.Equal(mac, want) && gen == a.gens.of(c.name)
		}
	}
	return "", false
}

// SignOut ends the session whose cookie value is given and every other session of its
// token or person, in any browser, copies of the cookie included: the token or person
// moves to its next session generation, which is saved (LoadGenerations) before SignOut
// returns. It returns the token's name or the person's email, or "" when value is no
// valid session, which ends nothing.
func (a *Auth) SignOut(value string) (string, error) {
	who, ok := a.session(value)
	if !ok {
		return "", nil
	}
	return who.Name, a.gens.next(who.Name)
}

// LoadGenerations reads the tokens' session generations from path, a file in the data
// directory beside the session key (a missing file: every token at generation 0), and
// makes SignOut save them there, so that a restart does not revive the sessions a
// sign-out ended. Call it before serving. Like the key, the file is the data
// directory's own: each node of a cluster has its own sessions.
func (a *Auth) LoadGenerations(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		a.gens.path = path
		return nil
	}
	if err != nil {
		return fmt.Errorf("session generations: %w", err)
	}
	defer f.Close()
	// A token name is at most 64 characters and an email at most 254, so each entry is
	// at most about 280 bytes; the limit, room for tens of thousands of them, refuses a
	// file that no sign-out wrote.
	b, err := io.ReadAll(io.LimitReader(f, maxGenerationsFile+1))
	if err != nil {
		return fmt.Errorf("session generations: %w", err)
	}
	var file generationsFile
	if len(b) > maxGenerationsFile {
		err = fmt.Errorf("larger than %d bytes", maxGenerationsFile)
	} else {
		err = json.Unmarshal(b, &file)
	}
	if err != nil {
		return fmt.Errorf("session generations %s: %w (delete it together with the session key beside it, which signs every browser out)",
			path, err)
	}
	if file.Generations == nil {
		file.Generations = map[string]uint64{}
	}
	a.gens.cur.Store(&file.Generations)
	a.gens.path = path
	return nil
}

// maxGenerationsFile bounds the session generations file read at start.
const maxGenerationsFile = 16 << 20

// generationsFile is the session generations file: for each token name or person's
// email that signed out since the file was created, its current generation. Names are
// those of tokens and people, never secrets; an entry stays when its token is removed,
// so that putting the token back does not revive the sessions a sign-out ended. Token
// names cannot hold '@' and emails do, so the two never share an entry.
type generationsFile struct {
	Generations map[string]uint64 `json:"generations"`
}

// generations are the tokens' session generations (issue 36): a session is valid only
// while its token is at the generation it was issued in. Reads, one per request with a
// cookie, take no lock: the map is replaced, never changed in place.
type generations struct {
	// cur is the map of names to generations; a name not in it is at 0.
	cur atomic.Pointer[map[string]uint64]
	// mu makes sign-outs one at a time: one writer of the file and of its temporary name.
	mu sync.Mutex
	// path is the file the generations are saved in; "" keeps them in memory only.
	path string
}

// of is the current generation of token or person name.
func (g *generations) of(name string) uint64 { return (*g.cur.Load())[name] }

// next moves token or person name to its next generation and saves every generation to
// the file. The new generation holds in this process even when saving fails, so that the
// sessions end now; the error says that a restart would revive them.
func (g *generations) next(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := maps.Clone(*g.cur.Load())
	cur[name]++
	g.cur.Store(&cur)
	if g.path == "" {
		return nil
	}
	b, err := json.Marshal(generationsFile{Generations: cur})
	if err != nil {
		return fmt.Errorf("session generations: %w", err)
	}
	// After a power cut the name holds the old generations or the new ones, never half
	// a file that would keep the server from starting.
	if err := durable.WriteFile(g.path, b, 0o600); err != nil {
		return fmt.Errorf("session generations: %w", err)
	}
	return nil
}

// LoadSessionKey reads the session key at path (in the data directory), creating it on
// first use.
func LoadSessionKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("session key: %w", err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	// After a power cut the name holds the whole key or nothing: a key that vanished
	// would sign every browser out.
	if err := durable.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	return key, nil
}

// Principal is the name of the token or person that authenticated the request
// (access.From's Name): "" when the server has neither tokens nor an OpenID provider.
func Principal(ctx context.Context) string { return access.From(ctx).Name }

// safeMethod reports whether a method only reads.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// wantsHTML reports whether a request comes from a browser navigating to a page, which
// is better sent to the sign-in page than answered with a 401.
func wantsHTML(r *http.Request) bool {
	return safeMethod(r.Method) && !strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/metrics" &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

// publicPath reports whether a path needs no authentication: liveness and readiness
// (probes carry no token), static assets and the sign-in pages themselves, those of
// OpenID Connect (app/oidc) included.
func publicPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || strings.HasPrefix(p, "/assets/") || p == "/login" || p == "/logout" ||
		p == "/auth/login" || p == "/auth/callback"
}

// authenticate requires, when tokens or an OpenID provider are set, a Bearer token or a
// session cookie on everything but public paths, and puts whom it signs in (access.Who)
// in the request's context; without either, every request acts as access.LocalUser, an
// admin, as before people existed. A public path acts as nobody (a zero access.Who, no
// role). A cookie on a request that changes something must also pass the cross-origin
// check, since the browser sends it whoever made the page. Tokens are never logged.
func (s *Stack) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		if publicPath(r.URL.Path) {
			next.ServeHTTP(w, r.WithContext(access.With(r.Context(), access.Who{})))
			return
		}
		if token, sent := bearer(r); sent {
			// A locked-out address is refused before its token is looked at, so that a
			// right guess does not stand out from the wrong ones.
			if wait, locked := s.auth.limits.locked(Client(r.Context()).IP); locked {
				tooManyAttempts(w, wait)
				return
			}
			if name, ok := s.auth.Match(token); ok {
				if who, ok := s.auth.TokenWho(name); ok {
					next.ServeHTTP(w, r.WithContext(access.With(r.Context(), who)))
					return
				}
			}
			s.SignInFailed(r)
		}
		if c, err := r.Cookie(SessionCookie); err == nil {
			if who, ok := s.auth.session(c.Value); ok {
				if !safeMethod(r.Method) {
					if err := s.crossOrigin.Check(r); err != nil {
						problem.Write(w, http.StatusForbidden, "cross_origin", "this request came from another site")
						return
					}
				}
				next.ServeHTTP(w, r.WithContext(access.With(r.Context(), who)))
				return
			}
		}
		if wantsHTML(r) {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sheetq"`)
		problem.Write(w, http.StatusUnauthorized, "unauthorized", "send the access token as Authorization: Bearer <token>")
	})
}

// Locked reports whether the client at ip is locked out of signing in, and for how much
// longer.
func (a *Auth) Locked(ip string) (time.Duration, bool) { return a.limits.locked(ip) }

// SetSession sets the session cookie of a browser that signed in.
func (s *Stack) SetSession(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		HttpOnly: true, Secure: s.IsHTTPS(r), SameSite: http.SameSiteLaxMode,
	})
}

// ClearSession clears the session cookie (sign out).
func (s *Stack) ClearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.IsHTTPS(r), SameSite: http.SameSiteLaxMode,
	})
}

// CheckTokens refuses a set of tokens with a bad name, a weak secret, or a name or a
// secret used twice.
func CheckTokens(all []Token) error {
	names, secrets := map[string]bool{}, map[string]bool{}
	for _, t := range all {
		switch {
		case !TokenName.MatchString(t.Name):
			return fmt.Errorf("token name %q: use letters, digits, '.', '_' and '-' (at most 64)", t.Name)
		case t.Role != "" && t.Role != access.Admin && t.Role != access.Member:
			return fmt.Errorf("token %q: role %q: use %q or %q", t.Name, t.Role, access.Admin, access.Member)
		case WeakSecret(t.Secret) != "":
			return fmt.Errorf("token %q is %s: %s", t.Name, WeakSecret(t.Secret), TokenAdvice)
		case names[t.Name]:
			return fmt.Errorf("two tokens are named %q (--token is named %q)", t.Name, DefaultTokenName)
		case secrets[t.Secret]:
			return fmt.Errorf("token %q has the same secret as another token", t.Name)
		}
		names[t.Name], secrets[t.Secret] = true, true
	}
	return nil
}
