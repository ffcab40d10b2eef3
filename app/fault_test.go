package app

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// Fault tests: each puts the running app in a bad situation and checks the outcome it
// promises. The crash matrix (root package) covers process death.

// A database held busy by another connection for longer than busy_timeout: writes answer
// 503 problem+json with Retry-After (not 500, not a hang), reads keep working, nothing
// is created or lost, and once the lock is released the same request goes through.
func TestBusyDatabaseAnswers503WithRetryAfter(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{BusyTimeout: 100 * time.Millisecond, Log: &logs})
	before := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	ts.WaitStatus(before.ID, store.StatusSucceeded)

	// Another process's connection (sheetq backup, a sqlite3 shell) takes the write lock.
	// It waits for the server's own short writes (the engine finishing the job above)
	// to end before it holds the lock.
	release := storetest.HoldWriteLock(t, ts.dir.DB())

	// The engine's claims (it polls) find the lock too: one WARN line says they wait,
	// not an ERROR per poll.
	apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "claims wait"), "no log line about claims waiting"
	})
	n := ts.jobCount()
	body := `{"report":"demo","params":{"rows":20}}`
	res := ts.Post(body, "busy-1")
	apptest.CheckProblem(t, res, http.StatusServiceUnavailable, "store_busy")
	if ra := res.Header.Get("Retry-After"); ra == "" {
		t.Errorf("503 without Retry-After")
	}
	if res := ts.Request(http.MethodPost, "/api/v1/exports/"+before.ID+"/retry", nil, nil); res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("retry while busy: %d %s", res.StatusCode, res.Body)
	}
	// Reads go through WAL beside the lock.
	if res := ts.Get("/api/v1/exports/" + before.ID); res.StatusCode != http.StatusOK {
		t.Errorf("GET while busy: %d %s", res.StatusCode, res.Body)
	}
	if got := ts.jobCount(); got != n {
		t.Errorf("a refused request created a job: %d jobs, want %d", got, n)
	}

	release()
	res = ts.Post(body, "busy-1")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("after the lock is released: %d %s", res.StatusCode, res.Body)
	}
	j := apptest.DecodeJob(t, res)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	if got := ts.jobCount(); got != n+1 {
		t.Errorf("%d jobs after the retry, want %d", got, n+1)
	}
	if err := ts.store.Driver().(*sqlite.Store).Check(context.Background()); err != nil {
		t.Error(err)
	}
	if l := logs.String(); strings.Count(l, "claims wait") != 1 || strings.Contains(l, "claim failed") {
		t.Errorf("want one line about claims waiting and no \"claim failed\":\n%s", l)
	}
}

// A source that stops sending rows (an upstream that hangs but honours cancellation):
// the stall guard fails the attempt with a clear "stalled" error, the attempt is
// retried, and the worker is freed for other jobs meanwhile.
func TestHangingSourceIsStoppedByStallGuard(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{StallAfter: 300 * time.Millisecond, MaxAttempts: 2})
	// Two rows spread over an hour: the first is due after half an hour.
	hung := ts.Create(`{"report":"demo","params":{"rows":2,"seconds":3600}}`)
	j, _ := ts.WaitStatus(hung.ID, store.StatusFailed)
	if j.Error == nil || j.Error.Code != "stalled" || !strings.Contains(j.Error.Message, "no progress") {
		t.Fatalf("error = %+v, want code stalled, a message saying no progress", j.Error)
	}
	if j.Attempt != 2 {
		t.Errorf("attempt = %d, want 2: the stalled attempt is retried", j.Attempt)
	}
	ev, err := ts.store.Events(context.Background(), hung.ID)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, e := range ev {
		if e.Type == store.EventAttemptFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d attempt_failed events, want 1", failed)
	}
	// Both workers are free again: two jobs run and succeed.
	a := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	b := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	ts.WaitStatus(a.ID, store.StatusSucceeded)
	ts.WaitStatus(b.ID, store.StatusSucceeded)
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		n := ts.engine.Running()
		return n == 0, fmt.Sprintf("%d executions still running", n)
	})
	if left, _ := os.ReadDir(ts.dir.Tmp()); len(left) > 0 {
		t.Errorf("tmp/ not empty: %v", left)
	}
}

