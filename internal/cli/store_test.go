//go:build !windows

package cli

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"sheetq/internal/objstore"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

// oneLine fails the test unless s is exactly one line that does not show secret.
func oneLine(t *testing.T, s, secret string) {
	t.Helper()
	if s == "" || strings.Count(strings.TrimSuffix(s, "\n"), "\n") != 0 {
		t.Fatalf("want one line, got %q", s)
	}
	if secret != "" && strings.Contains(s, secret) {
		t.Fatalf("the line shows the password: %q", s)
	}
}

// password is the password in a postgres:// URL ("" when none).
func password(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := u.User.Password()
	return p
}

// jobCount reads how many jobs the PostgreSQL store holds.
func jobCount(t *testing.T, dsn string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// `sheetq store copy --to env:NAME` copies a stopped server's queue into PostgreSQL and
// says so in one line without the password; doctor then checks that store, and backup
// says to use pg_dump. A second copy into the same database is refused.
func TestStoreCopyCommand(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	dir, ids := doctorDir(t, 2)
	secret := password(t, dsn)
	t.Setenv("SHEETQ_TEST_COPY_TARGET", dsn)

	out, errOut, code := runCLI(t, "store", "copy", "--to", "env:SHEETQ_TEST_COPY_TARGET", "--data", dir.Root)
	if code != 0 {
		t.Fatalf("copy: exit %d\n%s%s", code, out, errOut)
	}
	oneLine(t, out, secret)
	if !strings.Contains(out, "copied 2 jobs and ") || !strings.Contains(out, "no files") {
		t.Fatalf("copy said %q", out)
	}
	st, err := pg.Open(t.Context(), dsn, pg.Options{})
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

	out, errOut, code = runCLI(t, "doctor", "--data", dir.Root, "--store", dsn)
	if code != 0 || !strings.HasPrefix(out, "ok: "+dir.Root+", postgres://") {
		t.Fatalf("doctor on the copy: exit %d\n%s%s", code, out, errOut)
	}
	oneLine(t, out, secret)

	_, errOut, code = runCLI(t, "store", "copy", "--to", dsn, "--data", dir.Root)
	if code != 1 || !strings.Contains(errOut, "already holds jobs") {
		t.Fatalf("second copy: exit %d, %q; want 1 and a refusal", code, errOut)
	}
	oneLine(t, errOut, secret)
	if n := jobCount(t, dsn); n != 2 {
		t.Fatalf("target holds %d jobs after the refused copy", n)
	}

	// backup with the PostgreSQL store (here from the config file) writes nothing.
	if err := os.WriteFile(dir.Config(), []byte("[store]\nurl = \"env:SHEETQ_TEST_COPY_TARGET\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.db")
	_, errOut, code = runCLI(t, "backup", file, "--data", dir.Root)
	if code != 1 || !strings.Contains(errOut, "pg_dump") {
		t.Fatalf("backup of a PostgreSQL store: exit %d, %q; want 1 and pg_dump", code, errOut)
	}
	oneLine(t, errOut, secret)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("backup wrote %s: %v", file, err)
	}
}

// store copy refuses to run while a server owns the data directory: exit 1, one line
// that says so, and nothing written to the target.
func TestStoreCopyRefusedWhileServerRuns(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	dir, _ := doctorDir(t, 1)
	lock, err := dir.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := lock.SetOwner("http://127.0.0.1:8080/"); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "store", "copy", "--to", dsn, "--data", dir.Root)
	if code != 1 || !strings.Contains(errOut, "stop the server first") || !strings.Contains(errOut, "http://127.0.0.1:8080/") {
		t.Fatalf("copy beside a server: exit %d, %q", code, errOut)
	}
	oneLine(t, errOut, password(t, dsn))
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the target has %d tables after a refused copy (%v)", tables, err)
	}
}

// Bad command lines exit 2 with one line, never echoing a URL that may hold a password.
func TestStoreCopyUsage(t *testing.T) {
	dir, _ := doctorDir(t, 0)
	for _, args := range [][]string{
		{"store"},
		{"store", "move"},
		{"store", "copy", "--data", dir.Root},
		{"store", "copy", "--data", dir.Root, "--to", "redis://u:hunter2@db/x"},
		{"store", "copy", "--data", dir.Root, "--to", "mysql://u:hunter2@db"}, // no database
		{"store", "copy", "--data", dir.Root, "--to", "env:SHEETQ_TEST_UNSET_VARIABLE"},
		{"store", "copy", "--data", dir.Root, "--to", "postgres://u:hunter2@db/x", "--files", "http://bucket"},
		{"store", "copy", "--data", dir.Root, "--to", "postgres://u:hunter2@db/x", "extra"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%q: exit %d, %q; want 2", args, code, errOut)
			continue
		}
		oneLine(t, errOut, "hunter2")
	}
}

