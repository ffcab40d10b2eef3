package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// The store's tests use storetest's helpers under short names.
type clock = storetest.Clock

var (
	newClock  = storetest.NewClock
	openAt    = storetest.Open
	rawDB     = storetest.RawDB
	nextID    = storetest.NextID
	enqueue   = storetest.Enqueue
	claim     = storetest.Claim
	get       = storetest.Get
	events    = storetest.Events
	eventData = storetest.EventData
)

// evSummary is what an event says, without its id and time.
type evSummary struct {
	Type    string
	Status  store.Status
	Attempt int
}

func summarize(evs []store.Event) []evSummary {
	out := make([]evSummary, len(evs))
	for i, e := range evs {
		out[i] = evSummary{e.Type, e.Status, e.Attempt}
	}
	return out
}

// openStore opens a migrated store on a fresh file in t.TempDir and closes it at cleanup.
func openStore(t testing.TB, opts sqlite.Options) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	return openAt(t, path, opts), path
}

func TestMigrationsApplyOnceAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := enqueue(t, st, store.NewJob{})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	migrations, _ := filepath.Glob("migrations/*.sql")
	if len(migrations) == 0 {
		t.Fatal("no migrations found")
	}
	for range 2 { // reopening must not re-run anything, however often
		st := openAt(t, path, sqlite.Options{})
		if err := driverOf(st).Check(ctx); err != nil {
			t.Fatal(err)
		}
		if got := get(t, st, j.ID); got.ID != j.ID || got.Status != store.StatusPending {
			t.Fatalf("job after reopen = %+v", got)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}

	db := rawDB(t, path)
	rows, err := db.Query(`SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if len(names) != len(migrations) {
		t.Fatalf("schema_migrations = %v, want one row per file in %v", names, migrations)
	}
	for i, m := range migrations {
		if names[i] != filepath.Base(m) {
			t.Fatalf("migration %d recorded as %q, want %q", i, names[i], filepath.Base(m))
		}
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
}

func TestOpenPathWithURICharacters(t *testing.T) {
	// A data directory may be named anything; '#', '?' and '%' mean something in a
	// file: URI and must not send the store to another file.
	dir := filepath.Join(t.TempDir(), "exports #2 ?100%")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sheetq.db")
	st := openAt(t, path, sqlite.Options{})
	j := enqueue(t, st, store.NewJob{})
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not created where asked: %v", err)
	}
	if got := get(t, st, j.ID); got.ID != j.ID {
		t.Fatalf("get = %+v", got)
	}
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("jobs in %s = %d, %v; want 1", path, n, err)
	}
}
