//go:build unix

package export

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCheckDirNamedPipe: a report file that is a named pipe is a broken entry, and the
// other reports load. Opening it used to wait for a writer that never came, holding
// reports check, the server's start and the watcher (and so Stop) for good.
func TestCheckDirNamedPipe(t *testing.T) {
	dir := t.TempDir()
	writeReportFile(t, filepath.Join(dir, "good.sql"), reportSource("Good"))
	fifo := filepath.Join(dir, "pipe.sql")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// If the scan blocks in open after all, a writer that comes and goes lets it
	// return, so that a failed test ends.
	t.Cleanup(func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	done := make(chan []Entry, 1)
	go func() {
		entries, err := CheckDir(dir, nil)
		if err != nil {
			t.Error(err)
		}
		done <- entries
	}()
	select {
	case entries := <-done:
		want := "good=Good, pipe!0:read: not a regular file (a named pipe)"
		if got := catalogSummary(entries); got != want {
			t.Fatalf("entries\n got %s\nwant %s", got, want)
		}
	case <-time.After(10 * time.Second): // a failure guard, not a timing assertion
		t.Fatal("CheckDir is still opening a named pipe after 10s")
	}
}
