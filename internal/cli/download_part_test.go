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
	"testing"
)

// partServer serves one finished csv export, j1, whose file is body, to jobs download
// and export --wait alike, and counts the requests for the file.
func partServer(t *testing.T, body []byte) (*httptest.Server, *atomic.Int32) {
	var files atomic.Int32
	sum := sha256.Sum256(body)
	job := fmt.Sprintf(`{"id":"j1","status":"SUCCEEDED","report":"demo","format":"csv","attempt":1,"max_attempts":3,
		"download_url":"/api/v1/exports/j1/file","file":{"name":"j1.csv","size":%d,"sha256":"%x"}}`, len(body), sum)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /api/v1/exports":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, job)
		case "GET /api/v1/exports/j1":
			fmt.Fprint(w, job)
		case "GET /api/v1/exports/j1/file":
			files.Add(1)
			_, _ = w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &files
}

// A FILE.part that is a folder is refused before the file is asked for, as -o naming a
// folder is (exit 2, one line naming FILE.part): the download went through it and failed
// only then. A regular FILE.part, left by an interrupted run, is overwritten.
func TestDownloadChecksThePartFileFirst(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	body := []byte("a,b\n1,2\n")
	srv, files := partServer(t, body)
	for _, cmd := range [][]string{
		{"jobs", "download", "j1"},
		{"export", "demo", "--wait"},
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, "f.csv")
		if err := os.Mkdir(out+".part", 0o755); err != nil {
			t.Fatal(err)
		}
		args := append(cmd, "-o", out, "--server", srv.URL)
		_, stderr, code := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, out+".part is a folder") {
			t.Errorf("%q with a folder %s.part: exit %d, stderr %q; want 2 naming it", cmd, out, code, stderr)
		}
		oneErrLine(t, strings.Join(cmd, " "), stderr)
		if n := files.Load(); n != 0 {
			t.Errorf("%q: the file was asked for %d times", cmd, n)
		}
		if fi, err := os.Stat(out + ".part"); err != nil || !fi.IsDir() {
			t.Errorf("%q: the folder %s.part is now %v, %v", cmd, out, fi, err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%q: %s was saved", cmd, out)
		}

		// An earlier run's regular FILE.part, longer than the file, is overwritten.
		if err := os.Remove(out + ".part"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out+".part", []byte(strings.Repeat("stale ", 100)), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, args...)
		if got, err := os.ReadFile(out); code != 0 || err != nil || string(got) != string(body) {
			t.Errorf("%q over a stale %s.part: exit %d, file %q, %v; want 0 and the file\n%s%s", cmd, out, code, got, err, stdout, stderr)
		}
		if _, err := os.Stat(out + ".part"); err == nil {
			t.Errorf("%q: %s.part is left behind", cmd, out)
		}
		files.Store(0)
	}
}
