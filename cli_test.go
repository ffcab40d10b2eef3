//go:build !windows

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `sheetq reports check DIR` is CI for report authors: it lists each file, prints the
// broken ones with file and line, and exits non-zero when any is broken.
func TestReportsCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.sql", "-- title: Good\n-- source: shop\n-- param: n int\nSELECT :n;\n")
	out, err := exec.Command(binary, "reports", "check", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok   good  Good") {
		t.Fatalf("valid folder: err %v, output:\n%s", err, out)
	}

	write("bad.sql", "-- title: Bad\n-- source: shop\nSELECT :missing;\n")
	cmd := exec.Command(binary, "reports", "check", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("broken folder: exit %v, want 1", err)
	}
	if want := filepath.Join(dir, "bad.sql") + ":3:"; !strings.Contains(string(stdout), want) {
		t.Fatalf("output does not name %s:\n%s", want, stdout)
	}
	if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n"); lines != 0 || stderr.Len() == 0 {
		t.Fatalf("want one line on stderr, got %q", stderr.String())
	}

	if out, err := exec.Command(binary, "reports", "frobnicate").CombinedOutput(); err == nil {
		t.Fatalf("unknown subcommand succeeded:\n%s", out)
	}
}

// serve refuses a --worker-nice outside 0..19 before it touches the data directory: exit
// 2 and one line on stderr that names the flag.
func TestServeRefusesBadWorkerNice(t *testing.T) {
	for _, v := range []string{"-1", "20"} {
		data := filepath.Join(t.TempDir(), "data")
		cmd := exec.Command(binary, "serve", "--data", data, "--addr", "127.0.0.1:0", "--worker-nice", v)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Fatalf("--worker-nice %s: %v, want exit 2", v, err)
		}
		if msg := strings.TrimSpace(stderr.String()); strings.Contains(msg, "\n") || !strings.Contains(msg, "--worker-nice") {
			t.Fatalf("--worker-nice %s: want one line naming the flag, got %q", v, msg)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("--worker-nice %s created the data directory (%v)", v, err)
		}
	}
}
