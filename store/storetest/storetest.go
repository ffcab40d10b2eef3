// Package storetest has test helpers for code that runs against the store's SQLite file.
package storetest

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// HoldWriteLock takes SQLite's write lock on the file at path from a connection of its
// own, as another process would (sheetq backup, an sqlite3 shell), once the writes in
// progress let it. Until release, the store's transactions wait for it (busy_timeout)
// and fail with a busy error when that runs out. release is also called at cleanup.
func HoldWriteLock(t testing.TB, path string) (release func()) {
	t.Helper()
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		conn.Close()
		db.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Error(err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}
