package docs_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestScheduleExamplesWorkOnAFreshInstall runs the command-line examples of
// docs/schedules.md, "Schedules in the browser and the CLI", as a newcomer would: against
// a server on a fresh data directory, in the order the page gives them. A toml block is
// added to the data directory's sheetq.toml and the server started again, as the page
// says; every `sheetq schedules` line (but those with an ID placeholder) must exit 0.
// Issue 37: the example once used --email before any [smtp], and exited 2.
func TestScheduleExamplesWorkOnAFreshInstall(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("builds and runs the binary through sh")
	}
	text, err := os.ReadFile("schedules.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := sectionBlocks(t, string(text), "## Schedules in the browser and the CLI")
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "sheetq"), "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := t.TempDir()
	srv := startServer(t, bin, data)
	ran := 0
	for _, b := range blocks {
		switch b.lang {
		case "toml":
			f, err := os.OpenFile(filepath.Join(data, "sheetq.toml"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("\n" + b.body); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			srv.stop(t)
			srv = startServer(t, bin, data)
		case "sh":
			for _, line := range commands(b.body) {
				if !strings.HasPrefix(line, "sheetq schedules ") || regexp.MustCompile(`\bID\b`).MatchString(line) {
					continue
				}
				cmd := exec.Command("sh", "-c", line)
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
					"SHEETQ_SERVER="+srv.url, "SHEETQ_TOKEN=")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s\n%v: %s", line, err, out)
				}
				ran++
			}
		}
	}
	srv.stop(t)
	if ran < 3 {
		t.Fatalf("ran %d schedules commands from the page, want at least 3 (preview, create, create --email)", ran)
	}
}

// A block is a fenced code block: its language and text.
type block struct{ lang, body string }

// sectionBlocks returns the fenced blocks between heading and the next heading of its level.
func sectionBlocks(t *testing.T, text, heading string) []block {
	t.Helper()
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no heading %q", heading)
	}
	level := heading[:strings.Index(heading, " ")+1]
	if i := strings.Index(rest, "\n"+level); i >= 0 {
		rest = rest[:i]
	}
	var out []block
	var cur *block
	for l := range strings.SplitSeq(rest, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimPrefix(l, "```")}
		case cur != nil && l == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += l + "\n"
		}
	}
	return out
}

// commands joins a shell block's continued lines and drops comments: one command a line.
func commands(body string) []string {
	var out []string
	for c := range strings.SplitSeq(strings.ReplaceAll(body, "\\\n", " "), "\n") {
		if i := strings.Index(c, " #"); i >= 0 {
			c = c[:i]
		}
		if c = strings.TrimSpace(c); c != "" && !strings.HasPrefix(c, "#") {
			out = append(out, c)
		}
	}
	return out
}

// A server is `sheetq serve` on a data directory, listening at url.
type server struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{} // closed once the process has exited; err is then its end
	err    error
}

// startServer starts the binary on data at a free port and waits until it answers.
func startServer(t *testing.T, bin, data string) *server {
	t.Helper()
	_ = os.Remove(filepath.Join(data, "sheetq.pid")) // the previous run's, if any
	cmd := exec.Command(filepath.Join(bin, "sheetq"), "serve", "--data", data, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SHEETQ_TOKEN=")
	logs, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, exited: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // a server a failed test left running; an error once it exited
		<-s.exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if pid, err := os.ReadFile(filepath.Join(data, "sheetq.pid")); err == nil {
			if _, u, ok := strings.Cut(strings.TrimSpace(string(pid)), "\n"); ok && ready(ctx, u) {
				s.url = u
				return s
			}
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logs.Name())
			t.Fatalf("sheetq serve exited: %v\n%s", s.err, log)
		case <-ctx.Done():
			log, _ := os.ReadFile(logs.Name())
			t.Fatalf("sheetq serve did not answer within a minute\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ready reports whether the server at url answers /readyz with 200.
func ready(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop sends the server SIGINT, as Ctrl-C does, and waits for it to exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		if s.err != nil {
			t.Fatalf("sheetq serve: %v", s.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("sheetq serve did not stop within a minute of SIGINT")
	}
}
