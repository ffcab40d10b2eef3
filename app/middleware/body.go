package middleware

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"sheetq/app/problem"
)

// RequestBodyTimeout bounds the time a client may take to send a request body. Bodies
// are at most 64 KiB: 10 s is enough at about 50 kbit/s, and a client that trickles its
// body ties up one connection for no longer than that.
const RequestBodyTimeout = 10 * time.Second

// bodyGuard gives every request body a read deadline and counts the bodies being read.
//
// It is part of the handler chain rather than the http.Server's ReadTimeout, so that every
// server that serves the routes (the tests' too) has it, and only requests with a body
// get a deadline: an event stream (GET /api/v1/events) or a long download must never
// meet one.
type bodyGuard struct {
	// timeout is the deadline from the start of the request; 0 means RequestBodyTimeout.
	timeout time.Duration
	// reading is the number of request bodies being read now: a handler is waiting for a
	// client's bytes. Tests use it to see a handler blocked in a body read.
	reading atomic.Int64
}

// wrap sets the read deadline on requests that have a body, and lifts it once the body is
// read to the end, so that a handler that then takes its time (waiting for a busy
// database) keeps its context.
func (g *bodyGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// An error means a connection that takes no deadlines; its body is read without.
		if err := rc.SetReadDeadline(time.Now().Add(g.limit())); err == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, guard: g}
		}
		next.ServeHTTP(w, r)
	})
}

// limit is the time a client has to send a body.
func (g *bodyGuard) limit() time.Duration {
	if g.timeout > 0 {
		return g.timeout
	}
	return RequestBodyTimeout
}

// deadlineBody is a request body under a read deadline.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	guard *bodyGuard
	done  bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	b.guard.reading.Add(1)
	n, err := b.ReadCloser.Read(p)
	b.guard.reading.Add(-1)
	if errors.Is(err, io.EOF) {
		b.done = true
		// The whole body is in: the rest of the request is the handler's own time. The
		// deadline is on the connection, and net/http's read that watches for the client
		// going away would cancel the request's context when it passed; net/http lifts
		// it for that read today, but only as an implementation detail.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// BodiesReading is the number of request bodies being read now: handlers waiting for a
// client's bytes (sheetq_request_bodies_reading; a slow or trickling client shows here).
func (s *Stack) BodiesReading() int64 { return s.bodies.reading.Load() }

// BodyTimedOut reports whether err is a request body's read deadline passing.
func BodyTimedOut(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// BodyTimeout is the answer to a request whose body did not arrive in time: 408, and
// the connection is closed, since the rest of the body may still be on its way.
func (s *Stack) BodyTimeout() *problem.Problem {
	return problem.New(http.StatusRequestTimeout, "request_timeout",
		"the request body did not arrive within "+s.bodies.limit().String()+"; send it again").With("Connection", "close")
}
