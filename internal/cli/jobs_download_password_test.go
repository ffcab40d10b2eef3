package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/internal/apptest"
)

// jobs download --password-file saves the file encrypted with the file's password,
// which decrypts to the plain download; a missing or empty password file, both flags,
// and --password without a terminal are each one line, exit 2.
func TestJobsDownloadWithAPassword(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)
	dir := t.TempDir()
	id := newExport(t, srv, "rows=200")
	if _, stderr, code := runCLI(t, "jobs", "wait", id, "--server", srv); code != 0 {
		t.Fatalf("jobs wait: exit %d %s", code, stderr)
	}
	plain := filepath.Join(dir, "plain.xlsx")
	if _, stderr, code := runCLI(t, "jobs", "download", id, "-o", plain, "--server", srv); code != 0 {
		t.Fatalf("plain download: exit %d %s", code, stderr)
	}
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret words\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(dir, "enc.xlsx")
	stdout, stderr, code := runCLI(t, "jobs", "download", id, "-o", enc, "--password-file", pwFile, "--server", srv)
	if code != 0 || !strings.Contains(stdout, "encrypted with the password") {
		t.Fatalf("encrypted download: exit %d\n%s%s", code, stdout, stderr)
	}
	want, _ := os.ReadFile(plain)
	got, _ := os.ReadFile(enc)
	if dec, err := excelize.Decrypt(got, &excelize.Options{Password: "s3cret words"}); err != nil || !bytes.Equal(dec, want) {
		t.Fatalf("decrypted: %d bytes, %v; want the plain file's %d", len(dec), err, len(want))
	}
	if _, err := os.Stat(enc + ".part"); err == nil {
		t.Error("a .part file was left")
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"jobs", "download", id, "--password-file", filepath.Join(dir, "nope")}, 2, "--password-file"},
		{[]string{"jobs", "download", id, "--password-file", empty}, 2, "is empty"},
		{[]string{"jobs", "download", id, "--password-file", pwFile, "--password"}, 2, "not both"},
		{[]string{"jobs", "download", id, "--password"}, 2, "terminal"},
	} {
		_, stderr, code := runCLI(t, append(tc.args, "--server", srv)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d %q, want %d with %q", tc.args, code, stderr, tc.code, tc.want)
		}
		oneErrLine(t, strings.Join(tc.args, " "), stderr)
	}
}

// An export of a report that requires encryption is downloaded only with a password:
// without one, jobs download says how, in one line, exit 1.
func TestJobsDownloadOfAnEncryptOnlyReport(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv, data := startAppWithData(t)
	if err := os.MkdirAll(filepath.Join(data, "reports"), 0o755); err != nil {
		t.Fatal(err)
	}
	report := "-- title: Salaries\n-- source: demo\n-- encrypt: required\n-- param: rows int \"Rows\" = 5\nSELECT :rows;\n"
	if err := os.WriteFile(filepath.Join(data, "reports", "salaries.sql"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	var id string
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		stdout, stderr, code := runCLI(t, "export", "salaries", "--server", srv)
		id = strings.TrimSpace(stdout)
		return code == 0, stderr
	})
	if _, stderr, code := runCLI(t, "jobs", "wait", id, "--server", srv); code != 0 {
		t.Fatalf("jobs wait: exit %d %s", code, stderr)
	}
	_, stderr, code := runCLI(t, "jobs", "download", id, "-o", filepath.Join(t.TempDir(), "x.xlsx"), "--server", srv)
	if code != 1 || !strings.Contains(stderr, "--password") {
		t.Fatalf("a plain download: exit %d %q", code, stderr)
	}
	oneErrLine(t, "plain download", stderr)
}
