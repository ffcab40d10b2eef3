//go:build !windows

package e2e

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// On a terminal, export --wait draws one progress bar updated in place (carriage
// returns) with percent and ETA; piped, the same export prints plain lines only.
func TestExportProgressOnTerminal(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--heartbeat", "250ms", "--stale-after", "2s", "--reports", t.TempDir())
	dir := t.TempDir()
	args := []string{"export", "demo", "-p", "rows=400", "-p", "seconds=4", "--wait", "--server", p.url}

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	cmd := exec.Command(binary, append(args, "-o", filepath.Join(dir, "tty.xlsx"))...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = tty, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds its own copy; EOF (EIO) on ptmx once it exits
	var screen bytes.Buffer
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(&screen, ptmx)
		read <- err
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("export --wait on a terminal: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("export --wait on a terminal did not finish")
	}
	select {
	case err := <-read:
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Fatalf("read the terminal: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal did not close")
	}
	out := screen.String()
	if n := strings.Count(out, "\r") - strings.Count(out, "\r\n"); n < 2 {
		t.Errorf("%d in-place redraws, want at least 2:\n%q", n, out)
	}
	for _, re := range []string{`\[#+\.*\]`, `\d+%`, `ETA \d+`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no %s on the terminal:\n%q", re, out)
		}
	}

	// The same export, piped: plain lines, no carriage returns, the states in order.
	cmd = exec.Command(binary, append(args, "-o", filepath.Join(dir, "pipe.xlsx"))...)
	cmd.Dir = dir
	piped, err := cmd.Output()
	if err != nil {
		t.Fatalf("export --wait piped: %v", err)
	}
	if bytes.Contains(piped, []byte("\r")) {
		t.Errorf("piped output redraws in place:\n%q", piped)
	}
	lines := strings.Split(strings.TrimSpace(string(piped)), "\n")
	if len(lines) < 3 || !strings.Contains(string(piped), ": PROCESSING") || !strings.Contains(string(piped), "%") {
		t.Errorf("piped output, want a line per state and progress lines:\n%s", piped)
	}
}
