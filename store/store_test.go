package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// clock is a settable clock for Options.Now; safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openStore opens a migrated store on a fresh file in t.TempDir and closes it at cleanup.
func openStore(t testing.TB, opts store.Options) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	return openAt(t, path, opts), path
}

func openAt(t testing.TB, path string, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// rawDB opens the file with a plain connection, for looking behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var idSeq struct {
	sync.Mutex
	n int
}

func nextID() string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return fmt.Sprintf("job%06d", idSeq.n)
}

func enqueue(t testing.TB, st *store.Store, nj store.NewJob) store.Job {
	t.Helper()
	if nj.ID == "" {
		nj.ID = nextID()
	}
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	if nj.Args == nil {
		nj.Args = json.RawMessage(`{}`)
	}
	j, existed, err := st.Enqueue(context.Background(), nj)
	if err != nil {
		t.Fatalf("enqueue %s: %v", nj.ID, err)
	}
	if existed {
		t.Fatalf("enqueue %s: existed = true for a new job", nj.ID)
	}
	return j
}

func claim(t testing.TB, st *store.Store, worker string) store.Job {
	t.Helper()
	j, err := st.Claim(context.Background(), worker)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return j
}

func get(t testing.TB, st *store.Store, id string) store.Job {
	t.Helper()
	j, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func events(t testing.TB, st *store.Store, id string) []store.Event {
	t.Helper()
	ev, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatalf("events %s: %v", id, err)
	}
	return ev
}

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

func eventData(t *testing.T, e store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("event %s data %q: %v", e.Type, e.Data, err)
	}
	return m
}

func TestMigrationsApplyOnceAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	st, err := store.Open(ctx, path, store.Options{})
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
		st := openAt(t, path, store.Options{})
		if err := st.Check(ctx); err != nil {
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
	st := openAt(t, path, store.Options{})
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
