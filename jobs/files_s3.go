package jobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"sheetq/internal/objstore"
)

// S3Files keeps published files in a prefix of an S3-compatible bucket that several nodes
// share (internal/objstore), each attempt under a key of its own (ObjectKey). An attempt
// uploads with If-None-Match: * before the short fenced SUCCEEDED transaction, which only
// records the key: an attempt that lost its lease leaves an object no job references,
// which the janitor removes (Janitor.Sweep), and never one that replaces another's.
//
// An upload that fails for a reason that passes (objstore.Transient: the server down, a
// reset, a 5xx) is tried again inside the attempt, for up to uploadRetryBudget, rather
// than failing the attempt: an outage of seconds must not spend the export's attempts
// and run it again from its source. The retries run under the attempt's context, which
// the engine cancels when the lease is lost, so no upload outlives its lease.
type S3Files struct {
	st  *objstore.Store
	log *slog.Logger
	// now and sleep are the clock of the upload retries (time.Now, and a wait that
	// ends early with its context).
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	// probeKey is where CheckWritable writes: beside exports/, so that no job's file and
	// no listing of published files meets it, and one key per process, so that nodes
	// probing at once do not delete each other's probe.
	probeKey string

	probeMu  sync.Mutex // one probe at a time; callers meanwhile wait for its answer
	probeAt  time.Time  // when the last probe ended; zero: none yet
	probeErr error      // its result
}

var _ Files = (*S3Files)(nil)

// NewS3Files returns the file store of st.
func NewS3Files(st *objstore.Store, log *slog.Logger) *S3Files {
	return &S3Files{st: st, log: cmp.Or(log, slog.Default()), now: time.Now, sleep: sleepCtx,
		probeKey: "probe/" + strings.ToLower(rand.Text())}
}

// Bounds of the retries of a failed upload (S3Files.Put): the first wait, the longest
// one, and the total after which the attempt fails after all. Two minutes ride out a
// server's restart or a short network outage; a longer one is for the attempts, whose
// backoff is minutes.
const (
	uploadRetryFirst  = 250 * time.Millisecond
	uploadRetryMax    = 10 * time.Second
	uploadRetryBudget = 2 * time.Minute
)

// sleepCtx waits d, or less when ctx ends first (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeTTL is how long CheckWritable's answer is kept: /readyz stays one cheap read
// however often a balancer asks, and an outage shows within seconds.
const probeTTL = 2 * time.Second

// probeTimeout bounds one probe: the client retries a refused connection for longer,
// and /readyz must answer in time for its caller.
const probeTimeout = 3 * time.Second

