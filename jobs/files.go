package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sheetq/internal/objstore"
)

// Files is where published files live (ARCHITECTURE.md, "Files"): the data directory's
// exports/ folder (LocalFiles), or a prefix of an S3-compatible bucket that several nodes
// share (S3Files). The engine publishes through it, the reaper completes orphans from it
// (rule 5), Delete and the janitor remove from it, and the API serves downloads from it.
type Files interface {
	// Key is the name under which an attempt's file is published and recorded
	// (store.FileResult.Name), given the kind's name for the file (FileNamer).
	Key(id string, attempt int, fileName string) string
	// Put publishes the finished, fsynced part file src (size bytes whose sha256 is sum)
	// under key, and returns publish: the step that store.Finish.Publish runs inside the
	// fenced SUCCEEDED transaction, or nil when Put has already made the file visible
	// under a key that no other attempt writes. A file already under key with the same
	// size and sha256 is success: a retried upload whose first answer was lost.
	Put(ctx context.Context, key, src string, size int64, sum string) (publish func() error, err error)
	// Stat describes the published file under key, with its sha256, for completing an
	// orphan from it. A missing file, or one that is no file of ours, is an error
	// wrapping fs.ErrNotExist or a *RefusedFileError; a store that did not answer is one
	// wrapping ErrUnavailable.
	Stat(ctx context.Context, key string) (FileInfo, error)
	// Open returns the file under key for a download; the caller closes it. Errors are
	// those of Stat.
	Open(ctx context.Context, key string) (io.ReadSeekCloser, FileInfo, error)
	// Delete removes the file under key and returns its size; a missing one is 0, nil.
	Delete(ctx context.Context, key string) (int64, error)
	// Presign returns a URL that downloads the file under key without credentials for
	// ttl, saved as downloadName and served as contentType; ErrNoPresign when the store
	// has no such URLs (LocalFiles).
	Presign(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error)
}

// FileInfo describes a published file.
type FileInfo struct {
	// Key is the file's name in its store (Files.Key).
	Key string
	// Path names the file in log lines: the local path, or the key in a bucket.
	Path string
	// Size is in bytes.
	Size int64
	// SHA256 is the hex sha256 of the bytes; Open and List may leave it empty where
	// knowing it would mean reading the file.
	SHA256 string
	// Modified is when the file was written.
	Modified time.Time
	// JobID and Attempt are whose file it is, when its key says so (S3Files.List).
	JobID   string
	Attempt int
}

// RefusedFileError is a file that sits under a job's key but must not be served or
// trusted: a link, not a regular file, outside the data directory, or not the size or
// sha256 its job recorded.
type RefusedFileError struct {
	Path   string
	Reason string
}

func (e *RefusedFileError) Error() string { return e.Path + ": " + e.Reason }

// ErrNoPresign is Presign on a store that cannot hand out download URLs: the download is
// streamed instead.
var ErrNoPresign = errors.New("this file store has no presigned download URLs")

// ErrUnavailable wraps an error of a file store that did not answer (a network fault, a
// server error): it says nothing about the file, so the reaper neither completes the job
// nor runs it again, and asks again at its next pass.
var ErrUnavailable = errors.New("file store unavailable")

// objectPrefix is where S3Files keeps published files under the store's prefix.
const objectPrefix = "exports/"

// ObjectKey is the key under which attempt's file of job id is published in a bucket:
// exports/<id>/<attempt><ext>, ext being fileName's extension (the kind's FileNamer name,
// such as "<id>.xlsx"). Every attempt has a key of its own, so an attempt that lost its
// lease never overwrites the file of the attempt that took the job over, and no upload
// needs the job's fence. sheetq store copy uploads local files under the same keys.
func ObjectKey(id string, attempt int, fileName string) string {
	return objectPrefix + id + "/" + strconv.Itoa(attempt) + filepath.Ext(fileName)
}

// ParseObjectKey splits an ObjectKey; ok is false for a key of another shape.
func ParseObjectKey(key string) (id string, attempt int, ok bool) {
	rest, found := strings.CutPrefix(key, objectPrefix)
	if !found {
		return "", 0, false
	}
	id, name, found := strings.Cut(rest, "/")
	if !found || id == "" || strings.Contains(name, "/") {
		return "", 0, false
	}
	digits := strings.TrimSuffix(name, filepath.Ext(name))
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || strconv.Itoa(n) != digits {
		return "", 0, false
	}
	return id, n, true
}

// OpenFiles returns the file store a node publishes to: the local directory localDir
// (the data directory's exports/) for url "", or a bucket for
// s3://BUCKET/PREFIX?endpoint=URL&region=REGION, with the given keys, or
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY when both are empty. It sends no request: a
// wrong endpoint or key shows on the first operation (sheetq doctor checks them).
func OpenFiles(url, localDir, accessKey, secretKey string, log *slog.Logger) (Files, error) {
	if url == "" {
		return NewLocalFiles(localDir), nil
	}
	cfg, err := objstore.ParseURL(url)
	if err != nil {
		return nil, err
	}
	cfg.AccessKey, cfg.SecretKey = accessKey, secretKey
	st, err := objstore.New(withTestHooks(cfg))
	if err != nil {
		return nil, err
	}
	return NewS3Files(st, log), nil
}

// filesOr returns f, or the local directory dir when f is nil: the single-node default.
func filesOr(f Files, dir string) Files {
	if f != nil {
		return f
	}
	return NewLocalFiles(dir)
}

// notPublished reports whether err from Files.Stat says that no file of ours is under
// the key, as opposed to a store that did not answer.
func notPublished(err error) bool {
	return err != nil && !errors.Is(err, ErrUnavailable)
}
