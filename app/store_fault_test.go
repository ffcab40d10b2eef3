package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// The whole data directory on a disk that fills up (a real ENOSPC, so a real
// SQLITE_FULL): every write endpoint answers 507 problem+json disk_full (the pages a
// page that says so), never 500; /readyz answers 503 disk_full while /healthz stays 200;
// nothing is half-written; and once space is freed, readiness and writes come back
// without a restart.
func TestDiskFullAnswers507(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	storetest.MountTmpfs(t, root, 16<<20)
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{DataDir: root, Idle: true, Log: &logs})
	c := newContract(t, ts)
	pending := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	canceled := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	if res := ts.Request(http.MethodPost, "/api/v1/exports/"+canceled.ID+"/cancel", nil, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", res.StatusCode, res.Body)
	}
	if res := ts.Get("/readyz"); res.StatusCode != http.StatusOK {
		t.Fatalf("readyz before the disk fills: %d %s", res.StatusCode, res.Body)
	}

	freeSpace := storetest.FillDisk(t, root)
	jobs := ts.jobCount()
	// The WAL may hold room for a commit or two; the first write that needs more fails.
	body := `{"report":"demo","params":{"rows":10}}`
	var res apptest.Response
	for i := 0; i < 200; i++ {
		if res = ts.Post(body, ""); res.StatusCode != http.StatusAccepted {
			break
		}
		jobs++
	}
	apptest.CheckProblem(t, res, http.StatusInsufficientStorage, "disk_full")
	if res.Header.Get("Retry-After") == "" {
		t.Error("507 without Retry-After")
	}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader, body: []byte(body), status: 507, code: "disk_full"})
	c.do(exchange{op: "POST /api/v1/exports/{id}/cancel", vars: map[string]string{"id": pending.ID}, status: 507, code: "disk_full"})
	c.do(exchange{op: "POST /api/v1/exports/{id}/retry", vars: map[string]string{"id": canceled.ID}, status: 507, code: "disk_full"})
	c.do(exchange{op: "DELETE /api/v1/exports/{id}", vars: map[string]string{"id": canceled.ID}, status: 507, code: "disk_full"})
	c.do(exchange{op: "GET /readyz", status: 503, code: "disk_full"})
	c.do(exchange{op: "GET /healthz", status: 200})
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: map[string]string{"id": pending.ID}, status: 200}) // reads work

	// The pages: the form and the buttons show a page that says the disk is full.
	form := url.Values{"report": {"demo"}, "idempotency_key": {"full-1"}, "rows": {"10"}, "seconds": {"0"}, "fail_first": {"0"}}
	for _, p := range []struct {
		path string
		form url.Values
	}{{"/exports", form}, {"/exports/" + pending.ID + "/cancel", nil}, {"/exports/" + canceled.ID + "/retry", nil}} {
		res := ts.PostForm(p.path, p.form, nil)
		if res.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(res.Body), "The disk is full") {
			t.Errorf("POST %s: %d, want 507 and a page saying the disk is full:\n%.300s", p.path, res.StatusCode, res.Body)
		}
	}
	if got := ts.jobCount(); got != jobs {
		t.Errorf("%d jobs after the refusals, want %d", got, jobs)
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("a full disk logged an ERROR:\n%s", l)
	}

	// Space is freed: readiness comes back by itself (its probe write), and so do writes.
	freeSpace()
	apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
		res := ts.Get("/readyz")
		return res.StatusCode == http.StatusOK, fmt.Sprintf("readyz: %d %s", res.StatusCode, res.Body)
	})
	if res := ts.Post(body, ""); res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST after space returned: %d %s", res.StatusCode, res.Body)
	}
	if res := ts.Request(http.MethodPost, "/api/v1/exports/"+canceled.ID+"/retry", nil, nil); res.StatusCode != http.StatusAccepted {
		t.Fatalf("retry after space returned: %d %s", res.StatusCode, res.Body)
	}
	if err := ts.store.Driver().(*sqlite.Store).Check(context.Background()); err != nil {
		t.Error(err)
	}
}

