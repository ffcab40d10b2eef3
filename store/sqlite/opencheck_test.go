package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// damagedFile writes a migrated database with many jobs, closes it, and hands back its
// path and page count for the test to damage.
func damagedFile(t *testing.T) (path string, pages int64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "sheetq.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.FillJobs(t, st, 2000)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, pages = storetest.PageSize(t, path)
	if pages < 200 {
		t.Fatalf("the file has %d pages; want enough to damage some in the middle", pages)
	}
	return path, pages
}

// integrityProblems runs SQLite's full check through a read-only store, as doctor does.
func integrityProblems(t *testing.T, path string) []string {
	t.Helper()
	ro, err := sqlite.Open(context.Background(), path, sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	problems, err := driverOf(ro).IntegrityCheck(context.Background())
	if err != nil {
		return []string{err.Error()}
	}
	return problems
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// A few zeroed pages in the middle of a file with many jobs (a disk or a copy that lost
// blocks): SQLite opens it and writes into it without a word, because no statement
// reads those pages. Open refuses it, says which pages, and writes nothing into it;
// with --check-db=off it still opens, for whoever must get data out.
func TestOpenRefusesZeroedPages(t *testing.T) {
	path, pages := damagedFile(t)
	storetest.ZeroPages(t, path, pages/2, 4)
	if problems := integrityProblems(t, path); len(problems) == 0 {
		t.Fatal("integrity_check finds nothing wrong: the damage did not hit pages in use")
	}
	before := fileSum(t, path)

	for _, mode := range []sqlite.CheckMode{sqlite.CheckQuick, sqlite.CheckFull} {
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{Check: mode})
		if err == nil {
			st.Close()
			t.Fatalf("%s: Open accepted a file with zeroed pages", mode)
		}
		var ce *sqlite.CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || ce.Path != path {
			t.Fatalf("%s: error %v (%T), want a *sqlite.CorruptError for %s", mode, err, err, path)
		}
		if msg := err.Error(); !strings.Contains(msg, "4 pages in use are all zeros") {
			t.Errorf("%s: error %q does not say which pages are zeros", mode, msg)
		}
	}
	if fileSum(t, path) != before {
		t.Error("a refused file was written to")
	}

	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Check: sqlite.CheckOff})
	if err != nil {
		t.Fatalf("--check-db=off: %v", err)
	}
	if got := driverOf(st).OpenCheck(); got.Mode != sqlite.CheckOff {
		t.Errorf("OpenCheck = %+v, want mode off", got)
	}
	st.Close()
}

// Damage that is not zeros (random bytes over pages in use) is found by SQLite's own
// check, quick or full.
func TestOpenRefusesGarbledPages(t *testing.T) {
	path, pages := damagedFile(t)
	storetest.GarblePages(t, path, pages/2, 3)
	for _, mode := range []sqlite.CheckMode{sqlite.CheckQuick, sqlite.CheckFull} {
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{Check: mode})
		if err == nil {
			st.Close()
			t.Fatalf("%s: Open accepted a file with garbled pages", mode)
		}
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", mode, err)
		}
		t.Logf("%s: %v", mode, err)
	}
}

// Free pages may hold anything, zeros too: a file whose free pages are zeroed is healthy
// (integrity_check agrees) and opens. The page scan must not take them for damage.
func TestOpenAcceptsZeroedFreePages(t *testing.T) {
	path, _ := damagedFile(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM job_events; DELETE FROM jobs WHERE rowid % 4 <> 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	size, _ := storetest.PageSize(t, path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h, trunk := make([]byte, 100), make([]byte, size)
	_, err = f.ReadAt(h, 0)
	if err == nil {
		_, err = f.ReadAt(trunk, int64(binary.BigEndian.Uint32(h[32:36])-1)*size)
	}
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	leaves := int(binary.BigEndian.Uint32(trunk[4:8]))
	if leaves < 10 {
		t.Fatalf("the first freelist page lists %d pages; want more free pages", leaves)
	}
	for i := range leaves {
		storetest.ZeroPages(t, path, int64(binary.BigEndian.Uint32(trunk[8+4*i:])), 1)
	}
	if problems := integrityProblems(t, path); len(problems) > 0 {
		t.Fatalf("integrity_check: %v", problems)
	}
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("a healthy file with %d zeroed free pages was refused: %v", leaves, err)
	}
	if got := driverOf(st).OpenCheck(); !got.Complete || got.Pages == 0 || got.Took <= 0 {
		t.Errorf("OpenCheck = %+v, want a complete check of the file", got)
	}
	st.Close()
}

// A file too large for the start-up budget (here: a budget of nothing) opens, says the
// check is not complete, and FinishCheck finds the damage later; readiness then fails.
func TestFinishCheckFindsDamageAfterStart(t *testing.T) {
	path, pages := damagedFile(t)
	storetest.GarblePages(t, path, pages/2, 3)
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{CheckBudget: time.Nanosecond})
	if err != nil {
		t.Fatalf("Open with no time to check: %v", err)
	}
	defer st.Close()
	if got := driverOf(st).OpenCheck(); got.Complete {
		t.Fatalf("OpenCheck = %+v, want incomplete", got)
	}
	if err := driverOf(st).WriteHealth(); err != nil {
		t.Fatalf("WriteHealth before the check: %v", err)
	}
	if err := driverOf(st).FinishCheck(context.Background()); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("FinishCheck = %v, want ErrCorrupt", err)
	}
	if err := driverOf(st).WriteHealth(); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("WriteHealth after the check = %v, want ErrCorrupt", err)
	}
	if err := st.ProbeWrite(context.Background()); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("a probe write cleared damage: %v", err)
	}
}

// Not an SQLite file at all, or a file cut short: refused, before SQLite touches it.
func TestOpenRefusesWhatIsNoDatabase(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.db")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(context.Background(), text, sqlite.Options{}); !errors.Is(err, store.ErrCorrupt) ||
		!strings.Contains(err.Error(), "does not begin with the SQLite header") {
		t.Errorf("a text file: %v", err)
	}

	path, pages := damagedFile(t)
	size, _ := storetest.PageSize(t, path)
	if err := os.Truncate(path, (pages/2)*size+100); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("a file cut short: %v", err)
	}
}

func TestParseCheckMode(t *testing.T) {
	for in, want := range map[string]sqlite.CheckMode{"quick": sqlite.CheckQuick, "FULL": sqlite.CheckFull, " off ": sqlite.CheckOff} {
		if got, err := sqlite.ParseCheckMode(in); err != nil || got != want {
			t.Errorf("ParseCheckMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := sqlite.ParseCheckMode("deep"); err == nil {
		t.Error("ParseCheckMode(deep) accepted")
	}
}
