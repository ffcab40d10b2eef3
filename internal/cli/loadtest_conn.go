package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// acceptSender sends the load's POST /api/v1/exports requests on keep-alive connections
// of its own, with each request's bytes built once, and reads each answer with
// net/http's parser (http.ReadResponse). The load generator shares a 2-core machine
// with the server it measures, and http.Client cost it more CPU per request than the
// server spent accepting it: two goroutines per connection, channel hand-offs, a context
// watcher and a timer per request. Every such cost is a core the server waits for, and
// it showed in the figures as accept latency (BENCHMARKS.md, "A leaner load client").
// The other calls of a run (the event stream, the checks) keep http.Client.
type acceptSender struct {
	addr string      // host:port to dial
	tls  *tls.Config // nil for http://
	head []byte      // the request up to the Idempotency-Key value
	tail []byte      // after it: the end of the headers and the body

	mu   sync.Mutex
	idle []*acceptConn // most recently used last
}

type acceptConn struct {
	c  net.Conn
	br *bufio.Reader
}

// sendResult is what one attempt came to: the status and body of the answer, or err.
type sendResult struct {
	status   int
	replayed bool // Idempotent-Replayed: true
	body     []byte
}

func newAcceptSender(server, token string, body []byte) (*acceptSender, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", server, err)
	}
	if headerUnsafe(token) {
		return nil, errors.New("--token has a control character")
	}
	s := &acceptSender{addr: u.Host}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
		s.tls = &tls.Config{ServerName: u.Hostname()}
	}
	if u.Port() == "" {
		s.addr = net.JoinHostPort(u.Hostname(), port)
	}
	var b []byte
	b = fmt.Appendf(b, "POST %s/api/v1/exports HTTP/1.1\r\nHost: %s\r\n", u.EscapedPath(), u.Host)
	b = fmt.Appendf(b, "User-Agent: sheetq-loadtest\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	if token != "" {
		b = fmt.Appendf(b, "Authorization: Bearer %s\r\n", token)
	}
	s.head = append(b, "Idempotency-Key: "...)
	s.tail = append([]byte("\r\n\r\n"), body...)
	return s, nil
}

// headerUnsafe reports whether s has a control character other than a tab: the request
// is written as bytes, and a line break in a header value would end the header early.
func headerUnsafe(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
}

// send makes one attempt with key, which must be a valid header value, and gives up
// at deadline or when ctx ends. A kept-alive connection that fails before any byte of
// an answer came may have been closed by the server while it sat idle: the request goes
// again on the next one, as http.Transport does for a request with an Idempotency-Key,
// until a connection dialed for it fails.
func (s *acceptSender) send(ctx context.Context, key string, deadline time.Time) (sendResult, error) {
	for {
		c, fromPool, err := s.conn(ctx, deadline)
		if err != nil {
			return sendResult{}, err
		}
		res, err, fresh := s.roundTrip(ctx, c, key, deadline)
		if err == nil {
			return res, nil
		}
		_ = c.c.Close()
		if !fromPool || !fresh || ctx.Err() != nil || time.Now().After(deadline) {
			return res, err
		}
	}
}

// conn takes the connection used last, or dials one.
func (s *acceptSender) conn(ctx context.Context, deadline time.Time) (*acceptConn, bool, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, true, nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var c net.Conn
	var err error
	if s.tls != nil {
		c, err = (&tls.Dialer{Config: s.tls}).DialContext(ctx, "tcp", s.addr)
	} else {
		c, err = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		return nil, false, err
	}
	return &acceptConn{c: c, br: bufio.NewReaderSize(c, 4096)}, false, nil
}

// roundTrip writes the request on c and reads the answer. fresh reports that the
// connection failed before any byte of an answer came: on a kept-alive connection,
// the server may have closed it while it sat idle.
func (s *acceptSender) roundTrip(ctx context.Context, c *acceptConn, key string, deadline time.Time) (res sendResult, err error, fresh bool) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return res, err, true
	}
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := make([]byte, 0, len(s.head)+len(key)+len(s.tail))
	req = append(append(append(req, s.head...), key...), s.tail...)
	if _, err := c.c.Write(req); err != nil {
		return res, err, true
	}
	if _, err := c.br.Peek(1); err != nil {
		return res, err, true
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return res, err, false
	}
	res.status = resp.StatusCode
	res.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	res.body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20+1))
	_ = resp.Body.Close()
	switch {
	case err != nil:
		return res, err, false
	case len(res.body) > 1<<20:
		return res, errors.New("an answer of more than 1 MiB"), false
	}
	if resp.Close || !stop() { // the server ends it, or ctx ended and set a past deadline
		_ = c.c.Close()
		return res, nil, false
	}
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.mu.Unlock()
	return res, nil, false
}

// close closes every idle connection.
func (s *acceptSender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.idle {
		_ = c.c.Close()
	}
	s.idle = nil
}

// sendTimedOut reports whether err is a deadline passing (the connection's, or the
// dial's context) rather than a lost connection.
func sendTimedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
