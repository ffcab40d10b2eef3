package cpuprofile

import (
	"os"
	"path/filepath"
	"testing"
)

// A profile is written to the file named, and an empty name writes nothing.
func TestStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile file: %v, %v; want a non-empty file", fi, err)
	}
	stop, err = Start("")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil {
		t.Fatal("a profile in a missing folder started")
	}
}
