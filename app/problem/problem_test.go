package problem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"sheetq/store"
)

// noter records what Reporter notes for readiness.
type noter struct{ errs []error }

func (n *noter) NoteError(err error) { n.errs = append(n.errs, err) }

// TestReporterError: one adapter answers every kind of failure a handler returns, each
// as problem+json with its status, code and headers, and only a server fault is an ERROR.
func TestReporterError(t *testing.T) {
	conflict := New(http.StatusConflict, "not_finished", "the export is PENDING").With("Retry-After", "2")
	conflict.Job = "j1"
	for _, tt := range []struct {
		name       string
		err        error
		gone       bool // the client hung up before the answer
		status     int
		code       string
		retryAfter string
		noted      bool
		logged     string
	}{
		{name: "problem", err: fmt.Errorf("cancel: %w", conflict), status: 409, code: "not_finished", retryAfter: "2"},
		{name: "disk full", err: fmt.Errorf("enqueue: %w", store.ErrDiskFull), status: 507, code: "disk_full", retryAfter: "60", noted: true, logged: "level=WARN msg=\"database fault\""},
		{name: "bug", err: errors.New("boom"), status: 500, code: "internal", logged: "level=ERROR msg=\"request failed\""},
		{name: "unstorable", err: fmt.Errorf("cancel j1: %w: 22P05", store.ErrUnstorable), status: 422, code: "unstorable_value",
			logged: "level=INFO msg=\"request refused: a value the store cannot keep\""},
		{name: "client gone", err: context.Canceled, gone: true, status: StatusClientClosed, logged: "level=INFO msg=\"client closed the request\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			n := &noter{}
			rp := Reporter{Store: n, Log: slog.New(slog.NewTextHandler(&logs, nil))}
			req := httptest.NewRequest(http.MethodPost, "/api/v1/exports", nil)
			if tt.gone {
				ctx, cancel := context.WithCancel(req.Context())
				cancel()
				req = req.WithContext(ctx)
			}
			rec := httptest.NewRecorder()
			rp.Handler(func(http.ResponseWriter, *http.Request) error { return tt.err })(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if (len(n.errs) > 0) != tt.noted {
				t.Errorf("noted for readiness: %v, want %v", n.errs, tt.noted)
			}
			if !strings.Contains(logs.String(), tt.logged) {
				t.Errorf("log %q, want a line with %q", logs.String(), tt.logged)
			}
			if tt.code == "" {
				if rec.Body.Len() != 0 {
					t.Errorf("an answer nobody reads: %s", rec.Body)
				}
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			var p Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Code != tt.code || p.Status != tt.status || p.Type != "/problems/"+tt.code || p.Title != http.StatusText(tt.status) || p.Detail == "" {
				t.Errorf("problem %+v, want code %s", p, tt.code)
			}
			if tt.name == "problem" && p.Job != "j1" {
				t.Errorf("job %q, want j1", p.Job)
			}
		})
	}
}