// CheckWritable reports whether the bucket takes writes now: a small object written and
// deleted under the prefix (objstore.Probe), at most once per probeTTL. A missing bucket
// wraps objstore.ErrNoBucket. The node's start and GET /readyz ask it.
func (s *S3Files) CheckWritable(ctx context.Context) error {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if !s.probeAt.IsZero() && s.now().Sub(s.probeAt) < probeTTL {
		return s.probeErr
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := s.st.Probe(pctx, s.probeKey)
	if err != nil && ctx.Err() != nil {
		return err // the caller gave up: no answer about the bucket to keep
	}
	// One line per change, not one per probe.
	switch wasOK := s.probeAt.IsZero() || s.probeErr == nil; {
	case err != nil && wasOK:
		s.log.WarnContext(ctx, "the file store does not take writes: not ready", "bucket", s.st.Bucket(), "err", err)
	case err == nil && !wasOK:
		s.log.InfoContext(ctx, "the file store takes writes again", "bucket", s.st.Bucket())
	}
	s.probeAt, s.probeErr = s.now(), err
	return err
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
// sha256 is this attempt's own upload whose answer was lost (a request retried by the
// client or by Put meets If-None-Match), so it is success.
//
// An upload that fails for a reason that passes (objstore.Transient) is tried again,
// waiting uploadRetryFirst, then twice as long each time up to uploadRetryMax, until it
// succeeds, fails otherwise, uploadRetryBudget has passed since the first failure, or
// ctx ends: the attempt is cancelled, or its lease lost (Engine.put), and nothing more
// is sent.
func (s *S3Files) Put(ctx context.Context, key, src string, size int64, sum string) (func() error, error) {
	var first time.Time
	wait := uploadRetryFirst
	for try := 1; ; try++ {
		err := s.put(ctx, key, src, size, sum)
		if err == nil {
			if try > 1 {
				s.log.InfoContext(ctx, "upload succeeded after the bucket failed", "key", key, "tries", try,
					"took", s.now().Sub(first).Round(time.Millisecond))
			}
			return nil, nil
		}
		if ctx.Err() != nil || !objstore.Transient(err) {
			return nil, fmt.Errorf("upload: %w", err)
		}
		if try == 1 {
			first = s.now()
		}
		if s.now().Add(wait).Sub(first) > uploadRetryBudget {
			return nil, fmt.Errorf("upload: the bucket failed for %s, %d tries: %w", s.now().Sub(first).Round(time.Second), try, err)
		}
		s.log.WarnContext(ctx, "upload failed; trying again", "key", key, "try", try, "retry_in", wait, "err", err)
		if serr := s.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
		wait = min(2*wait, uploadRetryMax)
	}
}

// put is one try of Put: the file from its first byte.
func (s *S3Files) put(ctx context.Context, key, src string, size int64, sum string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	err = s.st.PutIfAbsent(ctx, key, f, size, sum)
	if errors.Is(err, objstore.ErrExists) {
		info, serr := s.st.Stat(ctx, key)
		if serr == nil && info.Size == size && info.SHA256 == sum {
			s.log.InfoContext(ctx, "file already uploaded under its key", "key", key, "size", size)
			return nil
		}
		if serr != nil && objstore.Transient(serr) {
			return serr // whose file it is stays unknown until the bucket answers
		}
		return fmt.Errorf("%s holds another file (%d bytes, sha256 %q): %w", key, info.Size, info.SHA256, errors.Join(err, serr))
	}
	return err
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

// Pieces is the bucket as the place where a job keeps files between its attempts, for
// an attempt on another node (an export's checkpointed rows: ARCHITECTURE.md,
// "Checkpoints and resume"), under resume/.
// Pieces go up in single PUTs: they are an interval's rows, and no multipart upload of
// theirs is left for the janitor or mistaken for a file's (nor reaches the mid-upload
// fault point of the crash tests, which is the files').
func (s *S3Files) Pieces() *BucketPieces { return &BucketPieces{st: s.st.Single()} }

// BucketPieces keeps immutable pieces of files under resume/ in a bucket.
type BucketPieces struct{ st *objstore.Store }

// resumePrefix is where pieces live in the bucket, beside objectPrefix.
const resumePrefix = "resume/"

// Put uploads size bytes of r under resume/key, written once: a piece already there
// with the same bytes is the same attempt's upload whose answer was lost.
func (b *BucketPieces) Put(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	err := b.st.PutIfAbsent(ctx, resumePrefix+key, r, size, sum)
	if errors.Is(err, objstore.ErrExists) {
		if info, serr := b.st.Stat(ctx, resumePrefix+key); serr == nil && info.Size == size && info.SHA256 == sum {
			return nil
		}
	}
	return err
}

// Get opens the piece under resume/key.
func (b *BucketPieces) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, _, err := b.st.Open(ctx, resumePrefix+key)
	return rc, err
}

// List returns the keys under resume/prefix, without resume/.
func (b *BucketPieces) List(ctx context.Context, prefix string) ([]string, error) {
	objs, err := b.st.List(ctx, resumePrefix+prefix)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = strings.TrimPrefix(o.Key, resumePrefix)
	}
	return out, nil
}

// Delete removes the piece under resume/key; a missing one is fine.
func (b *BucketPieces) Delete(ctx context.Context, key string) error {
	err := b.st.Delete(ctx, resumePrefix+key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	return err
}
