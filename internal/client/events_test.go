package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Events asks for one job's stream with Last-Event-ID, hands over each event, returns
// the last id seen; a refusal is a *Problem, and an answer that is not a stream an error.
func TestEventsStream(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("job") == "gone":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"status":404,"code":"not_found","detail":"no export gone"}`)
		case r.URL.Query().Get("job") == "html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>")
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "retry: 1000\nid: 7\n\nid: 8\nevent: accepted\ndata: {\"job\":%q,\"last\":%q}\n\nevent: progress\ndata: {}\n\n",
				r.URL.Query().Get("job"), r.Header.Get("Last-Event-ID"))
		}
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "", nil)
	var got []string
	last, err := c.Events(t.Context(), "j1", "5", func(e Event) bool {
		got = append(got, e.ID+"/"+e.Type+"/"+string(e.Data))
		return true
	})
	want := []string{"7//", `8/accepted/{"job":"j1","last":"5"}`, "/progress/{}"}
	if err != nil || last != "8" || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Events: last %q, err %v, events %q; want 8, nil, %q", last, err, got, want)
	}
	var p *Problem
	if _, err := c.Events(t.Context(), "gone", "", func(Event) bool { return true }); !errors.As(err, &p) || p.Status != 404 {
		t.Fatalf("unknown job: %v, want a 404 problem", err)
	}
	if _, err := c.Events(t.Context(), "html", "", func(Event) bool { return true }); err == nil || !strings.Contains(err.Error(), "not an event stream") {
		t.Fatalf("an HTML answer: %v", err)
	}
}
