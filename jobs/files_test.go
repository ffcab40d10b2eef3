package jobs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"sheetq/internal/objstore/objstoretest"
	"sheetq/jobs"
	"sheetq/store"
)

// Tests of the file store (jobs.Files): the engine, the reaper and the janitor over a
// real S3-compatible server (versitygw, .ci/s3), and what the local folder keeps doing.

// xlsxWriter is a kind that names its file <id>.xlsx (jobs.FileNamer), as exports do, and
// writes payload(id); calls counts its runs.
type xlsxWriter struct{ calls *atomic.Int64 }

func (k xlsxWriter) FileName(id string, _ json.RawMessage) string { return id + ".xlsx" }

func (k xlsxWriter) Run(ctx context.Context, run *jobs.Run) error {
	if k.calls != nil {
		k.calls.Add(1)
	}
	w, err := run.Output()
	if err != nil {
		return err
	}
	run.Progress(3, 3)
	_, err = w.Write(payload(run.JobID))
	return err
}

// s3Files returns a file store on a bucket of the test's own, under the prefix p/, and
// the bucket's settings.
func s3Files(t *testing.T, exportsDir string) (*jobs.S3Files, objstoretest.Env) {
	t.Helper()
	env := objstoretest.Bucket(t)
	f, err := jobs.OpenFiles(env.URL("p/"), exportsDir, env.AccessKey, env.SecretKey, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	s3, ok := f.(*jobs.S3Files)
	if !ok {
		t.Fatalf("OpenFiles(s3://...) = %T, want *jobs.S3Files", f)
	}
	return s3, env
}

// keys lists the bucket's published objects.
func keys(t *testing.T, f *jobs.S3Files) []string {
	t.Helper()
	list, err := f.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range list {
		out = append(out, o.Key)
	}
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// An export run onto a bucket is published under its attempt's own key, with the size
// and sha256 its job records, and nothing lands in the local exports folder.
func TestS3EnginePublishesUnderTheAttemptsKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	files, _ := s3Files(t, h.exports)
	cfg := h.config()
	cfg.Files = files
	e := h.start(t, cfg, map[string]jobs.Handler{"test": xlsxWriter{}})
	j := enqueue(t, e, "test", 3)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)

	want := payload(j.ID)
	if key := "exports/" + j.ID + "/1.xlsx"; done.FileName != key || done.FileName != jobs.ObjectKey(j.ID, 1, j.ID+".xlsx") {
		t.Fatalf("recorded file %q, want the attempt's key %q", done.FileName, key)
	}
	if done.FileSize != int64(len(want)) || done.FileSHA256 != sha(want) {
		t.Fatalf("recorded %d bytes, sha256 %s; want %d, %s", done.FileSize, done.FileSHA256, len(want), sha(want))
	}
	rc, fi, err := files.Open(context.Background(), done.FileName)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, want) || fi.SHA256 != done.FileSHA256 {
		t.Fatalf("object: %q (%v), sha256 %s; want %q", got, err, fi.SHA256, want)
	}
	if entries, _ := os.ReadDir(h.exports); len(entries) > 0 {
		t.Fatalf("the local exports folder has %d entries; want none", len(entries))
	}
	if parts := h.partFiles(t); len(parts) > 0 {
		t.Fatalf("part files left: %v", parts)
	}

	// Delete takes the object with the row.
	if _, err := e.Delete(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := files.Stat(context.Background(), done.FileName); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("object of the deleted job: %v; want it gone", err)
	}
}

// stealing is a file store that, once attempt 1's upload is done, lets "another node"
// take the job back before the attempt commits: the reaper's Recover, as after a lease
// that ran out during the upload.
type stealing struct {
	jobs.Files
	st     *store.Store
	stolen atomic.Bool
}

func (s *stealing) Put(ctx context.Context, key, src string, size int64, sum string) (func() error, error) {
	publish, err := s.Files.Put(ctx, key, src, size, sum)
	id, attempt, _ := jobs.ParseObjectKey(key)
	if err == nil && attempt == 1 && s.stolen.CompareAndSwap(false, true) {
		if _, rerr := s.st.Recover(ctx, id, attempt, "taken over by another node", 0); rerr != nil {
			return nil, rerr
		}
	}
	return publish, err
}

