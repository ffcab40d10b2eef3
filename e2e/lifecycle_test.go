//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// waitLog waits until the process's log contains want.
func (p *proc) waitLog(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.log(), want) {
		select {
		case <-p.done:
			t.Fatalf("sheetq exited before logging %q\n%s", want, p.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sheetq never logged %q\n%s", want, p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ctrl-C says what the shutdown waits for (how many jobs, how long); a second Ctrl-C
// stops the running export at once, puts it back in the queue without spending its
// attempt, and the process exits, long before the 10-minute grace period.
func TestSecondInterruptRequeuesAndExits(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil, "--shutdown-grace", "10m", "--reports", filepath.Join(data, "reports"))
	j := p.submit(t, `{"report":"demo","params":{"rows":2000,"seconds":600}}`)
	p.waitJob(t, j.ID, "PROCESSING", status("PROCESSING"))

	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "waiting up to 10m0s for 1 running jobs to finish")
	p.waitLog(t, "interrupt again (Ctrl-C) to stop them now")
	select {
	case <-p.done:
		t.Fatalf("sheetq exited after one interrupt, with an export running and 10m of grace\n%s", p.log())
	default:
	}

	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 { // p.wait allows 60 s, well short of the grace
		t.Fatalf("exit status %d after the second interrupt\n%s", code, p.log())
	}
	if l := p.log(); !strings.Contains(l, "interrupted again: stopping running jobs now") || !strings.Contains(l, "job requeued") {
		t.Errorf("the log does not say the job was stopped and requeued:\n%s", l)
	}
	row, ev := inspect(t, data, j.ID)
	if row.Status != store.StatusPending || row.Attempt != 0 {
		t.Fatalf("after the second interrupt: %s attempt %d, want PENDING attempt 0 (not spent)", row.Status, row.Attempt)
	}
	if countEvents(ev, store.EventRequeued) != 1 {
		t.Errorf("want one requeued event: %+v", ev)
	}
}

// holdsFlock reports whether pid holds an flock(2) lock, from /proc/locks.
func holdsFlock(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[1] == "FLOCK" && f[4] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

// A double-click while the first sheetq is still starting (it holds the data directory
// but does not listen yet) waits for it, says so, and then opens the browser on it,
// instead of failing with "data directory in use". The first is held in its start
// deterministically: another connection holds the database's write lock until the
// second launch says it waits.
func TestSecondLaunchWaitsForStartingInstance(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("finds the data directory's lock holder in /proc/locks")
	}
	data := t.TempDir()
	db := filepath.Join(data, "sheetq.db")
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	release := storetest.HoldWriteLock(t, db)

	first, urlc := spawn(t, data, nil, "--reports", filepath.Join(data, "reports"))
	deadline := time.Now().Add(20 * time.Second)
	for !holdsFlock(t, first.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the first sheetq never took the data directory's lock\n%s", first.log())
		}
		time.Sleep(10 * time.Millisecond)
	}

	browser, opened := fakeBrowser(t)
	second := exec.Command(binary, "serve", "--open", "--data", data, "--addr", "127.0.0.1:0")
	second.Env = append(os.Environ(), "BROWSER="+browser)
	out, err := second.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said []string
	next := func() (string, bool) {
		select {
		case l, ok := <-lines:
			said = append(said, l)
			return l, ok
		case <-time.After(30 * time.Second):
			t.Fatalf("the second launch said nothing more; so far:\n%s", strings.Join(said, "\n"))
			return "", false
		}
	}
	if l, ok := next(); !ok || !strings.Contains(l, "sheetq is starting in another process; waiting for it") {
		t.Fatalf("the second launch did not wait for the first: %q\n%s", l, strings.Join(said, "\n"))
	}

	release() // the first goes on starting
	var url string
	select {
	case url = <-urlc:
	case <-time.After(30 * time.Second):
		t.Fatalf("the first sheetq did not listen\n%s", first.log())
	}
	if l, ok := next(); !ok || !strings.Contains(l, "already running at "+url) {
		t.Fatalf("second launch: %q, want a line naming %s\n%s", l, url, strings.Join(said, "\n"))
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("second launch: %v\n%s", err, strings.Join(said, "\n"))
	}
	// The opener runs on after sheetq exits.
	deadline = time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(opened)
		if err == nil {
			if string(b) != url {
				t.Fatalf("browser opened %q, want %q", b, url)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the browser was never opened")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A data directory whose database has zeroed pages in the middle: serve exits 1 with
// one line naming what is damaged, sheetq doctor and sheetq backup; the doctor it names
// does see the damage; SHEETQ_CHECK_DB=off starts anyway; a bad --check-db is a usage
// error.
func TestServeRefusesDamagedDatabase(t *testing.T) {
	data := t.TempDir()
	db := filepath.Join(data, "sheetq.db")
	st, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.FillJobs(t, st, 2000)
	st.Close()
	_, pages := storetest.PageSize(t, db)
	storetest.ZeroPages(t, db, pages/2, 4)
	reports := filepath.Join(data, "reports")

	for _, mode := range []string{"quick", "full"} {
		out, err := exec.Command(binary, "serve", "--data", data, "--addr", "127.0.0.1:0", "--reports", reports, "--check-db", mode).CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Contains(msg, "\n") {
			t.Fatalf("--check-db=%s: %v, want exit 1 and one line:\n%s", mode, err, out)
		}
		for _, want := range []string{"sheetq: the database " + db + " is damaged", "all zeros", "sheetq doctor --data " + data, "sheetq backup"} {
			if !strings.Contains(msg, want) {
				t.Errorf("--check-db=%s: the line does not say %q:\n%s", mode, want, msg)
			}
		}
	}
	out, err := exec.Command(binary, "doctor", "--data", data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "database:") {
		t.Errorf("sheetq doctor does not report the damage: %v\n%s", err, out)
	}

	startBinary(t, data, []string{"SHEETQ_CHECK_DB=off"}, "--reports", reports)

	out, err = exec.Command(binary, "serve", "--data", t.TempDir(), "--check-db", "deep").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--check-db") {
		t.Errorf("--check-db=deep: %v, want exit 2 naming the flag:\n%s", err, out)
	}
}
