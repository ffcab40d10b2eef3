package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The jobs subcommands refuse a bad command line with exit 2 and one line, before any
// request.
func TestJobsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"jobs"},
		{"jobs", "frobnicate"},
		{"jobs", "show"},
		{"jobs", "cancel", "a", "b"},
		{"jobs", "list", "extra"},
		{"jobs", "list", "--limit", "0"},
		{"jobs", "retry", "x", "--server", "localhost:1"},
		{"jobs", "show", "x", "--nope"},
	} {
		_, stderr, code := runCLI(t, args...)
		last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
		if code != 2 || !strings.HasPrefix(last, "sheetq: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a closing sheetq: line", args, code, stderr)
		}
	}
	if stdout, _, code := runCLI(t, "jobs", "help"); code != 0 || !strings.Contains(stdout, "sheetq jobs retry ID") {
		t.Errorf("jobs help: exit %d\n%s", code, stdout)
	}
}

// Each jobs subcommand sends its request and prints the answer; the server's refusals
// and failures get their exit statuses (docs/cli.md).
func TestJobsAgainstAServer(t *testing.T) {
	job := `{"id":"j1","status":"SUCCEEDED","report":"demo","params":{"rows":5},"attempt":1,"max_attempts":3,
		"progress":{"rows":5,"total_rows":5},"download_url":"/api/v1/exports/j1/file",
		"file":{"name":"j1.xlsx","size":123,"sha256":"abc"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"status":401,"code":"unauthorized","detail":"token required"}`)
			return
		}
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/exports":
			if r.URL.Query().Get("limit") != "7" || r.URL.Query().Get("status") != "FAILED" {
				http.Error(w, "unexpected query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, `{"exports":[`+job+`]}`)
		case "GET /api/v1/exports/j1":
			fmt.Fprint(w, job)
		case "POST /api/v1/exports/j1/cancel":
			fmt.Fprint(w, `{"id":"j1","status":"PROCESSING","cancel_requested":true}`)
		case "POST /api/v1/exports/j1/retry":
			fmt.Fprint(w, `{"id":"j1","status":"PENDING","max_attempts":4}`)
		case "GET /api/v1/exports/gone":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"status":404,"code":"not_found","detail":"no export gone"}`)
		case "GET /api/v1/exports/broken":
			w.WriteHeader(http.StatusInternalServerError)
		case "GET /api/v1/exports/garbled":
			fmt.Fprint(w, `{"id":`)
		}
	}))
	t.Cleanup(srv.Close)
	s := []string{"--server", srv.URL, "--token", "tok"}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"jobs", "list", "--status", "FAILED", "--limit", "7"}, 0, "j1  SUCCEEDED  demo    rows=5  1/3      5/5   123 B  -"},
		{[]string{"jobs", "show", "j1"}, 0, "download:  " + srv.URL + "/api/v1/exports/j1/file"},
		{[]string{"jobs", "show", "j1", "--json"}, 0, `"sha256": "abc"`},
		{[]string{"jobs", "cancel", "j1"}, 0, "export j1: cancel requested (PROCESSING); it stops within one heartbeat"},
		{[]string{"jobs", "retry", "j1"}, 0, "export j1: PENDING again (attempt budget 4)"},
		{[]string{"jobs", "show", "gone"}, 1, "sheetq: server: not_found: no export gone (HTTP 404)"},
		{[]string{"jobs", "show", "broken"}, 4, "HTTP 500"},
		{[]string{"jobs", "show", "garbled"}, 4, "bad answer from the server"},
	} {
		stdout, stderr, code := runCLI(t, append(tt.args, s...)...)
		if code != tt.code || !strings.Contains(stdout+stderr, tt.want) {
			t.Errorf("%q: exit %d, want %d with %q\nstdout:\n%sstderr:\n%s", tt.args, code, tt.code, tt.want, stdout, stderr)
		}
	}
	if _, stderr, code := runCLI(t, "jobs", "show", "j1", "--server", srv.URL); code != 4 || !strings.Contains(stderr, "401") {
		t.Errorf("without the token: exit %d, %s; want 4", code, stderr)
	}
}

// An export ID that is no path segment ("", ".", "..") is a bad command line: sent, it
// named another URL once the path was cleaned (the list of exports, whose JSON read as
// an empty job: jobs wait waited forever on it, jobs download said "export  is ,").
func TestJobsRefuseIDsThatAreNoPathSegment(t *testing.T) {
	srv, requests := refusingServer(t, http.StatusNotFound, `{"status":404,"code":"not_found","detail":"no such export"}`)
	for _, sub := range []string{"show", "cancel", "retry", "delete", "wait", "download", "events"} {
		for _, id := range []string{"", ".", ".."} {
			args := []string{"jobs", sub, id, "--server", srv.URL}
			_, stderr, code := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, "is not an export ID") {
				t.Errorf("%q: exit %d, stderr %q; want 2 and not an export ID", args, code, stderr)
			}
			oneErrLine(t, strings.Join(args, " "), stderr)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the server got %d requests for IDs that are no path segment", n)
	}
	// Any other ID is the server's to judge: "a/b" and "%" are escaped, and unknown.
	for _, id := range []string{"a/b", "%", "a b", "..."} {
		if _, stderr, code := runCLI(t, "jobs", "show", id, "--server", srv.URL); code != 1 || !strings.Contains(stderr, "not_found") {
			t.Errorf("jobs show %q: exit %d, %q; want 1 and the server's not_found", id, code, stderr)
		}
	}
}

// A --server (or SHEETQ_SERVER) that is no URL of a server is a bad command line, exit 2
// with one line, not a server that could not be reached (exit 4).
func TestJobsServerURLMustNameAHost(t *testing.T) {
	for _, server := range []string{"http://", "https:///x", "http://[::1", "http:// bad", "http://127.0.0.1:1?x=1", "http://127.0.0.1:1/#x", "http://127.0.0.1:port"} {
		_, stderr, code := runCLI(t, "jobs", "list", "--server", server)
		if code != 2 || !strings.Contains(stderr, "--server") {
			t.Errorf("--server %s: exit %d, stderr %q; want 2 naming --server", server, code, stderr)
		}
		oneErrLine(t, "--server "+server, stderr)
	}
	t.Setenv("SHEETQ_SERVER", "http://")
	if _, stderr, code := runCLI(t, "jobs", "show", "x"); code != 2 {
		t.Errorf("SHEETQ_SERVER=http://: exit %d, stderr %q; want 2", code, stderr)
	}
}

// An error whose text has line breaks (an export's error as its source worded it) is
// still one line on stderr.
func TestJobsErrorWithLineBreaksIsOneLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":"j1","status":"FAILED","report":"r","attempt":1,"max_attempts":1,
			"error":{"code":"query","message":"no such table: no\nsuch\r\n(1)"}}`)
	}))
	t.Cleanup(srv.Close)
	_, stderr, code := runCLI(t, "jobs", "wait", "j1", "--server", srv.URL)
	if code != 1 || !strings.Contains(stderr, "query: no such table: no such (1)") {
		t.Errorf("jobs wait of a failed export: exit %d, stderr %q; want 1 and its error on one line", code, stderr)
	}
	oneErrLine(t, "jobs wait", stderr)
}

// Ctrl-C (the context ending) during a request of a command that does not wait is exit
// 130, "interrupted", not a server that could not be reached (exit 4).
func TestJobsInterruptedRequest(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	var stdout, stderr strings.Builder
	code := Exit(Run(ctx, "test", []string{"jobs", "show", "j1", "--server", srv.URL}, &stdout, &stderr), &stderr)
	if code != exitInterrupted || stderr.String() != "sheetq: interrupted\n" {
		t.Errorf("jobs show interrupted: exit %d, stderr %q; want 130 and sheetq: interrupted", code, stderr.String())
	}
}
