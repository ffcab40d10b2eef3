package app

import (
	"crypto/rand"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"
)

// statusRecorder remembers the status code for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs one line per request with a request id, also sent as X-Request-Id.
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			id = strings.ToLower(rand.Text()[:12])
		}
		w.Header().Set("X-Request-Id", id)
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r)
		s.log.DebugContext(r.Context(), "request", "request_id", id, "method", r.Method, "path", r.URL.Path,
			"status", max(rec.status, 200), "took", time.Since(start).Round(time.Microsecond))
	})
}

// checkHost refuses, on a loopback listener, requests whose Host is not a loopback name:
// a DNS-rebinding page in the user's browser would send its own host name.
func (s *server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.loopback {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.ToLower(strings.Trim(host, "[]"))
			if !isLoopbackHost(host) {
				writeProblem(w, http.StatusMisdirectedRequest, "bad_host",
					"this server only answers to localhost, 127.0.0.1 or [::1]")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate requires the access token, when one is set, on everything but liveness
// and static assets. The comparison is constant-time; the token is never logged.
func (s *server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := []byte(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || strings.HasPrefix(r.URL.Path, "/assets/") {
			next.ServeHTTP(w, r)
			return
		}
		// The auth scheme is case-insensitive (RFC 9110, section 11.1).
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sheetq"`)
			writeProblem(w, http.StatusUnauthorized, "unauthorized", "send the access token as Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}
