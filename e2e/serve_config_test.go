//go:build !windows

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var workersLine = regexp.MustCompile(`msg=listening .*workers=(\d+)`)

// Serve settings come from flags, then SHEETQ_* variables, then the config file's
// [serve] table, then the defaults.
func TestConfigFilePrecedence(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "sheetq.toml")
	body := "[serve]\nworkers = 3\nretention = \"48h\"\nbase_url = \"https://sheetq.example.com/\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.168.0.0/16\"]\n"
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	workers := func(p *proc) string {
		t.Helper()
		m := workersLine.FindStringSubmatch(p.log())
		if m == nil {
			t.Fatalf("no workers in the listening line:\n%s", p.log())
		}
		return m[1]
	}
	p := startBinary(t, t.TempDir(), nil, "--config", config)
	if got := workers(p); got != "3" {
		t.Errorf("config file alone: workers %s, want 3", got)
	}
	if !strings.Contains(p.log(), "public_url=https://sheetq.example.com/") {
		t.Errorf("base_url from the config file not applied:\n%s", p.log())
	}
	p = startBinary(t, t.TempDir(), []string{"SHEETQ_WORKERS=4"}, "--config", config)
	if got := workers(p); got != "4" {
		t.Errorf("environment over config file: workers %s, want 4", got)
	}
	p = startBinary(t, t.TempDir(), []string{"SHEETQ_WORKERS=4"}, "--config", config, "--workers", "5")
	if got := workers(p); got != "5" {
		t.Errorf("flag over environment: workers %s, want 5", got)
	}
	p = startBinary(t, t.TempDir(), nil, "--reports", t.TempDir())
	if got := workers(p); got != "2" {
		t.Errorf("no config file: workers %s, want the default 2", got)
	}

	for _, tt := range []struct{ body, want string }{
		{"[serve]\nwrokers = 3\n", "unknown key serve.wrokers"},
		{"[serve]\nworkers = \"many\"\n", "serve.workers"},
		{"[serve]\ndata = \"/tmp\"\n", "cannot be set in the config file"},
		{"[serve]\ntoken = \"abc\"\n", "[[tokens]]"},
	} {
		if err := os.WriteFile(config, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--config", config).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("config %q: %v, want one line with %q:\n%s", tt.body, err, tt.want, out)
		}
	}
}

// Off loopback sheetq refuses to start without a token, saying how to set one (a bad
// flag value: exit 2); a named token from the config file is enough, and the jobs it
// creates carry its name.
func TestTokensFromConfigFile(t *testing.T) {
	out, err := exec.Command(binary, "serve", "--data", t.TempDir(), "--addr", "0.0.0.0:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "SHEETQ_TOKEN") {
		t.Fatalf("non-loopback without a token: %v\n%s", err, out)
	}

	dir := t.TempDir()
	config := filepath.Join(dir, "sheetq.toml")
	body := "[[tokens]]\nname = \"ci\"\ntoken = \"env:SHEETQ_TEST_CI_TOKEN\"\n\n[[tokens]]\nname = \"alice\"\ntoken = \"alice-literal-token\"\n"
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, t.TempDir(), []string{"SHEETQ_TEST_CI_TOKEN=ci-from-env-0123", "SHEETQ_TOKEN=the-default-0123"},
		"--config", config, "--reports", t.TempDir())
	if strings.Contains(p.log(), "ci-from-env-0123") || strings.Contains(p.log(), "alice-literal-token") || strings.Contains(p.log(), "the-default-0123") {
		t.Fatalf("a token reached the log:\n%s", p.log())
	}
	if _, stderr, code := runClient(t, "jobs", "list", "--server", p.url); code != 4 || !strings.Contains(stderr, "401") {
		t.Fatalf("jobs list without a token: exit %d, %s", code, stderr)
	}
	for token, name := range map[string]string{"ci-from-env-0123": "ci", "alice-literal-token": "alice", "the-default-0123": "default"} {
		stdout, stderr, code := runClient(t, "export", "demo", "-p", "rows=1", "--token", token, "--server", p.url)
		if code != 0 {
			t.Fatalf("export with %s's token: exit %d: %s", name, code, stderr)
		}
		out, stderr, code := runClient(t, "jobs", "show", strings.TrimSpace(stdout), "--json", "--token", token, "--server", p.url)
		var j struct {
			CreatedBy string `json:"created_by"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.CreatedBy != name {
			t.Fatalf("jobs show: exit %d, %s; created_by %q, want %q\n%s", code, stderr, j.CreatedBy, name, out)
		}
	}
}
