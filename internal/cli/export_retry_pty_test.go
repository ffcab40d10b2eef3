//go:build !windows

package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// On a terminal, export says each failed try in a short line that the next replaces, and
// erases it: the terminal ends with the command's one error line.
func TestExportRetriesOnATerminal(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		if requests.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":503,"code":"unavailable","detail":"try later"}`))
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"status":422,"code":"unknown_report","detail":"no report nope"}`))
	}))
	t.Cleanup(srv.Close)
	tty, screenText := terminal(t)

	var stdout strings.Builder
	err := Run(t.Context(), "test", []string{"export", "nope", "--server", srv.URL}, &stdout, tty)
	if code := Exit(err, tty); code != 2 {
		t.Errorf("503, then 422 on a terminal: exit %d, want 2", code)
	}
	out := screenText()
	if !strings.Contains(out, "sheetq: the server answered HTTP 503; trying again in 500ms") {
		t.Errorf("no notice of the failed try:\n%q", out)
	}
	want := "sheetq: server: unknown_report: no report nope (HTTP 422) (tried 2 times)"
	if lines := screen(strings.ReplaceAll(out, "\r\n", "\n")); len(lines) != 2 || lines[0] != want || lines[1] != "" {
		t.Errorf("the terminal shows %q, want only %q\nraw: %q", lines, want, out)
	}
}
