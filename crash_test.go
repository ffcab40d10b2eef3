//go:build !windows

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sheetq/store"
)

// These tests run the real binary, built with -tags faultpoints so that SHEETQ_FAULT can
// make it kill itself at a named point, and kill it with SIGKILL from outside.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sheetq-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sheetq")
	// Client commands keep interrupted requests' keys in the user cache: keep the tests'
	// out of the real one.
	// The build keeps the real Go build cache: it lives under XDG_CACHE_HOME by default,
	// and an empty one makes every run compile all dependencies again (minutes).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOCACHE:", err)
		os.Exit(1)
	}
	os.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	build := exec.Command("go", "build", "-tags", "faultpoints", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sheetq:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one run of the binary.
type proc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	err  error
}

var listening = regexp.MustCompile(`msg=listening .*url=(http://\S+)`)

// startBinary starts `sheetq serve` on a free loopback port and waits until it listens.
func startBinary(t *testing.T, data string, env []string, args ...string) *proc {
	t.Helper()
	p, urlc := spawn(t, data, env, append([]string{"--log-level", "debug"}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", p.log())
		}
	})
	select {
	case p.url = <-urlc:
	case <-p.done:
		t.Fatalf("sheetq exited before listening: %v\n%s", p.err, p.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("sheetq did not listen in time\n%s", p.log())
	}
	return p
}

// spawn starts `sheetq serve --addr 127.0.0.1:0 --data DATA ARGS...` with its log
// captured; the channel yields the URL once it listens. The process is killed when the
// test ends.
func spawn(t *testing.T, data string, env []string, args ...string) (*proc, <-chan string) {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				urlc <- m[1]
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p, urlc
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("sheetq did not exit\n%s", p.log())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
}