// openFDs counts this process's open file descriptors on path.
func openFDs(t *testing.T, path string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// A client that hangs up in the middle of a download: the server closes the file (no
// handle leak), the file is intact, later downloads work, and the export can still be
// deleted.
func TestDownloadDisconnectLeavesServerFine(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("counts file handles through /proc")
	}
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":20000}}`)
	done := waitSlow(ts, j.ID, store.StatusSucceeded)
	path := filepath.Join(ts.dir.Exports(), j.ID+".xlsx")
	if done.File == nil || done.File.Size < 256<<10 {
		t.Fatalf("file %+v: want one big enough not to fit in socket buffers", done.File)
	}

	for range 3 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /api/v1/exports/%s/file HTTP/1.1\r\nHost: %s\r\n\r\n", j.ID, strings.TrimPrefix(ts.URL, "http://"))
		br := bufio.NewReader(conn)
		status, err := br.ReadString('\n')
		if err != nil || !strings.Contains(status, "200") {
			t.Fatalf("status line %q, %v", status, err)
		}
		if _, err := io.CopyN(io.Discard, br, 32<<10); err != nil {
			t.Fatal(err)
		}
		conn.Close() // mid-body
	}
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		n := openFDs(t, path)
		return n == 0, fmt.Sprintf("%d handles still open on the file", n)
	})

	res := ts.Get("/api/v1/exports/" + j.ID + "/file")
	sum := sha256.Sum256(res.Body)
	if res.StatusCode != http.StatusOK || int64(len(res.Body)) != done.File.Size || hex.EncodeToString(sum[:]) != done.File.SHA256 {
		t.Fatalf("download after the hang-ups: %d, %d bytes, sha256 %x; want 200, %d bytes, %s",
			res.StatusCode, len(res.Body), sum, done.File.Size, done.File.SHA256)
	}
	if res := ts.Request(http.MethodDelete, "/api/v1/exports/"+j.ID, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.StatusCode, res.Body)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file still there after delete: %v", err)
	}
}

