//go:build !windows

package e2e

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second launch with --open on a data directory a healthy sheetq owns opens the browser
// on the running instance and exits 0 with one line, instead of failing.
func TestSecondLaunchOpensRunningInstance(t *testing.T) {
	data := t.TempDir()
	first := startBinary(t, data, nil)

	browser, opened := fakeBrowser(t)
	cmd := exec.Command(binary, "serve", "--open", "--data", data, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "BROWSER="+browser)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("second launch: %v\n%s", err, out)
	}
	if lines := strings.Count(strings.TrimSpace(string(out)), "\n"); lines != 0 || !strings.Contains(string(out), first.url) {
		t.Fatalf("want one line naming %s, got:\n%s", first.url, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(opened)
		if err == nil {
			if string(b) != first.url {
				t.Fatalf("browser opened %q, want %q", b, first.url)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the browser was never opened")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var fallbackLine = regexp.MustCompile(`port 8080 is in use; listening on (127\.0\.0\.1:\d+) instead`)

// When the default port is taken and the user did not choose an address, sheetq listens
// on a free port of the same host and says which. A chosen address stays binding.
func TestDefaultPortInUseFallsBack(t *testing.T) {
	// Hold 127.0.0.1:8080 for the test; if another program holds it already, the
	// condition under test holds anyway.
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	switch {
	case err == nil:
		defer ln.Close()
	case errors.Is(err, syscall.EADDRINUSE):
	default:
		t.Skipf("cannot test with 127.0.0.1:8080: %v", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHEETQ_ADDR=") {
			env = append(env, kv)
		}
	}

	data := t.TempDir()
	cmd := exec.Command(binary, "serve", "--data", data)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := fallbackLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			t.Fatalf("sheetq exited without falling back:\n%s", logs.String())
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz on the fallback address: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz on the fallback address: %s", resp.Status)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no fallback line in time")
	}

	// An explicit --addr that is taken is an error.
	out, err := exec.Command(binary, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:8080").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("explicit taken --addr: %v\n%s", err, out)
	}
}

// fakeBrowser writes a BROWSER command that records the URL it is asked to open in the
// file opened (written whole, by a rename), and returns both paths.
func fakeBrowser(t *testing.T) (browser, opened string) {
	dir := t.TempDir()
	opened = filepath.Join(dir, "opened")
	browser = filepath.Join(dir, "browser")
	script := "#!/bin/sh\nprintf '%s' \"$1\" > '" + opened + ".tmp' && mv '" + opened + ".tmp' '" + opened + "'\n"
	if err := os.WriteFile(browser, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return browser, opened
}
