package app

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
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sheetq/internal/durable"
	"sheetq/internal/envref"
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
// (app/ratelimit.go), 16 random characters are out of reach of guessing.
const minTokenLength = 16

// weakSecret says what makes a token's secret too weak to accept ("blank", "too short
// (6 characters)"), or "" when it is long enough.
func weakSecret(secret string) string {
	if strings.TrimSpace(secret) == "" {
		return "blank"
	}
	if n := utf8.RuneCountInString(secret); n < minTokenLength {
		return fmt.Sprintf("too short (%d characters)", n)
	}
	return ""
}

// tokenAdvice says how to make a good token, for the errors that refuse a bad one.
const tokenAdvice = "use at least 16 random characters, such as the output of `openssl rand -hex 32`"

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// resolveSecret reads a token value from the config file: env:NAME reads the environment,
// file:PATH reads a file (systemd's LoadCredential), anything else is the token itself.
func resolveSecret(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "env:"):
		return envref.Resolve(v)
	case strings.HasPrefix(v, "file:"):
		path := strings.TrimPrefix(v, "file:")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return s, nil
	}
	return v, nil
}

// credential is a token the server accepts, kept as the sha256 of its secret so that
// every comparison has the same length.
type credential struct {
	name string
	sum  [sha256.Size]byte
}

// sessionTTL is how long a browser stays signed in.
const sessionTTL = 7 * 24 * time.Hour

// sessionCookie is the name of the browser session cookie.
const sessionCookie = "sheetq_session"

// authenticator checks Bearer tokens and browser sessions.
type authenticator struct {
	creds []credential
	// key signs session cookies; it lives in the data directory, so sessions survive
	// restarts, and a new key (delete the file) signs everyone out.
	key []byte
	now func() time.Time
	// limits counts wrong tokens per client address (app/ratelimit.go).
	limits *attemptLimiter
}

func newAuthenticator(tokens []Token, key []byte, now func() time.Time) *authenticator {
	a := &authenticator{key: key, now: now}
	if a.now == nil {
		a.now = time.Now
	}
	a.limits = newAttemptLimiter(a.now)
	for _, t := range tokens {
		a.creds = append(a.creds, credential{name: t.Name, sum: sha256.Sum256([]byte(t.Secret))})
	}
	return a
}

// enabled reports whether any token is configured; without one everything is open.
func (a *authenticator) enabled() bool { return len(a.creds) > 0 }

// match returns the name of the token equal to secret. It compares against every token,
// whatever matched earlier, so the time taken does not say which one (or whether any)
// matched; comparing hashes keeps the length of the secrets out of it too.
func (a *authenticator) match(secret string) (string, bool) {
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
func (a *authenticator) sessionMAC(c credential, expiry int64) []byte {
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "sheetq session v1\x00%s\x00%d\x00", c.name, expiry)
	m.Write(c.sum[:])
	return m.Sum(nil)
}

// newSession returns a cookie value for token name: name.expiry.mac, base64url.
func (a *authenticator) newSession(name string) (value string, expires time.Time, err error) {
	for _, c := range a.creds {
		if c.name == name {
			expires = a.now().Add(sessionTTL).Truncate(time.Second)
			exp := expires.Unix()
			enc := base64.RawURLEncoding
			return enc.EncodeToString([]byte(name)) + "." + strconv.FormatInt(exp, 10) + "." +
				enc.EncodeToString(a.sessionMAC(c, exp)), expires, nil
		}
	}
	return "", time.Time{}, fmt.Errorf("no token named %q", name)
}

// session returns the token name of a valid, unexpired session cookie value.
func (a *authenticator) session(value string) (string, bool) {
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

// loadSessionKey reads the data directory's session key, creating it on first use.
func loadSessionKey(d DataDir) ([]byte, error) {
	path := d.sessionKeyPath()
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

// principal is the name of the token that authenticated the request ("" when the server
// has no tokens).
func principal(ctx context.Context) string {
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
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.enabled() || publicPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if token, sent := bearer(r); sent {
			// A locked-out address is refused before its token is looked at, so that a
			// right guess does not stand out from the wrong ones.
			if wait, locked := s.auth.limits.locked(client(r.Context()).IP); locked {
				tooManyAttempts(w, wait)
				return
			}
			if name, ok := s.auth.match(token); ok {
				next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), name)))
				return
			}
			s.signInFailed(r)
		}
		if c, err := r.Cookie(sessionCookie); err == nil {
			if name, ok := s.auth.session(c.Value); ok {
				if !safeMethod(r.Method) {
					if err := s.crossOrigin.Check(r); err != nil {
						writeProblem(w, http.StatusForbidden, "cross_origin", "this request came from another site")
						return
					}
				}
				next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), name)))
				return
			}
		}
		if wantsHTML(r) {
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sheetq"`)
		writeProblem(w, http.StatusUnauthorized, "unauthorized", "send the access token as Authorization: Bearer <token>")
	})
}

// initAuth sets up token checks, browser sessions and the cross-origin check from the
// validated config.
func (s *server) initAuth() error {
	var key []byte
	if len(s.cfg.tokens) > 0 {
		var err error
		if key, err = loadSessionKey(s.dir); err != nil {
			return err
		}
	}
	s.auth = newAuthenticator(s.cfg.tokens, key, nil)
	s.crossOrigin = http.NewCrossOriginProtection()
	if s.cfg.BaseURL != "" {
		// Behind a proxy that does not pass the Host on, the Origin a browser sends is
		// the public one.
		if err := s.crossOrigin.AddTrustedOrigin(s.cfg.BaseURL); err != nil {
			return err
		}
	}
	return nil
}
