//go:build !windows

package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sheetq/internal/client"
)

// runClient runs the binary as a client and returns its stdout, stderr and exit code.
func runClient(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func showJob(t *testing.T, url, id string) client.Job {
	t.Helper()
	out, errOut, code := runClient(t, "jobs", "show", id, "--json", "--server", url)
	if code != 0 {
		t.Fatalf("jobs show %s: exit %d: %s", id, code, errOut)
	}
	var j client.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("jobs show --json: %v\n%s", err, out)
	}
	return j
}

// The CLI as a client of a running server: export --wait downloads a verified file,
// bad params are usage errors, and the job commands list, show and cancel.
func TestClientExport(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--max-attempts", "1", "--heartbeat", "250ms", "--stale-after", "1s")

	dir := t.TempDir()
	out := filepath.Join(dir, "out.xlsx")
	stdout, stderr, code := runClient(t, "export", "demo", "-p", "rows=500", "--wait", "-o", out, "--server", p.url)
	if code != 0 {
		t.Fatalf("export --wait: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "\r") {
		t.Errorf("not a terminal, yet the progress is redrawn in place:\n%q", stdout)
	}
	id := strings.TrimSuffix(strings.Fields(stdout)[1], ":") // "export ID: PENDING"
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no file: %v\n%s", err, stdout)
	}
	if _, err := os.Stat(out + ".part"); !os.IsNotExist(err) {
		t.Errorf(".part file left behind: %v", err)
	}
	job := showJob(t, p.url, id)
	sum := sha256.Sum256(b)
	if job.Status != "SUCCEEDED" || job.File == nil || job.File.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("job %+v, file sha256 %x", job, sum)
	}

	// A bad param is the user's mistake: exit 2, one line naming it.
	stdout, stderr, code = runClient(t, "export", "demo", "-p", "rows=abc", "--server", p.url)
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "rows") {
		t.Fatalf("rows=abc: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// An export that fails on its only attempt: exit 1 with the error code.
	stdout, stderr, code = runClient(t, "export", "demo", "-p", "fail_first=5", "--wait", "--server", p.url)
	if code != 1 || !strings.Contains(stderr, "failed") {
		t.Fatalf("fail_first=5: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// jobs list --json holds the first job; the table has its header.
	stdout, stderr, code = runClient(t, "jobs", "list", "--json", "--server", p.url)
	if code != 0 || !strings.Contains(stdout, id) {
		t.Fatalf("jobs list --json: exit %d, stderr %s, no %s in:\n%s", code, stderr, id, stdout)
	}
	stdout, _, code = runClient(t, "jobs", "list", "--status", "SUCCEEDED", "--server", p.url)
	if code != 0 || !strings.HasPrefix(stdout, "ID ") || !strings.Contains(stdout, id) {
		t.Fatalf("jobs list: exit %d:\n%s", code, stdout)
	}
	stdout, _, code = runClient(t, "jobs", "show", id, "--server", p.url)
	if code != 0 || !strings.Contains(stdout, "SUCCEEDED") || !strings.Contains(stdout, job.File.SHA256) {
		t.Fatalf("jobs show: exit %d:\n%s", code, stdout)
	}
	if _, stderr, code = runClient(t, "jobs", "show", "nosuchjob", "--server", p.url); code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("jobs show of an unknown id: exit %d, stderr %q", code, stderr)
	}

	// A slow export canceled while a client waits: the client exits 3.
	wait, slow, waitErr := startWaiting(t, "export", "demo", "-p", "rows=1000", "-p", "seconds=30", "--wait", "--server", p.url)
	waitRunning(t, p.url, slow)
	if stdout, stderr, code := runClient(t, "jobs", "cancel", slow, "--server", p.url); code != 0 {
		t.Fatalf("jobs cancel: exit %d: %s%s", code, stdout, stderr)
	}
	done := make(chan error, 1)
	go func() { done <- wait.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Fatalf("export --wait of a canceled export: %v, want exit 3; stderr %s", err, waitErr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("export --wait did not end after the cancel")
	}
	if j := showJob(t, p.url, slow); j.Status != "CANCELED" {
		t.Fatalf("canceled job is %s", j.Status)
	}
}

// Ctrl-C while waiting leaves the export running and names it, with exit 130.
func TestClientInterrupt(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	wait, id, waitErr := startWaiting(t, "export", "demo", "-p", "rows=100", "-p", "seconds=30", "--wait", "--server", p.url)
	waitRunning(t, p.url, id)
	if err := wait.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := wait.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(waitErr.String(), id) {
		t.Fatalf("interrupted export --wait: %v, stderr %q", err, waitErr.String())
	}
	if j := showJob(t, p.url, id); j.Status != "PENDING" && j.Status != "PROCESSING" {
		t.Fatalf("the export stopped with the client: %s", j.Status)
	}
}

// waitRunning waits until the export is PROCESSING, so that a client waiting on it is
// past submitting and into following it.
func waitRunning(t *testing.T, url, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for showJob(t, url, id).Status != "PROCESSING" {
		if time.Now().After(deadline) {
			t.Fatalf("export %s never started", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client killed while it waits, then run again with the same arguments, reattaches to
// the export it started instead of making a second one; once a run sees the export
// through, the same command asks for a new export.
func TestClientRerunAfterKillMakesNoSecondJob(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	args := []string{"export", "demo", "-p", "rows=200", "-p", "seconds=3", "--wait", "--server", p.url}
	first, id, _ := startWaiting(t, args...)
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	stdout, stderr, code := runClient(t, args...)
	if code != 0 {
		t.Fatalf("rerun: exit %d: %s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "resuming") {
		t.Errorf("rerun did not say it resumed: %q", stderr)
	}
	out, _, _ := runClient(t, "jobs", "list", "--json", "--server", p.url)
	if n := strings.Count(out, `"report": "demo"`); n != 1 {
		t.Fatalf("%d demo exports after a killed and rerun command, want 1 (%s):\n%s", n, id, out)
	}
	if j := showJob(t, p.url, id); j.Status != "SUCCEEDED" {
		t.Fatalf("the first run's export is %s, want SUCCEEDED by the rerun", j.Status)
	}

	// Seen through: the same command is a new request now.
	newID, _, code := runClient(t, "export", "demo", "-p", "rows=200", "-p", "seconds=3", "--server", p.url)
	if code != 0 || strings.TrimSpace(newID) == id {
		t.Fatalf("third run: exit %d, id %q; want a new export", code, newID)
	}
}

// startWaiting starts a client command that prints "export ID: ..." first, reads that
// line and keeps draining stdout; it returns the running command, the export id and its
// stderr so far. The command is killed at cleanup if still running.
func startWaiting(t *testing.T, args ...string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(pipe)
	if !sc.Scan() {
		t.Fatalf("no output from %v: %s", args, stderr.String())
	}
	id := strings.TrimSuffix(strings.Fields(sc.Text())[1], ":")
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, id, stderr
}
