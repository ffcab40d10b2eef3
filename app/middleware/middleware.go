// Package middleware owns what every HTTP request passes through before a handler:
// body deadlines, the client as seen through trusted reverse proxies, request ids and the
// access log, security headers, the Host check, the cross-origin check, and
// authentication by token or browser session with its limit on wrong tokens
// (ARCHITECTURE.md, "Parts").
package middleware

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"sheetq/app/access"
	"sheetq/app/problem"
)

// Config is what the middleware needs from the validated app config.
type Config struct {
	// Tokens are every accepted token; none, and no OIDC, leaves everything open.
	Tokens []Token
	// OIDC, when set, accepts the sessions of people signed in with OpenID Connect
	// (app/oidc), and gives them what [[people]] says.
	OIDC *OIDC
	// SessionKey signs browser sessions; required when Tokens is not empty or OIDC set.
	SessionKey []byte
	// BaseURL is the public scheme://host when published behind a reverse proxy, or "".
	BaseURL string
	// TrustedProxies are the peers whose X-Forwarded-For, -Proto and -Host are believed.
	TrustedProxies []netip.Prefix
	// Loopback is set when the server listens on a loopback address: then the Host
	// check refuses other host names (DNS rebinding).
	Loopback bool
	// BodyTimeout is the time a client has to send a request body (default
	// RequestBodyTimeout).
	BodyTimeout time.Duration
	// Log receives the access log (debug) and the sign-in warnings.
	Log *slog.Logger
	// Refused shows a page that says why a browser's request was refused (the pages'
	// error page); API paths get problem+json instead.
	Refused func(w http.ResponseWriter, r *http.Request, status int, title, message string)
	// OnSignIn, if set, is told of every sign-in and failed sign-in, with the token form
	// or OpenID Connect (the audit log); an error refuses the sign-in (503, "could not
	// record the sign-in").
	OnSignIn func(ctx context.Context, ev SignInEvent) error
	// OnPerson, if set, is told of each person who signed in with OpenID Connect, before
	// OnSignIn (the people seen): id is what the provider said, as the session keeps it,
	// and who what they act as; an error refuses the sign-in as OnSignIn's does.
	OnPerson func(ctx context.Context, id Identity, who access.Who) error
}

// Stack is the middleware of one server, with the state it keeps between requests
// (the sign-in limit, the body reads in progress).
type Stack struct {
	cfg         Config
	auth        *Auth
	crossOrigin *http.CrossOriginProtection // for cookie-authenticated changes and sign-in
	bodies      bodyGuard                   // deadline on request bodies (body.go)
}

// New returns the middleware for cfg.
func New(cfg Config) (*Stack, error) {
	if (len(cfg.Tokens) > 0 || cfg.OIDC != nil) && len(cfg.SessionKey) == 0 {
		return nil, errors.New("middleware: tokens or OpenID Connect without a session key")
	}
	s := &Stack{cfg: cfg, auth: NewAuth(cfg.Tokens, cfg.SessionKey, nil)}
	if cfg.OIDC != nil {
		s.auth.people = newPeopleAuth(*cfg.OIDC)
	}
	s.bodies.timeout = cfg.BodyTimeout
	s.crossOrigin = http.NewCrossOriginProtection()
	if cfg.BaseURL != "" {
		// Behind a proxy that does not pass the Host on, the Origin a browser sends is
		// the public one.
		if err := s.crossOrigin.AddTrustedOrigin(cfg.BaseURL); err != nil {
			return nil, err
		}
	}
	s.crossOrigin.SetDenyHandler(http.HandlerFunc(s.refusedCrossOrigin))
	return s, nil
}

// SetLoopback says whether the server listens on loopback only, which turns the Host
// check on. The listener decides it, so Run calls this once it listens, before serving.
func (s *Stack) SetLoopback(on bool) { s.cfg.Loopback = on }

// Auth is the token and session checker, for the sign-in pages.
func (s *Stack) Auth() *Auth { return s.auth }

// Wrap puts mux behind the middleware; instrument (the metrics; nil for none) sees every
// request with its status, refusals included.
//
// Security headers go on every answer, the Host check's refusals too; the cross-origin
// check comes before authentication so that a forged form never reaches it.
// X-Forwarded-* from trusted proxies is applied before anything looks at the client's
// address, scheme or host. Body deadlines come first of all: they need the server's own
// ResponseWriter.
func (s *Stack) Wrap(mux http.Handler, instrument func(http.Handler) http.Handler) http.Handler {
	h := securityHeaders(s.checkHost(s.refuseCrossOrigin(s.authenticate(mux))))
	if instrument != nil {
		h = instrument(h)
	}
	return s.bodies.wrap(s.forwarded(s.logRequests(h)))
}

// StatusRecorder remembers the status code of an answer, for the access log and the
// metrics.
type StatusRecorder struct {
	http.ResponseWriter
	// Status is the first status written; 0 until then (200 if the body is written
	// without one).
	Status int
}

// WriteHeader records the first status and passes it on.
func (r *StatusRecorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (r *StatusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests gives each request an id, sent back as X-Request-Id and put in the
// context so that every line logged for the request carries it (LogHandler), and logs
// one line per request.
func (s *Stack) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			id = strings.ToLower(rand.Text()[:12])
		}
		w.Header().Set("X-Request-Id", id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		rec := &StatusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r)
		s.cfg.Log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path,
			"status", max(rec.Status, 200), "took", time.Since(start).Round(time.Microsecond),
			"client_ip", Client(r.Context()).IP)
	})
}

// checkHost refuses, on a loopback listener, requests whose Host is not a loopback name
// (or the base URL's host, for a reverse proxy on this machine): a DNS-rebinding page in
// the user's browser would send its own host name.
func (s *Stack) checkHost(next http.Handler) http.Handler {
	public := s.baseHost()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Loopback {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.ToLower(strings.Trim(host, "[]"))
			if !IsLoopbackHost(host) && (public == "" || host != public) {
				problem.Write(w, http.StatusMisdirectedRequest, "bad_host",
					"this server only answers to localhost, 127.0.0.1 or [::1] (or the host of --base-url)")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// IsLoopbackHost reports whether host names this machine only.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostOf is the host of a host:port address, or addr itself when it has no port.
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
