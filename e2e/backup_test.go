//go:build !windows

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/store/sqlite"
)

// `sheetq backup FILE` copies the database of a running server without stopping it; the
// copy passes an integrity check and holds the server's jobs.
func TestBackupWhileServing(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil)
	j := p.submit(t, `{"report":"demo","params":{"rows":2000,"seconds":2}}`)

	out := filepath.Join(t.TempDir(), "copy.db")
	cmd := exec.Command(binary, "backup", out, "--data", data)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(string(stdout)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], out) || !strings.Contains(lines[0], "bytes") {
		t.Fatalf("want one line with the path and size, got %q", stdout)
	}

	ctx := context.Background()
	st, err := sqlite.OpenDriver(ctx, out, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, j.ID); err != nil {
		t.Fatalf("job %s not in the backup: %v", j.ID, err)
	}
	// The server is unaffected.
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))

	// An existing file is never overwritten: one line on stderr, exit 1.
	before, _ := os.ReadFile(out)
	cmd = exec.Command(binary, "backup", "--data", data, out)
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
		t.Fatalf("backup over an existing file: exit %v, output %q; want 1 and one line", err, b)
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Fatal("backup overwrote an existing file")
	}

	// No FILE is a usage error.
	if err := exec.Command(binary, "backup", "--data", data).Run(); err == nil {
		t.Fatal("backup without FILE succeeded")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("backup without FILE: %v, want exit 2", err)
	}
}
