package durable

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile replaces a file whole and leaves no temporary file behind; Rename of a
// missing file fails without touching the destination.
func TestWriteFileAndRename(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "key")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFile(dst, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(dst); err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if err := Rename(filepath.Join(dir, "missing"), dst); err == nil {
		t.Fatal("Rename of a missing file succeeded")
	}
	if got, _ := os.ReadFile(dst); string(got) != "second, longer" {
		t.Fatalf("a failed Rename changed the destination to %q", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v); want only the file", entries, err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}
