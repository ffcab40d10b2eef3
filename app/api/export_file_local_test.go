//go:build unix

package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sheetq/internal/apptest"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// TestFileServesOnlyTheRegularFileItPublished: whatever replaces a published file (a
// link out of the data directory or to the database inside it, a linked exports
// directory, a FIFO, a directory, a file of another size) is refused with 410
// file_missing and a WARN naming the path, and none of its bytes are sent.
func TestFileServesOnlyTheRegularFileItPublished(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{Log: &logs})
	j := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	path := jobs.FilePath(ts.dir.Exports(), j.ID+export.FileExt)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if res := ts.Get("/api/v1/exports/" + j.ID + "/file"); res.StatusCode != http.StatusOK || string(res.Body) != string(good) {
		t.Fatalf("the published file: status %d, %d bytes, want 200 with %d", res.StatusCode, len(res.Body), len(good))
	}

	const secret = "root:x:0:0:secret outside the data directory"
	outside := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(outside, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	otherExports := t.TempDir()
	if err := os.WriteFile(jobs.FilePath(otherExports, j.ID+export.FileExt), good, 0o644); err != nil {
		t.Fatal(err)
	}
	exportsDir := ts.dir.Exports()
	moved := exportsDir + ".moved"

	for _, tc := range []struct {
		name  string
		plant func() error
		undo  func() error
	}{
		{"link out of the data directory", func() error { return os.Symlink(outside, path) }, nil},
		{"link to the database", func() error { return os.Symlink(ts.dir.DB(), path) }, nil},
		{"relative link to the database", func() error { return os.Symlink("../sheetq.db", path) }, nil},
		{"FIFO", func() error { return syscall.Mkfifo(path, 0o644) }, nil},
		{"directory", func() error { return os.Mkdir(path, 0o755) }, nil},
		{"shorter file", func() error { return os.WriteFile(path, good[:len(good)-1], 0o644) }, nil},
		{"longer file", func() error { return os.WriteFile(path, append(good, '!'), 0o644) }, nil},
		{"linked exports directory", func() error {
			if err := os.Rename(exportsDir, moved); err != nil {
				return err
			}
			return os.Symlink(otherExports, exportsDir)
		}, func() error {
			if err := os.Remove(exportsDir); err != nil {
				return err
			}
			return os.Rename(moved, exportsDir)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.undo == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					os.RemoveAll(path)
					if err := os.WriteFile(path, good, 0o644); err != nil {
						t.Fatal(err)
					}
				})
			} else {
				t.Cleanup(func() {
					if err := tc.undo(); err != nil {
						t.Fatal(err)
					}
				})
			}
			if err := tc.plant(); err != nil {
				t.Fatal(err)
			}
			mark := len(logs.String())
			res := ts.Get("/api/v1/exports/" + j.ID + "/file")
			apptest.CheckProblem(t, res, http.StatusGone, "file_missing")
			if strings.Contains(string(res.Body), "secret") || res.Header.Get("ETag") != "" {
				t.Errorf("refused file leaked: ETag %q, body %s", res.Header.Get("ETag"), res.Body)
			}
			if l := logs.String()[mark:]; !strings.Contains(l, "level=WARN") || !strings.Contains(l, path) {
				t.Errorf("no WARN naming %s:\n%s", path, l)
			}
		})
	}

	// Put back, the file is served again.
	if res := ts.Get("/api/v1/exports/" + j.ID + "/file"); res.StatusCode != http.StatusOK || string(res.Body) != string(good) {
		t.Fatalf("restored file: status %d, %d bytes", res.StatusCode, len(res.Body))
	}
}
