package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sheetq/internal/apiv1"
	"sheetq/internal/client"
)

// refusingServer answers every request with the problem body and status, and counts
// the requests it got.
func refusingServer(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// export --wait checks where it will save the file before it sends anything: a path it
// cannot write is a usage error (exit 2, one line) and the server gets no request; a
// good path is not created by the check.
func TestExportChecksOutputFirst(t *testing.T) {
	srv, requests := refusingServer(t, http.StatusUnprocessableEntity, `{"status":422,"code":"unknown_report","title":"Unprocessable Entity","detail":"no report demo"}`)
	dir := t.TempDir()
	aFile := filepath.Join(dir, "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	export := func(out string) error {
		var stdout, stderr strings.Builder
		return exportCmd(context.Background(), []string{"demo", "--wait", "-o", out, "--server", srv.URL}, &stdout, &stderr)
	}

	for _, out := range []string{
		filepath.Join(string(filepath.Separator)+"nonexistent-sheetq-dir", "x.xlsx"),
		filepath.Join(aFile, "x.xlsx"), // the folder is a file
		dir,                            // a folder, not a file
	} {
		err := export(out)
		var ue usageError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), out) {
			t.Errorf("-o %s: %v, want a one-line usage error naming the path", out, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server got %d requests for outputs that cannot be written", n)
	}

	good := filepath.Join(dir, "x.xlsx")
	err := export(good)
	if ee := (exitError{}); !errors.As(err, &ee) || ee.code != exitUsage || requests.Load() == 0 {
		t.Fatalf("-o %s: %v after %d requests; want the server's refusal", good, err, requests.Load())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the check left files behind: %v", entries)
	}
}

// The tries export makes of a request that fails are not lines on stderr (but for a
// terminal's line that the next replaces): the command ends with one line, which says
// how often it tried, and a request that gets through after a retry leaves stderr empty.
func TestExportRetriesAreNotLines(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		switch n := requests.Add(1); {
		case n%2 == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":503,"code":"unavailable","detail":"try later"}`))
		case n == 2:
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"status":422,"code":"unknown_report","detail":"no report nope"}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"id":"j1","status":"PENDING","report":"demo"}`))
		}
	}))
	t.Cleanup(srv.Close)

	_, stderr, code := runCLI(t, "export", "nope", "--server", srv.URL)
	if code != 2 || !strings.Contains(stderr, "no report nope (HTTP 422) (tried 2 times)") {
		t.Errorf("503, then 422: exit %d, stderr %q; want 2 and the 422 after 2 tries", code, stderr)
	}
	oneErrLine(t, "503, then 422", stderr)

	stdout, stderr, code := runCLI(t, "export", "demo", "--server", srv.URL)
	if code != 0 || stdout != "j1\n" || stderr != "" {
		t.Errorf("503, then 202: exit %d, stdout %q, stderr %q; want 0, the id and nothing on stderr", code, stdout, stderr)
	}
}

// export --wait --json prints the finished job on stdout however it ended, as jobs wait
// --json does: a failed one too, with its error (and exit 1, one line on stderr).
func TestExportWaitJSONPrintsAFailedJob(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)
	stdout, stderr, code := runCLI(t, "export", "demo", "-p", "rows=10", "-p", "fail_first=10", "--wait", "--json",
		"-o", filepath.Join(t.TempDir(), "f.xlsx"), "--server", srv)
	var job client.Job
	if code != 1 || json.Unmarshal([]byte(stdout), &job) != nil || job.Status != "FAILED" || job.Error == nil {
		t.Fatalf("a failing export --wait --json: exit %d, stdout %q; want 1 and the FAILED job\n%s", code, stdout, stderr)
	}
	if !strings.HasSuffix(stderr, "sheetq: export "+job.ID+" failed after 3 attempts: "+job.Error.Code+": "+job.Error.Message+"\n") {
		t.Errorf("stderr does not end with the failure's line:\n%s", stderr)
	}
}

// A failed export's line counts its attempts in words that fit the number.
func TestEndErrorCountsAttempts(t *testing.T) {
	for n, want := range map[int]string{1: "failed after 1 attempt: bad: no", 2: "failed after 2 attempts: bad: no"} {
		err := endError(client.Job{ID: "j", Status: "FAILED", Attempt: n, Error: &apiv1.Error{Code: "bad", Message: "no"}})
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%d attempts: %v, want it to end %q", n, err, want)
		}
	}
}

// export of a report the server does not have lists the reports it has, as jobs list
// --report does (issue 37: it said only the server's unknown_report), with exit 2.
func TestExportUnknownReportListsTheReports(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)
	stdout, stderr, code := runCLI(t, "export", "nosuch", "--server", srv)
	const has = ": the server has no such report (it has: "
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "sheetq: export nosuch"+has) || !strings.Contains(stderr, "demo") {
		t.Fatalf("export nosuch: exit %d, stdout %q, stderr %q; want 2 and the reports", code, stdout, stderr)
	}
	oneErrLine(t, "export nosuch", stderr)
	_, listErr, _ := runCLI(t, "jobs", "list", "--report", "nosuch", "--server", srv)
	if _, want, _ := strings.Cut(listErr, has); !strings.HasSuffix(stderr, has+want) {
		t.Errorf("export nosuch: %q; jobs list --report nosuch: %q; want the same list", stderr, listErr)
	}
}
