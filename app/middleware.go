package app

import (
	"context"
	"crypto/rand"
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

// logRequests gives each request an id, sent back as X-Request-Id and put in the
// context so that every line logged for the request carries it (LogHandler), and logs
// one line per request.
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			id = strings.ToLower(rand.Text()[:12])
		}
		w.Header().Set("X-Request-Id", id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r)
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path,
			"status", max(rec.status, 200), "took", time.Since(start).Round(time.Microsecond),
			"client_ip", client(r.Context()).IP)
	})
}

// checkHost refuses, on a loopback listener, requests whose Host is not a loopback name
// (or the base URL's host, for a reverse proxy on this machine): a DNS-rebinding page in
// the user's browser would send its own host name.
func (s *server) checkHost(next http.Handler) http.Handler {
	public := s.baseHost()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.loopback {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.ToLower(strings.Trim(host, "[]"))
			if !isLoopbackHost(host) && (public == "" || host != public) {
				writeProblem(w, http.StatusMisdirectedRequest, "bad_host",
					"this server only answers to localhost, 127.0.0.1 or [::1] (or the host of --base-url)")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
