package cli

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seenRequest is what the test server saw of one request.
type seenRequest struct {
	method, path, host, key, auth, contentType string
	body                                       string
	conn                                       string // the client's address: one per connection
}

// recordingServer answers every request with answer, after noting what it saw.
func recordingServer(t *testing.T, answer http.HandlerFunc) (*httptest.Server, func() []seenRequest) {
	t.Helper()
	var mu sync.Mutex
	var seen []seenRequest
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.URL.Path, r.Host, r.Header.Get("Idempotency-Key"),
			r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b), r.RemoteAddr})
		mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seenRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenRequest(nil), seen...)
	}
}

func accepted(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"id": "job-`+r.Header.Get("Idempotency-Key")+`"}`)
}

// The sender writes the request that http.Client would (method, path under the
// server's prefix, headers, body), reads answers of either framing, and sends one
// request after another on one connection.
func TestAcceptSenderRequests(t *testing.T) {
	var chunked atomic.Bool
	srv, seen := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if chunked.Load() {
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush() // no Content-Length: the body is chunked
			_, _ = io.WriteString(w, `{"id": "again"}`)
			return
		}
		accepted(w, r)
	})
	srv.Start()
	s, err := newAcceptSender(srv.URL+"/prefix", "tok", []byte(`{"report":"demo"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	deadline := time.Now().Add(10 * time.Second)
	res, err := s.send(t.Context(), "k1", deadline)
	if err != nil || res.status != http.StatusAccepted || res.replayed || string(res.body) != `{"id": "job-k1"}` {
		t.Fatalf("first: %+v, %v", res, err)
	}
	chunked.Store(true)
	res, err = s.send(t.Context(), "k2", deadline)
	if err != nil || res.status != http.StatusOK || !res.replayed || string(res.body) != `{"id": "again"}` {
		t.Fatalf("chunked replay: %+v, %v", res, err)
	}
	got := seen()
	if len(got) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(got))
	}
	host := srv.Listener.Addr().String()
	for i, r := range got {
		want := seenRequest{http.MethodPost, "/prefix/api/v1/exports", host, []string{"k1", "k2"}[i],
			"Bearer tok", "application/json", `{"report":"demo"}`, got[0].conn}
		if r != want {
			t.Errorf("request %d: %+v\nwant %+v", i, r, want)
		}
	}
}

// A kept-alive connection that the server closed while it sat idle is replaced without
// an error; an answer with Connection: close is not reused.
func TestAcceptSenderStaleConnection(t *testing.T) {
	var closeNext atomic.Bool
	srv, seen := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if closeNext.Swap(false) {
			w.Header().Set("Connection", "close")
		}
		accepted(w, r)
	})
	srv.Start()
	s, err := newAcceptSender(srv.URL, "", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	send := func(key string) {
		t.Helper()
		if res, err := s.send(t.Context(), key, time.Now().Add(10*time.Second)); err != nil || res.status != http.StatusAccepted {
			t.Fatalf("send %s: %+v, %v", key, res, err)
		}
	}
	send("a")
	srv.CloseClientConnections() // the idle connection the sender keeps is now dead
	send("b")
	closeNext.Store(true)
	send("c")
	send("d")
	got := seen()
	if len(got) != 4 {
		t.Fatalf("server saw %d requests, want 4 (a stale connection must not cost a request)", len(got))
	}
	if got[0].conn == got[1].conn || got[1].conn != got[2].conn || got[2].conn == got[3].conn {
		t.Errorf("connections %s %s %s %s: want a new one after the server closed it, the same for the next request, and a new one after Connection: close",
			got[0].conn, got[1].conn, got[2].conn, got[3].conn)
	}
}

// A server that never answers costs the attempt its deadline and no more, as a timeout;
// ctx ending ends an attempt at once; neither connection is used again.
func TestAcceptSenderTimeouts(t *testing.T) {
	release := make(chan struct{})
	srv, seen := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") != "fast" {
			<-release
		}
		accepted(w, r)
	})
	defer close(release) // before srv.Close, which waits for the handlers
	srv.Start()
	s, err := newAcceptSender(srv.URL, "", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	_, err = s.send(t.Context(), "slow", time.Now().Add(200*time.Millisecond))
	if err == nil || !sendTimedOut(err) {
		t.Fatalf("unanswered request: %v, want a timeout", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.send(ctx, "canceled", time.Now().Add(time.Hour))
		done <- err
	}()
	waitFor(t, func() bool { return len(seen()) == 2 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a canceled attempt returned no error")
	}
	if res, err := s.send(t.Context(), "fast", time.Now().Add(10*time.Second)); err != nil || res.status != http.StatusAccepted {
		t.Fatalf("after them: %+v, %v", res, err)
	}
	got := seen()
	if got[2].conn == got[0].conn || got[2].conn == got[1].conn {
		t.Errorf("the request after a timeout and a cancel went on one of their connections (%s)", got[2].conn)
	}
}

// https:// URLs are sent over TLS, checked against the roots the sender is given.
func TestAcceptSenderTLS(t *testing.T) {
	srv, _ := recordingServer(t, accepted)
	srv.StartTLS()
	s, err := newAcceptSender(srv.URL, "", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if _, err := s.send(t.Context(), "untrusted", time.Now().Add(10*time.Second)); err == nil {
		t.Fatal("a certificate from an unknown authority was accepted")
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	s.tls.RootCAs = roots
	if res, err := s.send(t.Context(), "k", time.Now().Add(10*time.Second)); err != nil || res.status != http.StatusAccepted {
		t.Fatalf("over TLS: %+v, %v", res, err)
	}
	for url, addr := range map[string]string{"https://example.com": "example.com:443", "http://example.com/x": "example.com:80",
		"http://[::1]:8090": "[::1]:8090"} {
		if s, err := newAcceptSender(url, "", nil); err != nil || s.addr != addr {
			t.Errorf("%s: dials %v (%v), want %s", url, s, err, addr)
		}
	}
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}
