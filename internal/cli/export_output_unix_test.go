//go:build unix

package cli

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// -o naming an existing file that is not a regular one (a pipe here; /dev/null run as
// root did the same) is refused before any request: saving renames FILE.part over it,
// which replaced the device with a regular file.
func TestDownloadRefusesANonRegularFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var requests atomic.Int32
	body := []byte("a,b\n1,2\n")
	sum := sha256.Sum256(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/api/v1/exports/j1":
			fmt.Fprintf(w, `{"id":"j1","status":"SUCCEEDED","format":"csv","download_url":"/api/v1/exports/j1/file",
				"file":{"name":"j1.csv","size":%d,"sha256":"%x"}}`, len(body), sum)
		case "/api/v1/exports/j1/file":
			_, _ = w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, args := range [][]string{
		{"jobs", "download", "j1", "-o", fifo},
		{"export", "demo", "--wait", "-o", fifo},
	} {
		_, stderr, code := runCLI(t, append(args, "--server", srv.URL)...)
		if code != 2 || !strings.Contains(stderr, fifo+": is not a regular file") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and not a regular file", args, code, stderr)
		}
		oneErrLine(t, strings.Join(args, " "), stderr)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe is now %v, %v", fi, err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}
