//go:build unix

package export

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCSVSourceFIFO: a csv file that is a named pipe fails the attempt at once, with
// or without a writer that never writes. It used to block in open (or read) for as long
// as the writer liked, deaf to cancellation, holding a worker.
func TestCSVSourceFIFO(t *testing.T) {
	for _, withWriter := range []bool{false, true} {
		name := "no writer"
		if withWriter {
			name = "silent writer"
		}
		t.Run(name, func(t *testing.T) {
			src, dir := newCSVSource(t, map[string]string{"other.csv": "a\n1\n"})
			fifo := filepath.Join(dir, "t.csv")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			if withWriter {
				// O_RDWR opens a pipe without waiting for a reader; this end never writes.
				w, err := os.OpenFile(fifo, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { w.Close() })
			} else {
				// If the source blocks in open after all, a writer that comes and goes
				// lets it return, so that a failed test ends.
				t.Cleanup(func() {
					if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
				})
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := srcStream(ctx, t, src, srcReport("SELECT * FROM t"), nil)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second): // a failure guard, not a timing assertion
				cancel()
				t.Fatal("the csv source is still reading a named pipe after 10s")
			}
			srcJobError(t, err, true, "bad_csv")
			if !strings.Contains(err.Error(), "t.csv is not a regular file (a named pipe)") {
				t.Errorf("error %q does not say t.csv is a named pipe", err)
			}
			if left, _ := os.ReadDir(src.tmpDir); len(left) != 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}
