// Package pgtest gives tests a PostgreSQL schema of their own on the test server that
// .ci/databases starts (SHEETQ_TEST_POSTGRES_DSN): the store's, the app's and the
// cluster tests share it, so that none of them shares rows with another.
package pgtest

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// DSN returns the test server's DSN, skipping the test without one, except in CI, where
// .ci/databases has started the server and a missing DSN is a broken setup.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("SHEETQ_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SHEETQ_TEST_POSTGRES_DSN is not set; CI runs .ci/databases first")
		}
		t.Skip(`SHEETQ_TEST_POSTGRES_DSN is not set; eval "$(bash .ci/databases)" to run this test`)
	}
	return dsn
}

// FreshSchema creates a schema no other test uses, drops it with everything in it when
// the test ends, and returns a DSN whose search_path (a run-time parameter of every
// connection) points at it.
func FreshSchema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	name := "sheetq_test_" + strings.ToLower(rand.Text()[:12])
	exec(t, dsn, `CREATE SCHEMA `+name)
	t.Cleanup(func() { exec(t, dsn, `DROP SCHEMA `+name+` CASCADE`) })
	return WithSearchPath(t, dsn, name)
}

func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// WithSearchPath adds search_path to a URL or a keyword/value DSN.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// EventInOpenTransaction inserts an event of job id (type typ, status) in a transaction
// it leaves open, on a connection of its own, and returns that transaction: a commit
// that comes after later events' commits, for the commit-safe cursor's tests. It is
// rolled back at the end of the test unless committed.
func EventInOpenTransaction(t testing.TB, dsn, id, typ, status string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt)
		VALUES ($1, now(), $2, $3, 0)`, id, typ, status); err != nil {
		t.Fatal(err)
	}
	return tx
}
