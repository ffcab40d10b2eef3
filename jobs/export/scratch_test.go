package export

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Spill files a killed process left in the kind's tmp folder are removed; part files
// (the engine's) and anything else are left alone.
func TestRemoveScratchRemovesOnlySpillFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"sheetq-sheet-123", "excelize-456", "sheetq-probe-7", "abc.1.part", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "excelize-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{TmpDir: dir}).RemoveScratch()
	if err != nil || n != 3 {
		t.Fatalf("RemoveScratch = %d, %v; want 3, nil", n, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"abc.1.part", "excelize-dir", "notes.txt"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}

	// The system's temporary folder is shared: without a TmpDir nothing is touched.
	if n, err := New(Config{}).RemoveScratch(); n != 0 || err != nil {
		t.Fatalf("without TmpDir: %d, %v", n, err)
	}
	// A tmp folder that does not exist yet has nothing to remove.
	if n, err := New(Config{TmpDir: filepath.Join(dir, "missing")}).RemoveScratch(); n != 0 || err != nil {
		t.Fatalf("missing folder: %d, %v", n, err)
	}
}
