//go:build !windows

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor checks a live server's data directory without disturbing it: healthy at first,
// then one line per planted problem, the same as JSON, and --fix removes only the
// orphan part file.
func TestDoctor(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil, "--reports", t.TempDir())
	dir := t.TempDir()
	if _, stderr, code := runClient(t, "export", "demo", "-p", "rows=10", "--wait", "-o", filepath.Join(dir, "a.xlsx"), "--server", p.url); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	stdout, stderr, code := runClient(t, "export", "demo", "-p", "rows=10", "--wait", "-o", filepath.Join(dir, "b.xlsx"), "--server", p.url)
	if code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	second := strings.TrimSuffix(strings.Fields(stdout)[1], ":")

	stdout, stderr, code = runClient(t, "doctor", "--data", data)
	if code != 0 || !strings.HasPrefix(stdout, "ok: ") || !strings.Contains(stdout, "2 exports, 2 files") {
		t.Fatalf("healthy directory: exit %d\n%s%s", code, stdout, stderr)
	}

	part := filepath.Join(data, "tmp", "nosuchjob.1.part")
	stray := filepath.Join(data, "exports", "nosuchjob.xlsx")
	for _, f := range []string{part, stray} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(data, "exports", second+".xlsx")
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runClient(t, "doctor", "--data", data)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 1 || len(lines) != 3 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("three problems: exit %d, want 1 with three lines\n%s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"part_file: " + part, "orphan_file: " + stray, "missing_file: export " + second} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no line with %q:\n%s", want, stdout)
		}
	}

	stdout, _, code = runClient(t, "doctor", "--data", data, "--json")
	// The fields of doctor's JSON report that this test reads (docs/operations.md).
	var rep struct {
		Running   bool       `json:"server_running"`
		FreeBytes uint64     `json:"free_bytes"`
		Healthy   bool       `json:"healthy"`
		Problems  []struct{} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 || rep.Healthy || !rep.Running || len(rep.Problems) != 3 || rep.FreeBytes == 0 {
		t.Fatalf("--json: exit %d, %v, %+v\n%s", code, err, rep, stdout)
	}

	stdout, _, code = runClient(t, "doctor", "--data", data, "--fix")
	if code != 1 || !strings.Contains(stdout, "part_file: "+part) || !strings.Contains(stdout, "(fixed)") {
		t.Fatalf("--fix: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Errorf("--fix left the part file: %v", err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("--fix touched a published file: %v", err)
	}

	if _, stderr, code = runClient(t, "doctor", "--data", filepath.Join(dir, "nope")); code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("missing directory: exit %d, stderr %q", code, stderr)
	}
}