// A full disk under the files (tmp/ and exports/ on a 2 MiB tmpfs; the database stays
// on its own disk, see RELIABILITY.md): the export fails cleanly with an error that says
// so, after its retries; no part, spill or half-written file is left; the database is
// intact; the server keeps answering and small exports still succeed; once space is
// back, a retry of the failed export succeeds.
func TestDiskFullFailsCleanly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := filepath.Join(root, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	storetest.MountTmpfs(t, files, 2<<20)
	// Leave 128 KiB free: less than the export needs, more than a small one does.
	filler := filepath.Join(files, "filler")
	if err := os.WriteFile(filler, make([]byte, 2<<20-128<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	// tmp/ and exports/ share the one file system, so publishing stays a rename.
	for _, d := range []string{"tmp", "exports"} {
		if err := os.Mkdir(filepath.Join(files, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(files, d), filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	ts := newTestServer(t, testOpts{DataDir: root, MaxAttempts: 2})

	big := ts.Create(`{"report":"demo","params":{"rows":20000}}`)
	j := waitSlow(ts, big.ID, store.StatusFailed)
	if j.Error == nil || j.Error.Code != "disk_full" || !strings.Contains(j.Error.Message, "no space left on device") {
		t.Fatalf("error = %+v, want code disk_full and a message saying the disk is full", j.Error)
	}
	if j.Attempt != 2 {
		t.Errorf("attempt = %d, want 2: a full disk is worth a retry", j.Attempt)
	}
	t.Logf("disk full: code %q, message %q", j.Error.Code, j.Error.Message)
	for _, d := range []string{ts.dir.Tmp(), ts.dir.Exports()} {
		if left, _ := os.ReadDir(d); len(left) > 0 && !(len(left) == 1 && left[0].Name() == "filler") {
			t.Errorf("%s not empty after the failure: %v", d, left)
		}
	}
	if err := ts.store.Driver().(*sqlite.Store).Check(context.Background()); err != nil {
		t.Error(err)
	}

	// The server keeps answering, and what fits still works.
	if res := ts.Get("/healthz"); res.StatusCode != http.StatusOK {
		t.Errorf("healthz: %d %s", res.StatusCode, res.Body)
	}
	small := ts.Create(`{"report":"demo","params":{"rows":100}}`)
	ts.WaitStatus(small.ID, store.StatusSucceeded)

	// Space is freed, then the user retries.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if res := ts.Request(http.MethodPost, "/api/v1/exports/"+big.ID+"/retry", nil, nil); res.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %d %s", res.StatusCode, res.Body)
	}
	done := waitSlow(ts, big.ID, store.StatusSucceeded)
	b, err := os.ReadFile(filepath.Join(ts.dir.Exports(), big.ID+".xlsx"))
	sum := sha256.Sum256(b)
	if err != nil || hex.EncodeToString(sum[:]) != done.File.SHA256 {
		t.Fatalf("file after the retry: %v, sha256 %x, want %s", err, sum, done.File.SHA256)
	}
}

// waitSlow waits for a job's status like waitStatus, with room for a big export on a
// slow -race machine.
func waitSlow(ts *testServer, id string, want store.Status) apiv1.Job {
	ts.t.Helper()
	var j apiv1.Job
	apptest.WaitFor(ts.t, 2*time.Minute, func() (bool, string) {
		j, _ = ts.Job(id)
		return store.Status(j.Status) == want, fmt.Sprintf("job %s is %s (attempt %d, error %+v), want %s", id, j.Status, j.Attempt, j.Error, want)
	})
	return j
}

// A client that hangs up while its export waits for the group commit (a timeout under
// overload) is not a server error: its job is dropped before any write, the log says so
// at INFO, and the status is 499, not a 500 with an ERROR line.
func TestClientGoneDuringEnqueue(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{BusyTimeout: 30 * time.Second, Idle: true, Log: &logs})
	n := ts.jobCount()

	// Another connection holds the write lock, so the first request's commit waits for it
	// and the next request queues behind that commit.
	release := storetest.HoldWriteLock(t, ts.dir.DB())

	body := `{"report":"demo","params":{"rows":10}}`
	first := make(chan apptest.Response, 1)
	go func() { first <- ts.Post(body, "gone-1") }()
	apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
		return ts.store.BatchStats().Commits > 0, "the first request's commit has not started"
	})

	ctx, hangUp := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/exports", strings.NewReader(body))
	req.Host = strings.TrimPrefix(ts.URL, "http://")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "gone-2")
	rec := httptest.NewRecorder()
	served := make(chan struct{})
	go func() {
		defer close(served)
		ts.Handler().ServeHTTP(rec, req)
	}()
	apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
		return ts.store.BatchStats().Waiting == 1, "the second request is not queued"
	})
	hangUp()
	<-served
	if rec.Code != problem.StatusClientClosed {
		t.Errorf("abandoned request: status %d, want %d (%s)", rec.Code, problem.StatusClientClosed, rec.Body)
	}

	release()
	if res := <-first; res.StatusCode != http.StatusAccepted {
		t.Fatalf("the request that stayed: %d %s", res.StatusCode, res.Body)
	}
	if got := ts.jobCount(); got != n+1 {
		t.Errorf("%d jobs after one kept and one abandoned request, want %d", got, n+1)
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") || !strings.Contains(l, "client closed the request") {
		t.Errorf("log should say the client closed the request, without an ERROR line:\n%s", l)
	}
}
