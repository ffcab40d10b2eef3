//go:build !windows

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sheetq/internal/client"
	"sheetq/store"
)

// The job survives a SIGKILL mid-run: after a restart it is recovered at once and
// succeeds on attempt 2, with one file and no part file left.
func TestCrashWhileProcessingResumesOnRestart(t *testing.T) {
	data := t.TempDir()
	fast := []string{"--heartbeat", "100ms", "--stale-after", "1s"}
	p := startBinary(t, data, nil, fast...)
	j := p.submit(t, `{"report":"demo","params":{"rows":3000,"seconds":4}}`)
	p.waitJob(t, j.ID, "PROCESSING with progress", func(j client.Job) bool {
		return j.Status == "PROCESSING" && j.Progress.Rows > 0
	})
	p.kill(t)

	row, _ := inspect(t, data, j.ID)
	if row.Status != store.StatusProcessing || row.Attempt != 1 {
		t.Fatalf("after SIGKILL: status %s attempt %d, want PROCESSING 1", row.Status, row.Attempt)
	}

	p2 := startBinary(t, data, nil, fast...)
	done := p2.waitJob(t, j.ID, "SUCCEEDED", func(j client.Job) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
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
	done := p2.waitJob(t, j.ID, "finished", func(j client.Job) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
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
	done := p2.waitJob(t, j.ID, "finished", func(j client.Job) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
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
