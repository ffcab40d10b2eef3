// Package durable writes files so that they survive a crash or a power cut whole: written
// under a temporary name, fsynced, renamed into place, and the directory fsynced.
package durable

import (
	"os"
	"path/filepath"
)

// SyncDir fsyncs a directory so that a rename into it survives a power cut. Windows
// cannot open a directory for sync; there the rename is already durable enough and
// SyncDir returns nil.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !isUnsupportedSync(err) {
		return err
	}
	return nil
}

// Rename fsyncs the file at tmp, renames it to dst and fsyncs dst's directory, so that
// after a power cut dst names either the whole new file or what it named before. tmp is
// removed when the fsync fails.
func Rename(tmp, dst string) error {
	if err := SyncFile(tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(dst))
}

// SyncFile fsyncs the file at name.
func SyncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile writes data to dst through dst+".tmp" and Rename: a crash never leaves half
// a file where a whole one is expected.
func WriteFile(dst string, data []byte, perm os.FileMode) error {
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return Rename(tmp, dst)
}