// With --files, store copy puts each finished export's file in the bucket under the key
// the S3 file store reads (jobs.ObjectKey) and records that key; doctor then checks the
// bucket (credentials from the config file's [files] table), and reports an object that
// went missing.
func TestStoreCopyFilesAndDoctor(t *testing.T) {
	dsn := pgtest.FreshSchema(t)
	e := objstoretest.Bucket(t)
	filesURL := e.URL("nodes")
	t.Setenv("SHEETQ_TEST_COPY_ACCESS", e.AccessKey)
	t.Setenv("SHEETQ_TEST_COPY_SECRET", e.SecretKey)
	dir, ids := doctorDir(t, 2)
	if err := os.WriteFile(dir.Config(), []byte("[files]\naccess_key = \"env:SHEETQ_TEST_COPY_ACCESS\"\nsecret_key = \"env:SHEETQ_TEST_COPY_SECRET\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, "store", "copy", "--to", dsn, "--files", filesURL, "--data", dir.Root)
	if code != 0 || !strings.Contains(out, "and 2 files to s3://"+e.Bucket+"/nodes") {
		t.Fatalf("copy with files: exit %d\n%s%s", code, out, errOut)
	}
	st, err := pg.Open(t.Context(), dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg, err := objstore.ParseURL(filesURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AccessKey, cfg.SecretKey = e.AccessKey, e.SecretKey
	b, err := objstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, id := range ids {
		j, err := st.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		key := jobs.ObjectKey(id, j.Attempt, id+".xlsx")
		info, err := b.Stat(t.Context(), key)
		if j.FileName != key || err != nil || info.Size != j.FileSize || info.SHA256 != j.FileSHA256 {
			t.Fatalf("job %s records %q; object %s = %+v, %v", id, j.FileName, key, info, err)
		}
		keys = append(keys, key)
	}

	out, errOut, code = runCLI(t, "doctor", "--data", dir.Root, "--store", dsn, "--files", filesURL, "--deep")
	if code != 0 || !strings.Contains(out, "s3://"+e.Bucket) || !strings.Contains(out, "2 exports, 2 files") {
		t.Fatalf("doctor on the bucket: exit %d\n%s%s", code, out, errOut)
	}
	// Nothing of the probe is left behind.
	if objs, err := b.List(t.Context(), ""); err != nil || len(objs) != 2 {
		t.Fatalf("bucket after doctor: %+v, %v; want the 2 files", objs, err)
	}

	if err := b.Delete(t.Context(), keys[0]); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, "doctor", "--data", dir.Root, "--store", dsn, "--files", filesURL)
	if code != 1 || !strings.Contains(out, "missing_file: export "+ids[0]) {
		t.Fatalf("doctor with an object gone: exit %d\n%s", code, out)
	}

	// A bucket that does not exist is a problem of its own.
	gone := strings.Replace(filesURL, "s3://"+e.Bucket+"/", "s3://"+e.Bucket+"-gone/", 1)
	out, _, code = runCLI(t, "doctor", "--data", dir.Root, "--store", dsn, "--files", gone)
	if code != 1 || !strings.Contains(out, "bucket: s3://"+e.Bucket+"-gone") || strings.Contains(out, "missing_file") {
		t.Fatalf("doctor with no bucket: exit %d\n%s", code, out)
	}
}

// doctor on a PostgreSQL database with no sheetq schema, or none at all, reports it as
// a database problem (exit 1) instead of checking the SQLite file.
func TestDoctorPostgresProblems(t *testing.T) {
	dir, _ := doctorDir(t, 1)
	empty := pgtest.FreshSchema(t)
	out, _, code := runCLI(t, "doctor", "--data", dir.Root, "--store", empty)
	if code != 1 || !strings.Contains(out, "database: postgres://") || !strings.Contains(out, "no sheetq schema") || strings.Contains(out, "orphan_file") {
		t.Fatalf("doctor on an empty database: exit %d\n%s", code, out)
	}
	oneLine(t, out, password(t, empty))

	// A migrated store whose role may not write.
	dsn := pgtest.FreshSchema(t)
	st, err := pg.Open(t.Context(), dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	out, _, code = runCLI(t, "doctor", "--data", dir.Root, "--store", u.String())
	if code != 1 || !strings.Contains(out, "cannot write") {
		t.Fatalf("doctor on a read-only store: exit %d\n%s", code, out)
	}

	out, _, code = runCLI(t, "doctor", "--data", dir.Root, "--store", "postgres://nobody:hunter2@127.0.0.1:1/none?connect_timeout=5")
	if code != 1 || !strings.Contains(out, "database: postgres://nobody:xxxxx@127.0.0.1:1/") {
		t.Fatalf("doctor on an unreachable store: exit %d\n%s", code, out)
	}
	oneLine(t, out, "hunter2")
}
