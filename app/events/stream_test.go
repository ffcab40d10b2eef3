package events

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sheetq/app/problem"
	"sheetq/store/sqlite"
)

// gatedWriter is a stream's ResponseWriter that counts flushes and, once closed, holds
// every write until it is opened, so that a test can queue events behind a write.
type gatedWriter struct {
	hdr http.Header

	mu      sync.Mutex
	body    strings.Builder
	flushes int
	gate    chan struct{} // nil: writes pass
	blocked chan struct{} // closed when a write waits at the gate
}

func (w *gatedWriter) Header() http.Header { return w.hdr }
func (w *gatedWriter) WriteHeader(int)     {}

func (w *gatedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	gate, blocked := w.gate, w.blocked
	w.gate = nil
	w.mu.Unlock()
	if gate != nil {
		close(blocked)
		<-gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.WriteString(string(b))
}

func (w *gatedWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes++
}

func (w *gatedWriter) state() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.String(), w.flushes
}

// The events published together reach a live stream in one flush: a burst publishes a
// dozen per read, and a flush for each cost a write on the server and a wake-up in every
// client. None is held back: the flush comes as soon as the stream has sent what was
// queued.
func TestStreamFlushesWhatWasPublishedTogether(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Not started: only what the test publishes reaches the stream.
	h := New(st, Config{}, log, problem.Reporter{Log: log})

	w := &gatedWriter{hdr: http.Header{}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/events", nil).WithContext(ctx))
	}()
	waitFor(t, "the stream's first line", func() bool { _, n := w.state(); return n == 1 })
	waitFor(t, "the subscription", func() bool { return h.Stats().Clients == 1 })

	gate, blocked := make(chan struct{}), make(chan struct{})
	w.mu.Lock()
	w.gate, w.blocked = gate, blocked
	w.mu.Unlock()
	msg := func(id string) sseMessage {
		return sseMessage{cursor: id, job: "j" + id, event: "accepted", data: []byte(`{"n":` + id + `}`)}
	}
	h.publish(msg("1"))
	<-blocked // the stream is writing event 1; the next three queue behind it
	h.publish(msg("2"), msg("3"), msg("4"))
	close(gate)

	waitFor(t, "the four events", func() bool { b, _ := w.state(); return strings.Count(b, "event: accepted") == 4 })
	waitFor(t, "their flush", func() bool { _, n := w.state(); return n >= 2 })
	body, flushes := w.state()
	if flushes != 2 {
		t.Errorf("%d flushes after the first line, want 1 for the four events", flushes-1)
	}
	for i, id := range []string{"1", "2", "3", "4"} {
		want := "id: " + id + "\nevent: accepted\ndata: {\"n\":" + id + "}\n\n"
		if !strings.Contains(body, want) {
			t.Errorf("event %d missing or malformed; body:\n%s", i+1, body)
		}
	}
	if strings.Index(body, "id: 1\n") > strings.Index(body, "id: 4\n") {
		t.Errorf("events out of order:\n%s", body)
	}

	// A lone event is flushed at once, not held for company.
	h.publish(msg("5"))
	waitFor(t, "the lone event's flush", func() bool { b, n := w.state(); return n == 3 && strings.Contains(b, "id: 5\n") })

	cancel()
	<-served
}
