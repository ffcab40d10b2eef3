package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestRunSendsEveryPhase: a shortened profile against a server that accepts everything
// sends each phase's requests, each with a key of its own and the report's body, and
// prints a line a phase; a server that refuses fails the run. No time is asserted.
func TestRunSendsEveryPhase(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/api/v1/exports" || !strings.Contains(string(b), `"rows":2000`) || !strings.Contains(string(b), `"report":"demo"`) {
			http.Error(w, "bad request "+string(b), http.StatusBadRequest)
			return
		}
		mu.Lock()
		keys[r.Header.Get("Idempotency-Key")] = true
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	var out strings.Builder
	if err := run(&out, srv.URL, "demo", "", params{"rows": 2000.0}, 0.02); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	// 20 warm-up requests, then 0.4 s at 100/s, 0.06 s at 1,200/s, 0.6 s at 100/s.
	if n := len(keys); n < 20+40+72+60-3 {
		t.Errorf("%d distinct keys sent, want about 192", n)
	}
	for _, ph := range []string{"before", "burst", "after"} {
		if !strings.Contains(out.String(), "\n"+ph+" ") {
			t.Errorf("no line for %s:\n%s", ph, out.String())
		}
	}

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	if err := run(io.Discard, refusing.URL, "demo", "", params{}, 0.01); err == nil {
		t.Error("a server that answers 503 did not fail the run")
	}
}