func testLogger(t *testing.T, w io.Writer) *slog.Logger {
	if w == nil {
		w = t.Output()
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// runOnce runs the real app.Run on dir and returns its error, or nil once it serves
// (then it is stopped). An unset ReportsDir gets the first-run sample, as in production.
func runOnce(t *testing.T, dir string, cfg Config) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Addr, cfg.DataDir, cfg.Version = "127.0.0.1:0", dir, "test"
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t, nil)
	}
	ready := make(chan struct{})
	cfg.Ready = func(string) { close(ready) }
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()
	select {
	case err := <-errc:
		return err
	case <-ready:
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("stop: %v", err)
		}
		return nil
	case <-time.After(time.Minute):
		t.Fatal("Run neither served nor failed within a minute")
		return nil
	}
}

// A data directory whose database has a few zeroed pages in the middle: Run refuses to
// start, with one line that says what is damaged and names sheetq doctor and sheetq
// backup. (Before, it started and took new jobs into the damaged file.)
func TestRunRefusesCorruptDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := datadir.Dir{Root: dir}.DB()
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.FillJobs(t, st, 2000)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, pages := storetest.PageSize(t, db)
	storetest.ZeroPages(t, db, pages/2, 3)

	reports := filepath.Join(dir, "reports") // no sample: it takes long under -race
	err = runOnce(t, dir, Config{ReportsDir: reports})
	if err == nil {
		t.Fatal("Run started on a damaged database")
	}
	msg := err.Error()
	for _, want := range []string{db, "is damaged", "all zeros", "sheetq doctor --data " + dir, "sheetq backup"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the refusal is more than one line:\n%s", msg)
	}
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("errors.Is(err, store.ErrCorrupt) = false: %v", err)
	}
	t.Logf("refusal: %s", msg)

	// --check-db=off starts anyway, for whoever must get data out first.
	if err := runOnce(t, dir, Config{ReportsDir: reports, CheckDB: sqlite.CheckOff}); err != nil {
		t.Fatalf("--check-db=off: %v", err)
	}
}

// A data directory that cannot be written (here a read-only mount of one that holds a
// database, as a backup restored read-only or a wrong mount leaves it) is refused at
// once with what is wrong and what to do, not SQLite's "unable to open database file
// (14)". As root (CI), permissions stop nothing, so the directory is bind-mounted
// read-only; as another user, chmod 0555 makes it read-only.
func TestRunSaysDataDirectoryIsReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reports := filepath.Join(t.TempDir(), "reports")
	if err := runOnce(t, dir, Config{ReportsDir: reports}); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if os.Geteuid() == 0 {
		for _, args := range [][]string{{"--bind", dir, dir}, {"-o", "remount,ro,bind", dir}} {
			if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
				msg := fmt.Sprintf("cannot bind-mount read-only (%v: %s)", err, strings.TrimSpace(string(out)))
				if os.Getenv("CI") == "" {
					t.Skip(msg)
				}
				t.Fatal(msg)
			}
			t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
		}
	} else {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	}
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Fatal("the directory is still writable: the test would prove nothing")
	}

	err := runOnce(t, dir, Config{ReportsDir: reports})
	if !errors.Is(err, datadir.ErrReadOnly) {
		t.Fatalf("Run on a read-only data directory: %v, want datadir.ErrReadOnly", err)
	}
	for _, want := range []string{dir, "cannot write in its data directory", "writable", "--data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	t.Logf("refusal: %v", err)
}

// A first start on a disk with less room than the sample database needs (about 19 MB)
// starts without the sample and says why, instead of exiting at every start; a disk too
// full for the database itself is refused with what to do.
func TestFirstStartOnAlmostFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	storetest.MountTmpfs(t, dir, 4<<20)
	var logs apptest.SyncBuffer
	if err := runOnce(t, dir, Config{Logger: testLogger(t, &logs)}); err != nil {
		t.Fatalf("first start with 4 MiB free: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "no room on the disk for the sample") || !strings.Contains(l, "free some space") {
		t.Errorf("the log does not say the sample did not fit:\n%s", l)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "sample", "*")); len(left) > 0 {
		t.Errorf("a partial sample was left: %v", left)
	}

	full := t.TempDir()
	storetest.MountTmpfs(t, full, 1<<20)
	storetest.FillDisk(t, full)
	err := runOnce(t, full, Config{ReportsDir: filepath.Join(full, "reports")})
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "free some space") {
		t.Fatalf("start on a full disk: %v, want ErrDiskFull saying to free space", err)
	}
	t.Logf("refusal: %v", err)
}