// An attempt that loses its lease between its upload and its commit leaves an object no
// job references; the job runs again under a key of its own, and the janitor removes the
// lost attempt's object, not the one the job recorded.
func TestS3LostLeaseLeavesAnObjectTheJanitorRemoves(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	files, _ := s3Files(t, h.exports)
	cfg := h.config()
	cfg.Files = &stealing{Files: files, st: h.st}
	var calls atomic.Int64
	e := h.start(t, cfg, map[string]jobs.Handler{"test": xlsxWriter{calls: &calls}})
	j := enqueue(t, e, "test", 3)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	lost, kept := jobs.ObjectKey(j.ID, 1, ".xlsx"), jobs.ObjectKey(j.ID, 2, ".xlsx")
	if done.Attempt != 2 || done.FileName != kept || calls.Load() != 2 {
		t.Fatalf("job ended in attempt %d with %q after %d runs; want attempt 2 with %q", done.Attempt, done.FileName, calls.Load(), kept)
	}
	if got := keys(t, files); !slices.Equal(got, []string{lost, kept}) {
		t.Fatalf("bucket holds %v; want the lost attempt's object beside the job's", got)
	}

	// Too fresh for the default age: the bucket's clock and a store copy get a margin.
	jan := jobs.NewJanitor(h.st, jobs.JanitorConfig{Files: files, Logger: testLogger()})
	if res, err := jan.Sweep(context.Background()); err != nil || res.Orphans != 0 {
		t.Fatalf("sweep of fresh objects = %+v, %v; want nothing removed", res, err)
	}
	jan = jobs.NewJanitor(h.st, jobs.JanitorConfig{Files: files, Logger: testLogger(),
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	res, err := jan.Sweep(context.Background())
	if err != nil || res.Orphans != 1 || res.BytesFreed != int64(len(payload(j.ID))) {
		t.Fatalf("sweep = %+v, %v; want the lost attempt's object removed", res, err)
	}
	if got := keys(t, files); !slices.Equal(got, []string{kept}) {
		t.Fatalf("bucket holds %v after the sweep; want only %s", got, kept)
	}
}

// The janitor's rule, case by case: an object is kept while its attempt still runs or
// its job records it, and removed once nothing can make it a job's file; what is not an
// attempt's key is never touched.
func TestS3JanitorKeepsWhatAJobMayStillUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	files, _ := s3Files(t, h.exports)
	put := func(key string) {
		t.Helper()
		src := filepath.Join(t.TempDir(), "part")
		b := []byte("bytes of " + key)
		if err := os.WriteFile(src, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := files.Put(ctx, key, src, int64(len(b)), sha(b)); err != nil {
			t.Fatal(err)
		}
	}
	running := enqueueStore(t, h.st, "test", store.NewJob{})
	if claimed, err := h.st.ClaimBatch(ctx, "w", store.DefaultQueue, 1); err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	runningKey := jobs.ObjectKey(running.ID, 1, ".xlsx")
	goneKey := jobs.ObjectKey(jobs.NewID(), 1, ".xlsx")
	foreign := "exports/notes.txt"
	for _, k := range []string{runningKey, goneKey, foreign} {
		put(k)
	}
	sweep := func() jobs.SweepResult {
		t.Helper()
		jan := jobs.NewJanitor(h.st, jobs.JanitorConfig{Files: files, Logger: testLogger(), OrphanAge: time.Nanosecond})
		res, err := jan.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := sweep(); res.Orphans != 1 {
		t.Fatalf("sweep = %+v; want one orphan (the job that is gone)", res)
	}
	if got := keys(t, files); !slices.Equal(got, slices.Sorted(slices.Values([]string{runningKey, foreign}))) {
		t.Fatalf("after the sweep: %v; want the running attempt's object and the foreign one", got)
	}
	// The attempt is taken back: its object can never become the job's file.
	if _, err := h.st.Recover(ctx, running.ID, 1, "test", 0); err != nil {
		t.Fatal(err)
	}
	if res := sweep(); res.Orphans != 1 {
		t.Fatalf("sweep after the recovery = %+v; want the attempt's object removed", res)
	}
	if got := keys(t, files); !slices.Equal(got, []string{foreign}) {
		t.Fatalf("after the second sweep: %v; want only %s", got, foreign)
	}
}

// failingSucceed is a store that takes everything but a success: the crash between an
// upload and its commit, without killing the test process.
type failingSucceed struct{ jobs.Store }

func (f failingSucceed) FinishBatch(ctx context.Context, ends []store.Finish) []store.Finished {
	out := make([]store.Finished, len(ends))
	for i, end := range ends {
		if end.Outcome == store.Succeeded {
			out[i] = store.Finished{Err: errors.New("database is locked")}
			continue
		}
		out[i] = f.Store.FinishBatch(ctx, ends[i:i+1])[0]
	}
	return out
}

// A node that dies after its upload and before its commit leaves a PROCESSING job whose
// object is in the bucket: the next start completes the job from the object (rule 5),
// with the object's size and sha256, and does not run it again.
func TestS3OrphanCompletedFromItsObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	files, _ := s3Files(t, h.exports)
	var calls atomic.Int64
	kind := map[string]jobs.Handler{"test": xlsxWriter{calls: &calls}}

	h.st2 = failingSucceed{h.st}
	cfg := h.config()
	cfg.Files = files
	first := h.start(t, cfg, kind)
	j := enqueue(t, first, "test", 3)
	key := jobs.ObjectKey(j.ID, 1, ".xlsx")
	waitFor(t, "the upload", func() bool { _, err := files.Stat(ctx, key); return err == nil })
	first.Stop() // the commit never went through: the job stays PROCESSING
	if got, _ := h.st.Get(ctx, j.ID); got.Status != store.StatusProcessing {
		t.Fatalf("after the failed commit the job is %s; want PROCESSING", got.Status)
	}

	h.st2 = nil
	h.start(t, cfg, kind)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	want := payload(j.ID)
	if calls.Load() != 1 || done.Attempt != 1 || done.FileName != key || done.FileSize != int64(len(want)) || done.FileSHA256 != sha(want) {
		t.Fatalf("after %d runs: attempt %d, file %q (%d bytes, %s); want one run and attempt 1's object",
			calls.Load(), done.Attempt, done.FileName, done.FileSize, done.FileSHA256)
	}
	if types := eventTypes(h.events(t, j.ID)); !slices.Contains(types, store.EventCompletedFromFile) {
		t.Fatalf("events %v lack %q", types, store.EventCompletedFromFile)
	}
}

// A multipart upload cut short (a node killed mid-upload) is aborted by the janitor once
// it is old enough, and only then.
func TestS3JanitorAbortsStaleUploads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	files, env := s3Files(t, h.exports)
	core := minio.Core{Client: env.Client(t)}
	if _, err := core.NewMultipartUpload(ctx, env.Bucket, "p/"+jobs.ObjectKey("j1", 1, ".xlsx"), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	uploads := func() int {
		n := 0
		for up := range env.Client(t).ListIncompleteUploads(ctx, env.Bucket, "", true) {
			if up.Err != nil {
				t.Fatal(up.Err)
			}
			n++
		}
		return n
	}
	jan := jobs.NewJanitor(h.st, jobs.JanitorConfig{Files: files, Logger: testLogger()})
	if res, err := jan.Sweep(ctx); err != nil || res.Aborted != 0 || uploads() != 1 {
		t.Fatalf("sweep of a fresh upload = %+v, %v; want it left alone", res, err)
	}
	jan = jobs.NewJanitor(h.st, jobs.JanitorConfig{Files: files, Logger: testLogger(), UploadAge: time.Nanosecond})
	if res, err := jan.Sweep(ctx); err != nil || res.Aborted != 1 || uploads() != 0 {
		t.Fatalf("sweep of a stale upload = %+v, %v, %d left; want it aborted", res, err, uploads())
	}
}

// holdingFiles is a local file store whose Put returns only once the job's heartbeat has
// been stamped again: an upload that takes a while.
type holdingFiles struct {
	jobs.Files
	st *store.Store
	id atomic.Value // the job id to watch
}

func (f *holdingFiles) Put(ctx context.Context, key, src string, size int64, sum string) (func() error, error) {
	id := f.id.Load().(string)
	before, err := f.st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		j, err := f.st.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if j.HeartbeatAt.After(before.HeartbeatAt) {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no heartbeat while publishing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return f.Files.Put(ctx, key, src, size, sum)
}

// While an attempt publishes, the engine keeps its lease: an upload longer than the
// stale age must not let a reaper take the job back and run it again.
func TestPublishKeepsTheLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	files := &holdingFiles{Files: jobs.NewLocalFiles(h.exports), st: h.st}
	id := jobs.NewID()
	files.id.Store(id)
	cfg := h.config()
	cfg.Files = files
	// The reaper renews a late lease of its own process (reap): far away, so that only
	// the publishing attempt's own stamps can move the heartbeat.
	cfg.StaleAfter = time.Hour
	e := h.start(t, cfg, map[string]jobs.Handler{"test": xlsxWriter{}})
	if _, _, err := e.Enqueue(context.Background(), store.NewJob{ID: id, Kind: "test", Args: []byte(`{}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	done := h.waitStatus(t, id, store.StatusSucceeded)
	if got, err := os.ReadFile(jobs.FilePath(h.exports, done.FileName)); err != nil || !bytes.Equal(got, payload(id)) {
		t.Fatalf("published file: %q, %v", got, err)
	}
}

func TestObjectKey(t *testing.T) {
	for _, tc := range []struct {
		id       string
		attempt  int
		fileName string
		key      string
	}{
		{"abc", 1, "abc.xlsx", "exports/abc/1.xlsx"},
		{"abc", 12, "abc.csv", "exports/abc/12.csv"},
		{"abc", 2, "abc", "exports/abc/2"},
	} {
		key := jobs.ObjectKey(tc.id, tc.attempt, tc.fileName)
		if key != tc.key {
			t.Errorf("ObjectKey(%q, %d, %q) = %q, want %q", tc.id, tc.attempt, tc.fileName, key, tc.key)
		}
		if id, n, ok := jobs.ParseObjectKey(key); !ok || id != tc.id || n != tc.attempt {
			t.Errorf("ParseObjectKey(%q) = %q, %d, %v", key, id, n, ok)
		}
	}
	for _, bad := range []string{"exports/notes.txt", "exports/abc/x.xlsx", "exports/abc/0.xlsx", "exports/abc/01.xlsx",
		"exports//1.xlsx", "exports/a/b/1.xlsx", "other/abc/1.xlsx", "abc.xlsx"} {
		if id, n, ok := jobs.ParseObjectKey(bad); ok {
			t.Errorf("ParseObjectKey(%q) = %q, %d; want not a key", bad, id, n)
		}
	}
}

// OpenFiles: "" is the local folder, keeping today's names; s3:// a bucket; another
// scheme, or a misspelt parameter, is refused before anything runs.
func TestOpenFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exports")
	f, err := jobs.OpenFiles("", dir, "", "", testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*jobs.LocalFiles); !ok || f.Key("abc", 3, "abc.xlsx") != "abc.xlsx" {
		t.Fatalf("OpenFiles(\"\") = %T naming %q; want the local folder naming abc.xlsx", f, f.Key("abc", 3, "abc.xlsx"))
	}
	if _, err := f.Presign(context.Background(), "abc.xlsx", time.Minute, "a.xlsx", ""); !errors.Is(err, jobs.ErrNoPresign) {
		t.Fatalf("local Presign: %v; want ErrNoPresign", err)
	}
	f, err = jobs.OpenFiles("s3://bucket/pre?endpoint=http://127.0.0.1:1&region=r", dir, "k", "s", testLogger())
	if _, ok := f.(*jobs.S3Files); err != nil || !ok {
		t.Fatalf("OpenFiles(s3://...) = %T, %v", f, err)
	}
	for _, bad := range []string{"file:///tmp/x", "s3://bucket/p?endpont=http://x", "s3://user:pw@bucket/p"} {
		if _, err := jobs.OpenFiles(bad, dir, "k", "s", testLogger()); err == nil {
			t.Errorf("OpenFiles(%q) accepted", bad)
		}
	}
}
