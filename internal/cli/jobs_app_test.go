package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sheetq/internal/apptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oneErrLine fails the test unless stderr is exactly one "sheetq: " line.
func oneErrLine(t *testing.T, what, stderr string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "sheetq: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("%s: stderr %q, want one sheetq: line", what, stderr)
	}
}

// newExport asks the server for a demo export and returns its id.
func newExport(t *testing.T, srv string, params ...string) string {
	t.Helper()
	args := []string{"export", "demo", "--server", srv}
	for _, p := range params {
		args = append(args, "-p", p)
	}
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("export %v: exit %d\n%s%s", params, code, stdout, stderr)
	}
	return strings.TrimSpace(stdout)
}

// jobs list says "no exports" on an empty server, refuses an unknown --report with one
// line (exit 2), and shows parameters, size and duration with thousands separators.
func TestJobsListAgainstTheApp(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)

	stdout, stderr, code := runCLI(t, "jobs", "list", "--server", srv)
	if code != 0 || stdout != "no exports\n" || stderr != "" {
		t.Fatalf("empty list: exit %d, stdout %q, stderr %q; want 0 and \"no exports\"", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, "jobs", "list", "--report", "nope", "--server", srv)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "--report nope: the server has no such report") {
		t.Fatalf("--report nope: exit %d, stdout %q, stderr %q; want 2 and no such report", code, stdout, stderr)
	}
	oneErrLine(t, "--report nope", stderr)
	stdout, _, code = runCLI(t, "jobs", "list", "--report", "demo", "--status", "FAILED", "--server", srv)
	if code != 0 || stdout != "no exports with status FAILED and report demo\n" {
		t.Fatalf("a known report without exports: exit %d, %q", code, stdout)
	}

	id := newExport(t, srv, "rows=12345", "seconds=0")
	if _, stderr, code := runCLI(t, "jobs", "wait", id, "--server", srv); code != 0 {
		t.Fatalf("jobs wait: exit %d, %s", code, stderr)
	}
	stdout, stderr, code = runCLI(t, "jobs", "list", "--server", srv)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("jobs list: exit %d\n%s%s", code, stdout, stderr)
	}
	header := regexp.MustCompile(`^ID +STATUS +REPORT +PARAMS +ATTEMPT +ROWS +SIZE +DURATION +CREATED$`)
	if !header.MatchString(lines[0]) {
		t.Errorf("header %q", lines[0])
	}
	row := regexp.MustCompile(`^` + id + ` +SUCCEEDED +demo +fail_first=0 rows=12345 seconds=0 +1/3 +12,345/12,345 +[0-9.]+ (KB|MB) +[0-9.]+m?s +\d{4}-`)
	if !row.MatchString(lines[1]) {
		t.Errorf("row %q, want it to match %s", lines[1], row)
	}
	// The columns line up: every header name starts where its value starts.
	if i, j := strings.Index(lines[0], "ROWS"), strings.Index(lines[1], "12,345/"); i < 0 || i != j {
		t.Errorf("ROWS at %d, its value at %d:\n%s", i, j, stdout)
	}
}

