package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runLoadtest runs `sheetq loadtest` against url and returns its exit code, stdout,
// stderr and the --json report.
func runLoadtest(t *testing.T, url string, args ...string) (int, string, string, map[string]any) {
	t.Helper()
	jsonFile := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(binary, append([]string{"loadtest", "--server", url, "--json", jsonFile, "--drain-timeout", "60s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run loadtest: %v", err)
		}
		code = ee.ExitCode()
	}
	var report map[string]any
	if b, err := os.ReadFile(jsonFile); err == nil {
		if err := json.Unmarshal(b, &report); err != nil {
			t.Fatalf("--json file is not JSON: %v", err)
		}
	}
	return code, stdout.String(), stderr.String(), report
}

// field walks a decoded JSON object by keys.
func field(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("report: %s is not an object", strings.Join(path, "."))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("report has no %s", strings.Join(path, "."))
		}
	}
	return v
}

func num(t *testing.T, v any, path ...string) float64 {
	t.Helper()
	f, ok := field(t, v, path...).(float64)
	if !ok {
		t.Fatalf("report: %s is not a number", strings.Join(path, "."))
	}
	return f
}

// TestLoadtestSteady runs the load command against the real server: 50 req/s for 2 s,
// every request accepted, every job succeeded, and the report has its figures.
func TestLoadtestSteady(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--workers", "2")
	code, stdout, stderr, rep := runLoadtest(t, p.url, "--profile", "steady", "--rate", "50", "--duration", "2s",
		"--window", "1s", "-p", "rows=50")
	if code != 0 {
		t.Fatalf("loadtest exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "check: OK") {
		t.Fatalf("no passing check in the table:\n%s", stdout)
	}
	if ok, _ := field(t, rep, "check", "ok").(bool); !ok {
		t.Fatalf("check.ok is not true: %v", field(t, rep, "check"))
	}
	for k, want := range map[string]float64{"requests": 100, "with_job": 100, "succeeded": 100,
		"missing": 0, "duplicates": 0, "unexpected": 0, "not_succeeded": 0, "unanswered": 0} {
		if got := num(t, rep, "check", k); got != want {
			t.Errorf("check.%s = %v, want %v", k, got, want)
		}
	}
	if got := num(t, rep, "errors", "total"); got != 0 {
		t.Errorf("errors.total = %v", got)
	}
	for _, lat := range []string{"accept", "final"} {
		if n := num(t, rep, "overall", lat, "n"); n != 100 {
			t.Errorf("overall.%s.n = %v, want 100", lat, n)
		}
		p50, p95 := num(t, rep, "overall", lat, "p50_ms"), num(t, rep, "overall", lat, "p95_ms")
		p99, mx := num(t, rep, "overall", lat, "p99_ms"), num(t, rep, "overall", lat, "max_ms")
		if p50 <= 0 || p50 > p95 || p95 > p99 || p99 > mx {
			t.Errorf("overall.%s percentiles out of order: %v %v %v %v", lat, p50, p95, p99, mx)
		}
	}
	if p := field(t, rep, "phases").([]any); len(p) != 1 || num(t, p[0], "sent") != 100 {
		t.Errorf("phases = %v, want one phase of 100 requests", p)
	}
	var sent float64
	for _, w := range field(t, rep, "windows").([]any) {
		sent += num(t, w, "sent")
	}
	if w := field(t, rep, "windows").([]any); len(w) != 2 || sent != 100 {
		t.Errorf("%d windows with %v requests, want 2 windows of 1 s with 100", len(w), sent)
	}
	num(t, rep, "client", "scheduler_lateness", "p99_ms")
	num(t, rep, "client", "cpu_per_request_us")
	// The server's own CPU while sending, from its /metrics (Linux reports it).
	if cpu := num(t, rep, "server", "cpu_s"); cpu <= 0 || num(t, rep, "server", "cpu_per_request_us") <= 0 {
		t.Errorf("server CPU %v s: want a positive figure from process_cpu_seconds_total", cpu)
	}
	if !strings.Contains(stdout, "server: CPU ") {
		t.Errorf("no server CPU line in the table:\n%s", stdout)
	}
	// Its write transactions while sending, from sheetq_store_write_seconds: at least
	// one group commit for the 100 requests.
	if n := num(t, rep, "server", "writes", "count"); n < 1 || num(t, rep, "server", "writes", "p99_ms") <= 0 {
		t.Errorf("server writes: %v transactions, p99 %v ms; want some, with a positive p99", n, num(t, rep, "server", "writes", "p99_ms"))
	}
	if !strings.Contains(stdout, "write transactions while sending") {
		t.Errorf("no write transactions line in the table:\n%s", stdout)
	}
	if got := num(t, rep, "config", "procs"); got != 1 {
		t.Errorf("config.procs = %v, want the default of 1", got)
	}
}

// TestLoadtestCheckFails: jobs that fail make the consistency check, and the exit
// status, fail.
func TestLoadtestCheckFails(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil, "--workers", "2", "--max-attempts", "1")
	start := time.Now()
	code, stdout, stderr, rep := runLoadtest(t, p.url, "--profile", "steady", "--rate", "20", "--duration", "1s",
		"-p", "rows=10", "-p", "fail_first=1")
	if code == 0 {
		t.Fatalf("loadtest passed although every job failed\n%s", stdout)
	}
	if !strings.Contains(stderr, "consistency check failed") || !strings.Contains(stderr, "20 jobs did not succeed") {
		t.Fatalf("stderr does not name the failed check:\n%s", stderr)
	}
	if ok, _ := field(t, rep, "check", "ok").(bool); ok || num(t, rep, "check", "not_succeeded") != 20 {
		t.Fatalf("check = %v, want not ok with 20 jobs not succeeded", field(t, rep, "check"))
	}
	if time.Since(start) > 50*time.Second {
		t.Logf("slow run: %s", time.Since(start))
	}
}
