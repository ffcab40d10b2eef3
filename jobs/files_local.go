package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"sheetq/internal/durable"
)

// LocalFiles is the data directory's exports/ folder: a job's file is exports/<name>
// (FilePath), the same name for every attempt. So an attempt publishes only inside the
// fenced SUCCEEDED transaction, by a rename of its fsynced part file (rule 7): an attempt
// that lost its lease never replaces the file of the one that took its job over.
type LocalFiles struct {
	// dir is the exports folder; root is the data directory that holds it, the bound
	// of what a download may reach.
	dir, root string
}

var _ Files = (*LocalFiles)(nil)

// NewLocalFiles returns the file store of the folder dir, which sits in the data
// directory (its parent).
func NewLocalFiles(dir string) *LocalFiles {
	return &LocalFiles{dir: dir, root: filepath.Dir(dir)}
}

// Key is the kind's file name: one name for every attempt of a job.
func (l *LocalFiles) Key(id string, attempt int, fileName string) string { return fileName }

// Put publishes nothing yet: it returns the rename that the SUCCEEDED transaction runs
// once the fence matched. A commit can fail after the rename (a full disk): the next try
// of the same commit finds the file already in place and commits it.
func (l *LocalFiles) Put(ctx context.Context, key, src string, size int64, sum string) (func() error, error) {
	final := FilePath(l.dir, key)
	if final == "" {
		return nil, fmt.Errorf("publish: %q is not a file name", key)
	}
	renamed := false
	return func() error {
		if !renamed {
			faultPoint("after-fsync")
			if err := os.Rename(src, final); err != nil {
				return publishError{err}
			}
			renamed = true
		}
		if err := durable.SyncDir(l.dir); err != nil {
			return publishError{err}
		}
		faultPoint("after-rename")
		return nil
	}, nil
}

// Stat hashes the published file (HashFile): only a regular file counts.
func (l *LocalFiles) Stat(ctx context.Context, key string) (FileInfo, error) {
	path := FilePath(l.dir, key)
	if path == "" {
		return FileInfo{}, fmt.Errorf("%q is not a file name: %w", key, fs.ErrNotExist)
	}
	size, sum, err := HashFile(path)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Key: key, Path: path, Size: size, SHA256: sum}, nil
}

// Open opens the published file for serving. It serves only a regular file reached
// inside the data directory without following a link: an os.Root refuses paths that
// leave the directory, Lstat refuses a link or a special file, and comparing Lstat with
// the open file's Stat (os.SameFile) defeats a swap between the two. The caller checks
// the size against the job's. The SHA256 is left empty: it would mean reading the file.
func (l *LocalFiles) Open(ctx context.Context, key string) (io.ReadSeekCloser, FileInfo, error) {
	path := FilePath(l.dir, key)
	if path == "" {
		return nil, FileInfo{}, fmt.Errorf("%q is not a file name: %w", key, fs.ErrNotExist)
	}
	rel, err := filepath.Rel(l.root, path)
	if err != nil {
		return nil, FileInfo{}, err
	}
	dirRoot, err := os.OpenRoot(l.root)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer dirRoot.Close() // an open file outlives its Root
	refuse := func(reason string) (io.ReadSeekCloser, FileInfo, error) {
		return nil, FileInfo{}, &RefusedFileError{Path: path, Reason: reason}
	}
	// The Root refuses a path that a linked directory leads out of, with an error that
	// is not exported; naming the likely cause is clearer.
	if di, err := dirRoot.Lstat(filepath.Dir(rel)); err == nil && !di.IsDir() {
		return refuse("its directory " + filepath.Dir(path) + " is a link or not a directory")
	}
	before, err := dirRoot.Lstat(rel)
	switch {
	case err != nil:
		return nil, FileInfo{}, err
	case before.Mode()&fs.ModeSymlink != 0:
		return refuse("it is a symbolic link")
	case !before.Mode().IsRegular():
		return refuse("it is not a regular file (" + before.Mode().Type().String() + ")")
	}
	f, err := dirRoot.OpenFile(rel, openPublishedFlags, 0)
	if err != nil {
		return nil, FileInfo{}, err
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, FileInfo{}, err
	}
	if !after.Mode().IsRegular() || !os.SameFile(before, after) {
		f.Close()
		return refuse("it was replaced while being opened")
	}
	return f, FileInfo{Key: key, Path: path, Size: after.Size(), Modified: after.ModTime()}, nil
}

// Delete removes the file; a missing file, or no name (a job that published no file), is
// fine.
func (l *LocalFiles) Delete(ctx context.Context, key string) (int64, error) {
	path := FilePath(l.dir, key)
	if path == "" {
		return 0, nil
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	return fi.Size(), nil
}

// Presign is ErrNoPresign: a local file is streamed by the node that has it.
func (l *LocalFiles) Presign(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error) {
	return "", ErrNoPresign
}