type apiJob struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Attempt  int    `json:"attempt"`
	Progress struct {
		Rows int64 `json:"rows"`
	} `json:"progress"`
	File *struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"file"`
}

func (p *proc) submit(t *testing.T, body string) apiJob {
	t.Helper()
	resp, err := http.Post(p.url+"/api/v1/exports", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /api/v1/exports: %s %s", resp.Status, b)
	}
	var j apiJob
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatal(err)
	}
	return j
}

func (p *proc) get(t *testing.T, id string) apiJob {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/exports/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j apiJob
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatal(err)
	}
	return j
}

// waitJob polls the API until cond holds for the job.
func (p *proc) waitJob(t *testing.T, id string, what string, cond func(apiJob) bool) apiJob {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j := p.get(t, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never became %s; last: %+v\n%s", id, what, j, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func status(s string) func(apiJob) bool { return func(j apiJob) bool { return j.Status == s } }

// inspect opens the data directory's database directly (the process is gone).
func inspect(t *testing.T, data, id string) (store.Job, []store.Event) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(data, "sheetq.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	j, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j, ev
}

func countEvents(ev []store.Event, typ string) int {
	n := 0
	for _, e := range ev {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func files(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The job survives a SIGKILL mid-run: after a restart it is recovered at once and
// succeeds on attempt 2, with one file and no part file left.
func TestCrashWhileProcessingResumesOnRestart(t *testing.T) {
	data := t.TempDir()
	fast := []string{"--heartbeat", "100ms", "--stale-after", "1s"}
	p := startBinary(t, data, nil, fast...)
	j := p.submit(t, `{"report":"demo","params":{"rows":3000,"seconds":4}}`)
	p.waitJob(t, j.ID, "PROCESSING with progress", func(j apiJob) bool {
		return j.Status == "PROCESSING" && j.Progress.Rows > 0
	})
	p.kill(t)

	row, _ := inspect(t, data, j.ID)
	if row.Status != store.StatusProcessing || row.Attempt != 1 {
		t.Fatalf("after SIGKILL: status %s attempt %d, want PROCESSING 1", row.Status, row.Attempt)
	}

	p2 := startBinary(t, data, nil, fast...)
	done := p2.waitJob(t, j.ID, "SUCCEEDED", func(j apiJob) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
	if done.Status != "SUCCEEDED" || done.Attempt != 2 {
		t.Fatalf("after restart: %s on attempt %d, want SUCCEEDED on attempt 2", done.Status, done.Attempt)
	}
	if got := files(t, filepath.Join(data, "exports"), "*"); len(got) != 1 {
		t.Fatalf("exports/ holds %v, want exactly one file", got)
	}
	if got := files(t, filepath.Join(data, "tmp"), "*.part"); len(got) != 0 {
		t.Fatalf("part files left behind: %v", got)
	}
	p2.kill(t)
	_, ev := inspect(t, data, j.ID)
	if n := countEvents(ev, store.EventRecovered); n != 1 {
		t.Errorf("recovered events = %d, want 1", n)
	}
	if n := countEvents(ev, store.EventSucceeded); n != 1 {
		t.Errorf("succeeded events = %d, want 1", n)
	}
}

// A crash between renaming the file into place and committing SUCCEEDED: after a
// restart the job is completed from the published file, not run a second time.
func TestCrashAfterRenameCompletesFromFile(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, []string{"SHEETQ_FAULT=after-rename"})
	j := p.submit(t, `{"report":"demo","params":{"rows":500}}`)
	if code := p.wait(t); code == 0 {
		t.Fatalf("the fault point did not kill the process\n%s", p.log())
	}
	final := filepath.Join(data, "exports", j.ID+".xlsx")
	if _, err := os.Stat(final); err != nil {
		t.Fatalf("the file was not published before the crash: %v", err)
	}
	row, _ := inspect(t, data, j.ID)
	if row.Status != store.StatusProcessing {
		t.Fatalf("after the crash the job is %s, want PROCESSING (commit must not have happened)", row.Status)
	}

	p2 := startBinary(t, data, nil)
	done := p2.waitJob(t, j.ID, "finished", func(j apiJob) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
	if done.Status != "SUCCEEDED" || done.Attempt != 1 {
		t.Fatalf("after restart: %s on attempt %d, want SUCCEEDED on attempt 1", done.Status, done.Attempt)
	}
	p2.kill(t)
	_, ev := inspect(t, data, j.ID)
	if n := countEvents(ev, store.EventStarted); n != 1 {
		t.Errorf("the job started %d times, want once", n)
	}
	if n := countEvents(ev, store.EventCompletedFromFile); n != 1 {
		t.Errorf("completed_from_file events = %d, want 1", n)
	}
	if done.File == nil || done.File.Size == 0 {
		t.Fatalf("no file recorded: %+v", done)
	}
	// The rows were committed before the rename, although no heartbeat came in time.
	if done.Progress.Rows != 500 {
		t.Errorf("progress.rows = %d, want the 500 rows the file holds", done.Progress.Rows)
	}
	fi, err := os.Stat(final)
	if err != nil || fi.Size() != done.File.Size {
		t.Fatalf("file on disk (%v, %v) does not match the recorded size %d", fi, err, done.File.Size)
	}
}

// SIGTERM with a short grace period puts the running job back to PENDING without
// spending its attempt; the next start runs it to success as attempt 1.
func TestGracefulShutdownRequeuesWithoutSpendingAttempt(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil, "--heartbeat", "100ms", "--stale-after", "1s", "--shutdown-grace", "200ms")
	j := p.submit(t, `{"report":"demo","params":{"rows":2000,"seconds":3}}`)
	p.waitJob(t, j.ID, "PROCESSING", status("PROCESSING"))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("graceful shutdown exited %d\n%s", code, p.log())
	}
	row, ev := inspect(t, data, j.ID)
	if row.Status != store.StatusPending || row.Attempt != 0 {
		t.Fatalf("after shutdown: %s attempt %d, want PENDING attempt 0", row.Status, row.Attempt)
	}
	if countEvents(ev, store.EventRequeued) != 1 {
		t.Fatalf("no requeued event: %+v", ev)
	}
	if got := files(t, filepath.Join(data, "tmp"), "*.part"); len(got) != 0 {
		t.Fatalf("part files left behind: %v", got)
	}

	p2 := startBinary(t, data, nil)
	done := p2.waitJob(t, j.ID, "finished", func(j apiJob) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
	if done.Status != "SUCCEEDED" || done.Attempt != 1 {
		t.Fatalf("after restart: %s on attempt %d, want SUCCEEDED on attempt 1", done.Status, done.Attempt)
	}
}

// A job that finishes within the grace period completes during shutdown.
func TestGracefulShutdownLetsShortJobsFinish(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil, "--shutdown-grace", "30s")
	j := p.submit(t, `{"report":"demo","params":{"rows":1000,"seconds":1}}`)
	p.waitJob(t, j.ID, "PROCESSING", status("PROCESSING"))
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("graceful shutdown exited %d\n%s", code, p.log())
	}
	row, _ := inspect(t, data, j.ID)
	if row.Status != store.StatusSucceeded {
		t.Fatalf("after shutdown the job is %s, want SUCCEEDED", row.Status)
	}
}

// A second process on the same data directory fails with a clear error naming the first.
func TestSecondProcessOnSameDataDirIsRefused(t *testing.T) {
	data := t.TempDir()
	first := startBinary(t, data, nil)
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data", data)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("second process started:\n%s", out)
	}
	want := fmt.Sprintf("sheetq process %d serving %s", first.cmd.Process.Pid, first.url)
	if !strings.Contains(string(out), want) {
		t.Fatalf("error %q does not name the owner (%q)", out, want)
	}
	if lines := strings.Count(strings.TrimSpace(string(out)), "\n"); lines != 0 {
		t.Errorf("want one line on stderr, got:\n%s", out)
	}
}

// Flags read SHEETQ_* variables; a bad value is a usage error (exit 2, one line).
func TestFlagsFromEnvironment(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "SHEETQ_WORKERS=lots")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit = %v, want 2; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "SHEETQ_WORKERS") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("want one line naming SHEETQ_WORKERS, got:\n%s", out)
	}

	data := t.TempDir()
	p := startBinary(t, data, []string{"SHEETQ_WORKERS=3"})
	if !strings.Contains(p.log(), "workers=3") {
		t.Fatalf("SHEETQ_WORKERS=3 not applied:\n%s", p.log())
	}
}

// Closing the terminal (SIGHUP) shuts down gracefully, like Ctrl-C.
func TestHangupShutsDownGracefully(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--reports", t.TempDir())
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("SIGHUP: exit %d\n%s", code, p.log())
	}
	if !strings.Contains(p.log(), "msg=stopped") {
		t.Fatalf("no orderly stop in the log:\n%s", p.log())
	}
}
