package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"sheetq/internal/objstore"
)

// S3Files keeps published files in a prefix of an S3-compatible bucket that several nodes
// share (internal/objstore), each attempt under a key of its own (ObjectKey). An attempt
// uploads with If-None-Match: * before the short fenced SUCCEEDED transaction, which only
// records the key: an attempt that lost its lease leaves an object no job references,
// which the janitor removes (Janitor.Sweep), and never one that replaces another's.
type S3Files struct {
	st  *objstore.Store
	log *slog.Logger
}

var _ Files = (*S3Files)(nil)

// NewS3Files returns the file store of st.
func NewS3Files(st *objstore.Store, log *slog.Logger) *S3Files {
	return &S3Files{st: st, log: cmp.Or(log, slog.Default())}
}

// withTestHooks gives a bucket's uploads what a crash test asks of them (faultpoints
// builds only; it changes nothing otherwise): the part size SHEETQ_TEST_S3_PART_SIZE, and
// the fault point mid-upload once the first part of a multipart upload is stored and
// before the upload completes, where a SIGKILL leaves an incomplete upload on the server
// for the janitor (AbortStaleUploads). The point is reached once per upload, not per
// part, so that mid-upload@N means the Nth multipart upload.
func withTestHooks(cfg objstore.Config) objstore.Config {
	if testPartSize != 0 {
		cfg.PartSize = testPartSize
	}
	if faultsArmed {
		cfg.AfterPart = func(n int) {
			if n == 1 {
				faultPoint("mid-upload")
			}
		}
	}
	return cfg
}

// Key is ObjectKey: one key per attempt.
func (s *S3Files) Key(id string, attempt int, fileName string) string {
	return ObjectKey(id, attempt, fileName)
}

// Put uploads the part file. An object already under the key with the same size and
// sha256 is this attempt's own upload whose answer was lost (the client retries a failed
// request, and the retry meets If-None-Match), so it is success.
func (s *S3Files) Put(ctx context.Context, key, src string, size int64, sum string) (func() error, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	err = s.st.PutIfAbsent(ctx, key, f, size, sum)
	if errors.Is(err, objstore.ErrExists) {
		info, serr := s.st.Stat(ctx, key)
		if serr == nil && info.Size == size && info.SHA256 == sum {
			s.log.InfoContext(ctx, "file already uploaded under its key", "key", key, "size", size)
			return nil, nil
		}
		return nil, fmt.Errorf("upload: %s holds another file (%d bytes, sha256 %q): %w", key, info.Size, info.SHA256, errors.Join(err, serr))
	}
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	return nil, nil
}

// Stat reads the object's size and the sha256 recorded with it, without its bytes. An
// object without one was not written by PutIfAbsent: no file of ours.
func (s *S3Files) Stat(ctx context.Context, key string) (FileInfo, error) {
	info, err := s.st.Stat(ctx, key)
	if err != nil {
		return FileInfo{}, s.mapErr(err)
	}
	if info.SHA256 == "" {
		return FileInfo{}, &RefusedFileError{Path: key, Reason: "the object has no recorded sha256"}
	}
	return fileInfo(info), nil
}

// Open streams the object; its reader seeks, so a Range request is served from the
// bucket without fetching what comes before it.
func (s *S3Files) Open(ctx context.Context, key string) (io.ReadSeekCloser, FileInfo, error) {
	rc, info, err := s.st.Open(ctx, key)
	if err != nil {
		return nil, FileInfo{}, s.mapErr(err)
	}
	return rc, fileInfo(info), nil
}

// Delete removes the object and returns the size it had (one more request, for the
// janitor's count of bytes freed).
func (s *S3Files) Delete(ctx context.Context, key string) (int64, error) {
	info, err := s.st.Stat(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, s.mapErr(err)
	}
	if err := s.st.Delete(ctx, key); err != nil {
		return 0, s.mapErr(err)
	}
	return info.Size, nil
}

// Presign signs a GET of the object that answers with Content-Disposition: attachment
// and downloadName, and contentType.
func (s *S3Files) Presign(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error) {
	return s.st.PresignGet(ctx, key, ttl, downloadName, contentType)
}

// List returns every published object, with the job and attempt its key names (JobID is
// empty for an object under exports/ whose key is not an ObjectKey), for the janitor's
// sweep of objects no job references.
func (s *S3Files) List(ctx context.Context) ([]FileInfo, error) {
	objs, err := s.st.List(ctx, objectPrefix)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out := make([]FileInfo, len(objs))
	for i, o := range objs {
		out[i] = fileInfo(o)
		out[i].JobID, out[i].Attempt, _ = ParseObjectKey(o.Key)
	}
	return out, nil
}

// AbortStaleUploads aborts multipart uploads started more than olderThan ago: a node
// killed mid-upload leaves parts that no listing shows and that are billed as storage.
func (s *S3Files) AbortStaleUploads(ctx context.Context, olderThan time.Duration) (int, error) {
	n, err := s.st.AbortStaleUploads(ctx, olderThan)
	if err != nil {
		return n, s.mapErr(err)
	}
	return n, nil
}

// mapErr makes a missing object fs.ErrNotExist and anything else ErrUnavailable: an error
// of the bucket says nothing about whether the file is there.
func (s *S3Files) mapErr(err error) error {
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w (%w)", fs.ErrNotExist, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func fileInfo(i objstore.Info) FileInfo {
	return FileInfo{Key: i.Key, Path: i.Key, Size: i.Size, SHA256: i.SHA256, Modified: i.Modified}
}
