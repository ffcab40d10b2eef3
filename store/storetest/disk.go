package storetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size bytes on dir and unmounts it when the test ends, for
// tests that need a disk that really fills (ENOSPC, SQLITE_FULL). Mounting needs root:
// without it the test is skipped, unless CI is set (CI runs as root and must run it).
// Call it before opening anything on dir, so that the unmount runs after it is closed.
func MountTmpfs(t testing.TB, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs (%v: %s): a disk-full test needs root (CI runs it)", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// FillDisk writes a file in dir until its file system has not one byte of room left, and
// returns a func that removes the file again.
func FillDisk(t testing.TB, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Big blocks, then small ones, until not one byte more fits.
	for _, size := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return func() {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}
