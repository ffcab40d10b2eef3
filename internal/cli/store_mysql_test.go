package cli

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/storetest/mysqltest"
)

// TestStoreCopyToMySQL: store copy --to mysql:// (through env:NAME) fills an empty
// MariaDB database, doctor finds it healthy, a second copy is refused, and backup names
// mysqldump; no line shows the password.
func TestStoreCopyToMySQL(t *testing.T) {
	target := mysqltest.URL(t, mysqltest.FreshDatabase(t))
	dir, ids := doctorDir(t, 2)
	secret := password(t, target)
	t.Setenv("SHEETQ_TEST_COPY_TARGET", target)

	out, errOut, code := runCLI(t, "store", "copy", "--to", "env:SHEETQ_TEST_COPY_TARGET", "--data", dir.Root)
	if code != 0 {
		t.Fatalf("copy: exit %d\n%s%s", code, out, errOut)
	}
	oneLine(t, out, secret)
	if !strings.Contains(out, "copied 2 jobs and ") || !strings.Contains(out, "mysql://") {
		t.Fatalf("copy said %q", out)
	}
	st, err := mysql.Open(t.Context(), target, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range ids {
		j, err := st.Get(t.Context(), id)
		if err != nil || j.Status != store.StatusSucceeded || j.FileName != id+".xlsx" {
			t.Fatalf("copied job %s = %+v, %v", id, j, err)
		}
	}

	out, errOut, code = runCLI(t, "doctor", "--data", dir.Root, "--store", target)
	if code != 0 || !strings.HasPrefix(out, "ok: "+dir.Root+", mysql://") {
		t.Fatalf("doctor on the copy: exit %d\n%s%s", code, out, errOut)
	}
	oneLine(t, out, secret)

	_, errOut, code = runCLI(t, "store", "copy", "--to", target, "--data", dir.Root)
	if code != 1 || !strings.Contains(errOut, "already holds jobs") {
		t.Fatalf("second copy: exit %d, %q; want 1 and a refusal", code, errOut)
	}
	oneLine(t, errOut, secret)

	if err := os.WriteFile(dir.Config(), []byte("[store]\nurl = \"env:SHEETQ_TEST_COPY_TARGET\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, "backup", filepath.Join(t.TempDir(), "backup.db"), "--data", dir.Root)
	if code != 1 || !strings.Contains(errOut, "mysqldump") {
		t.Fatalf("backup of a MySQL store: exit %d, %q; want 1 and mysqldump", code, errOut)
	}
	oneLine(t, errOut, secret)
}

// TestDoctorMySQLProblems: doctor names an empty database, a session that may not
// write, and a server it cannot reach, one line each, exit 1, without the password.
func TestDoctorMySQLProblems(t *testing.T) {
	dir, _ := doctorDir(t, 1)
	empty := mysqltest.URL(t, mysqltest.FreshDatabase(t))
	out, _, code := runCLI(t, "doctor", "--data", dir.Root, "--store", empty)
	if code != 1 || !strings.Contains(out, "database: mysql://") || !strings.Contains(out, "no sheetq tables") || strings.Contains(out, "orphan_file") {
		t.Fatalf("doctor on an empty database: exit %d\n%s", code, out)
	}
	oneLine(t, out, password(t, empty))

	target := mysqltest.URL(t, mysqltest.FreshDatabase(t))
	st, err := mysql.Open(t.Context(), target, mysql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	u, _ := url.Parse(target)
	q := u.Query()
	q.Set("tx_read_only", "1") // MariaDB's name; MySQL 8's is transaction_read_only
	u.RawQuery = q.Encode()
	out, _, code = runCLI(t, "doctor", "--data", dir.Root, "--store", u.String())
	if code != 1 || !strings.Contains(out, "cannot write") {
		t.Fatalf("doctor on a read-only session: exit %d\n%s", code, out)
	}

	out, _, code = runCLI(t, "doctor", "--data", dir.Root, "--store", "mysql://nobody:hunter2@127.0.0.1:1/none?timeout=5s")
	if code != 1 || !strings.Contains(out, "database: mysql://nobody:xxxxx@127.0.0.1:1/") {
		t.Fatalf("doctor on an unreachable store: exit %d\n%s", code, out)
	}
	oneLine(t, out, "hunter2")
}
