// Package durable writes files so that they survive a crash or a power cut whole: written
// under a temporary name, fsynced, renamed into place, and the directory fsynced. It also
// checks that a folder takes a new file before anything is written there (Writable).
package durable

import (
	"errors"
	"io/fs"
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

// Writable checks that dir takes a new file by creating and removing a hidden probe file
// in it. The error is the operating system's, without the probe's name, which would only
// confuse a person reading it.
func Writable(dir string) error {
	f, err := os.CreateTemp(dir, ".sheetq-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
