//go:build !windows

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"sheetq/internal/client"
	"sheetq/store"
	"sheetq/store/sqlite"
)

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

// submit posts an export request body and wants 202.
func (p *proc) submit(t *testing.T, body string) client.Job {
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
	var j client.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatal(err)
	}
	return j
}

// get fetches the job through the API.
func (p *proc) get(t *testing.T, id string) client.Job {
	t.Helper()
	j, _, err := client.New(p.url, "", nil).GetJob(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitJob polls the API until cond holds for the job.
func (p *proc) waitJob(t *testing.T, id string, what string, cond func(client.Job) bool) client.Job {
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

func status(s string) func(client.Job) bool { return func(j client.Job) bool { return j.Status == s } }

// inspect opens the data directory's database directly (the process is gone).
func inspect(t *testing.T, data, id string) (store.Job, []store.Event) {
	t.Helper()
	st, err := sqlite.OpenDriver(context.Background(), filepath.Join(data, "sheetq.db"), sqlite.Options{})
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
