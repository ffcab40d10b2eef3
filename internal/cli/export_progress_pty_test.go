//go:build !windows

package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// In a pseudo-terminal, jobs wait (export --wait's progress) redraws one line in place
// and leaves the finished line clean: no tail of the ETA it showed while running.
func TestProgressOnATerminal(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)
	tty, screenText := terminal(t)

	id := newExport(t, srv, "rows=3000", "seconds=2.5")
	var stderr strings.Builder
	err := Run(t.Context(), "test", []string{"jobs", "wait", id, "--server", srv}, tty, &stderr)
	if code := Exit(err, &stderr); code != 0 {
		t.Fatalf("jobs wait on a terminal: exit %d, %s", code, stderr.String())
	}
	out := screenText()
	if n := strings.Count(out, "\r") - strings.Count(out, "\r\n"); n < 2 {
		t.Errorf("%d in-place redraws, want at least 2:\n%q", n, out)
	}
	lines := screen(out)
	finished := regexp.MustCompile(`^` + id[:8] + ` SUCCEEDED  \[#{30}\] 3000/3000 rows, 100%$`)
	if len(lines) < 2 || !finished.MatchString(lines[0]) {
		t.Fatalf("the terminal shows %q, want its first line to match %s\nraw: %q", lines, finished, out)
	}
}

// terminal opens a pseudo-terminal for a command to write to (tty); read closes tty and
// returns everything the terminal received. The test is skipped where no
// pseudo-terminal can be opened.
func terminal(t *testing.T) (tty *os.File, read func() string) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var raw bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&raw, ptmx)
		done <- err
	}()
	return tty, func() string {
		t.Helper()
		tty.Close()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, syscall.EIO) {
				t.Fatalf("read the terminal: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the terminal did not close")
		}
		return raw.String()
	}
}
