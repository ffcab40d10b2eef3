package middleware

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sheetq/app/problem"
	"sheetq/internal/durable"
)

// Token is a named access token.
type Token struct {
	// Name is what jobs record as created_by and logs show; never the secret.
	Name string
	// Secret is what a client sends as Authorization: Bearer.
	Secret string
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
}

// NewAuth returns the checker of tokens, signing sessions with key; now is the clock
// (nil: time.Now).
func NewAuth(tokens []Token, key []byte, now func() time.Time) *Auth {
	a := &Auth{key: key, now: now}
	if a.now == nil {
		a.now = time.Now
	}
	a.limits = newAttemptLimiter(a.now)
	for _, t := range tokens {
		a.creds = append(a.creds, credential{name: t.Name, sum: sha256.Sum256([]byte(t.Secret))})
	}
	return a
}

// Enabled reports whether any token is configured; without one everything is open.
func (a *Auth) Enabled() bool { return len(a.creds) > 0 }

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

// sessionMAC signs a session: the token's name, the expiry and the hash of the token's
// secret, so that removing the token or changing its secret ends its sessions.
func (a *Auth) sessionMAC(c credential, expiry int64) []byte {
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "sheetq session v1\x00%s\x00%d\x00", c.name, expiry)
	m.Write(c.sum[:])
	return m.Sum(nil)
}

// NewSession returns a cookie value for token name: name.expiry.mac, base64url.
func (a *Auth) NewSession(name string) (value string, expires time.Time, err error) {
	for _, c := range a.creds {
		if c.name == name {
			expires = a.now().Add(SessionTTL).Truncate(time.Second)
			exp := expires.Unix()
			enc := base64.RawURLEncoding
			return enc.EncodeToString([]byte(name)) + "." + strconv.FormatInt(exp, 10) + "." +
				enc.EncodeToString(a.sessionMAC(c, exp)), expires, nil
		}
	}
	return "", time.Time{}, fmt.Errorf("no token named %q", name)
}

// session returns the token name of a valid, unexpired session cookie value.
func (a *Auth) session(value string) (string, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 3 {
		return "", false
	}
	enc := base64.RawURLEncoding
	name, err1 := enc.DecodeString(parts[0])
	exp, err2 := strconv.ParseInt(parts[1], 10, 64)
	mac, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || a.now().Unix() >= exp {
		return "", false
	}
	for _, c := range a.creds {
		if c.name == string(name) {
			return c.name, hmac.Equal(mac, a.sessionMAC(c, exp))
		}
	}
	return "", false
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

// withPrincipal records the token name that authenticated a request.
func withPrincipal(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, principalKey, name)
}

// Principal is the name of the token that authenticated the request ("" when the server
// has no tokens).
func Principal(ctx context.Context) string {
	n, _ := ctx.Value(principalKey).(string)
	return n
}

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
// (probes carry no token), static assets and the sign-in pages themselves.
func publicPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || strings.HasPrefix(p, "/assets/") || p == "/login" || p == "/logout"
}

// authenticate requires, when tokens are set, a Bearer token or a session cookie on
// everything but public paths. A cookie on a request that changes something must also
// pass the cross-origin check, since the browser sends it whoever made the page. Tokens
// are never logged.
func (s *Stack) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.Enabled() || publicPath(r.URL.Path) {
			next.ServeHTTP(w, r)
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
				next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), name)))
				return
			}
			s.SignInFailed(r)
		}
		if c, err := r.Cookie(SessionCookie); err == nil {
			if name, ok := s.auth.session(c.Value); ok {
				if !safeMethod(r.Method) {
					if err := s.crossOrigin.Check(r); err != nil {
						problem.Write(w, http.StatusForbidden, "cross_origin", "this request came from another site")
						return
					}
				}
				next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), name)))
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