// jobs wait follows an export as export --wait does, with its exit statuses; jobs
// download saves the file of an export that ended earlier; jobs delete removes a
// finished export and refuses a running one.
func TestJobsWaitDownloadDelete(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)
	dir := t.TempDir()

	id := newExport(t, srv, "rows=2000", "seconds=0.5")
	stdout, stderr, code := runCLI(t, "jobs", "wait", id, "--server", srv)
	if code != 0 || !strings.Contains(stdout, "export "+id+" succeeded: 2,000/2,000 rows") || !strings.Contains(stdout, "SUCCEEDED") {
		t.Fatalf("jobs wait: exit %d\n%s%s", code, stdout, stderr)
	}

	out := filepath.Join(dir, "later.xlsx")
	stdout, stderr, code = runCLI(t, "jobs", "download", id, "-o", out, "--server", srv)
	if code != 0 || !strings.HasPrefix(stdout, "saved "+out+" (") {
		t.Fatalf("jobs download: exit %d\n%s%s", code, stdout, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 || !strings.Contains(stdout, "("+strconv.FormatInt(fi.Size(), 10)+" bytes") {
		t.Fatalf("downloaded file: %v, %v; stdout %q", fi, err, stdout)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"jobs", "download", "nope"}, 1, "not_found"},
		{[]string{"jobs", "download", id, "-o", filepath.Join(dir, "no", "such", "dir.xlsx")}, 2, "does not exist"},
		{[]string{"jobs", "download"}, 2, "takes one export ID"},
		{[]string{"jobs", "wait", "nope"}, 1, "not_found"},
		{[]string{"jobs", "delete", "nope"}, 1, "not_found"},
	} {
		_, stderr, code := runCLI(t, append(tc.args, "--server", srv)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		oneErrLine(t, strings.Join(tc.args, " "), stderr)
	}

	// A running export: download says it has no file yet, delete refuses it (409) with
	// the command that cancels it, not the API's POST .../cancel (issue 37), a cancel
	// makes jobs wait exit 3.
	slow := newExport(t, srv, "rows=1000000", "seconds=600")
	_, stderr, code = runCLI(t, "jobs", "download", slow, "-o", filepath.Join(dir, "slow.xlsx"), "--server", srv)
	if code != 1 || !strings.Contains(stderr, "has no file yet") {
		t.Errorf("download of a running export: exit %d, %q", code, stderr)
	}
	_, stderr, code = runCLI(t, "jobs", "delete", slow, "--server", srv)
	if want := "sheetq: export " + slow + " has not finished; cancel it first (sheetq jobs cancel " + slow + "), then delete it\n"; code != 1 || stderr != want {
		t.Errorf("delete of a running export: exit %d, %q; want 1 and %q", code, stderr, want)
	}
	if _, stderr, code := runCLI(t, "jobs", "cancel", slow, "--server", srv); code != 0 {
		t.Fatalf("cancel: exit %d, %s", code, stderr)
	}
	_, stderr, code = runCLI(t, "jobs", "wait", slow, "--server", srv)
	if code != 3 || !strings.Contains(stderr, "was canceled") {
		t.Errorf("wait for a canceled export: exit %d, %q; want 3", code, stderr)
	}
	_, stderr, code = runCLI(t, "jobs", "download", slow, "--server", srv)
	if code != 3 {
		t.Errorf("download of a canceled export: exit %d, %q; want 3", code, stderr)
	}

	// A failing export: wait exits 1 with the error.
	failing := newExport(t, srv, "rows=10", "fail_first=10")
	_, stderr, code = runCLI(t, "jobs", "wait", failing, "--server", srv)
	if code != 1 || !strings.Contains(stderr, "failed after 3 attempts") {
		t.Errorf("wait for a failing export: exit %d, %q; want 1", code, stderr)
	}

	stdout, stderr, code = runCLI(t, "jobs", "delete", id, "--server", srv)
	if code != 0 || stdout != "export "+id+" deleted\n" {
		t.Fatalf("jobs delete: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, "jobs", "show", id, "--server", srv); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Errorf("show after delete: exit %d, %q; want 1 and not_found", code, stderr)
	}
}

// jobs events prints one line per event as it comes (its time with the zone's name),
// every export's or only one's, and
// Ctrl-C (the context ending) ends it with 130.
func TestJobsEvents(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)
	follow := func(args ...string) (out *apptest.SyncBuffer, stop func() int) {
		ctx, cancel := context.WithCancel(t.Context())
		out = &apptest.SyncBuffer{}
		var errOut apptest.SyncBuffer
		done := make(chan int, 1)
		go func() {
			err := Run(ctx, "test", append(append([]string{"jobs", "events"}, args...), "--server", srv), out, &errOut)
			done <- Exit(err, &errOut)
		}()
		return out, func() int {
			cancel()
			select {
			case code := <-done:
				if code == exitInterrupted {
					oneErrLine(t, "events after Ctrl-C", errOut.String())
				}
				return code
			case <-time.After(10 * time.Second):
				t.Fatal("jobs events did not end after Ctrl-C")
				return 0
			}
		}
	}

	// The first export runs a while, so that the streams are open before the second exists.
	a := newExport(t, srv, "rows=3000", "seconds=3")
	all, stopAll := follow()
	only, stopOnly := follow(a)
	// Both streams are open once they show a's progress; only then is b made.
	progressOf := func(buf *apptest.SyncBuffer, id string) bool {
		return regexp.MustCompile(`(?m)^\S+ \S+ \S+  progress +` + id + `  `).MatchString(buf.String())
	}
	eventually(t, 30*time.Second, "both streams open", func() bool { return progressOf(all, a) && progressOf(only, a) })
	b := newExport(t, srv, "rows=10")
	succeeded := func(buf *apptest.SyncBuffer, id string) bool {
		return regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+  succeeded +` + id + ` +SUCCEEDED, attempt 1/3`).MatchString(buf.String())
	}
	eventually(t, 30*time.Second, "all exports' events", func() bool { return succeeded(all, a) && succeeded(all, b) })
	eventually(t, 30*time.Second, "one export's events", func() bool { return succeeded(only, a) })
	if code := stopAll(); code != exitInterrupted {
		t.Errorf("jobs events: exit %d after Ctrl-C, want 130", code)
	}
	if code := stopOnly(); code != exitInterrupted {
		t.Errorf("jobs events ID: exit %d after Ctrl-C, want 130", code)
	}
	if strings.Contains(only.String(), b) {
		t.Errorf("jobs events %s shows the other export %s:\n%s", a, b, only)
	}
	// b was accepted after the streams opened: the stream shows all of its life.
	for _, want := range []string{"accepted", "started", "succeeded"} {
		if !regexp.MustCompile(`(?m)^\S+ \S+ \S+  ` + want + ` +` + b + `  `).MatchString(all.String()) {
			t.Errorf("no %s line for %s:\n%s", want, b, all)
		}
	}
	if !regexp.MustCompile(`(?m)^\S+ \S+ \S+  progress +` + a + `  [\d,]+/3,000 rows, \d+%$`).MatchString(only.String()) {
		t.Errorf("no progress line for %s:\n%s", a, only)
	}
	if strings.Contains(all.String(), "  -  ") {
		t.Errorf("an event without a type or export:\n%s", all)
	}
	if strings.Count(all.String(), "\n") < 4 {
		t.Errorf("too few lines:\n%s", all)
	}

	_, stderr, code := runCLI(t, "jobs", "events", "nope", "--server", srv)
	if code != 1 || !strings.Contains(stderr, "not_found") {
		t.Errorf("events of an unknown export: exit %d, %q", code, stderr)
	}
	_, stderr, code = runCLI(t, "jobs", "events", "a", "b", "--server", srv)
	if code != 2 {
		t.Errorf("events with two ids: exit %d, %q", code, stderr)
	}
}
