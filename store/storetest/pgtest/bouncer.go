package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BouncerSchema is the schema of PgBouncer's role: .ci/databases sets it as the role's
// search_path, since PgBouncer refuses search_path in the URL (docs/several-nodes.md).
const BouncerSchema = "pgb"

// Bouncer returns two DSNs of the role that .ci/databases makes for its PgBouncer in
// transaction mode: viaBouncer goes through PgBouncer, direct straight to the server. It
// skips the test without them, except in CI, where a missing one is a broken setup.
//
// Every test through PgBouncer shares the role's one schema: Bouncer empties it first
// (through direct, as PgBouncer could hand a DROP to any server connection), so a test
// that calls it must not run in parallel with another that does. Tests of other
// packages, which go test runs in other processes at the same time, wait: Bouncer holds
// an advisory lock on the server until the test ends (so a test calls it once).
func Bouncer(t testing.TB) (viaBouncer, direct string) {
	t.Helper()
	viaBouncer, direct = os.Getenv("SHEETQ_TEST_PGBOUNCER_DSN"), os.Getenv("SHEETQ_TEST_PGBOUNCER_DIRECT_DSN")
	if viaBouncer == "" || direct == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SHEETQ_TEST_PGBOUNCER_DSN or SHEETQ_TEST_PGBOUNCER_DIRECT_DSN is not set; CI runs .ci/databases first")
		}
		t.Skip(`SHEETQ_TEST_PGBOUNCER_DSN is not set; dbenv=$(bash .ci/databases) && eval "$dbenv" to run this test`)
	}
	lockBouncer(t, direct)
	ResetBouncerSchema(t, direct)
	return viaBouncer, direct
}

// lockBouncer takes the session advisory lock of the tests through PgBouncer on a
// connection of its own, waiting for another process's test to end, and releases it
// (with the connection) when t ends.
func lockBouncer(t testing.TB, direct string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL as PgBouncer's role: %v", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('sheetq pgbouncer tests', 0))`); err != nil {
		conn.Close(context.Background())
		t.Fatalf("wait %s for the other tests through PgBouncer: %v", lockWait, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) }) // ending the session releases the lock
}

// lockWait bounds the wait for other packages' tests through PgBouncer: their longest,
// the store suite, takes about ten seconds.
const lockWait = 5 * time.Minute

// ResetBouncerSchema drops the role's schema with everything in it and creates it empty,
// through direct: a store opened through PgBouncer afterwards migrates a fresh schema.
func ResetBouncerSchema(t testing.TB, direct string) {
	t.Helper()
	exec(t, direct, `DROP SCHEMA IF EXISTS `+BouncerSchema+` CASCADE; CREATE SCHEMA `+BouncerSchema)
}

// BouncerSession is Bouncer with the role's DSN through the same PgBouncer in session
// mode, which keeps one server connection per client (LISTEN and prepared statements
// work), instead of the one in transaction mode: the same rule against parallel tests
// holds.
func BouncerSession(t testing.TB) (viaBouncer, direct string) {
	t.Helper()
	_, direct = Bouncer(t)
	viaBouncer = os.Getenv("SHEETQ_TEST_PGBOUNCER_SESSION_DSN")
	if viaBouncer == "" {
		t.Fatal("SHEETQ_TEST_PGBOUNCER_SESSION_DSN is not set but SHEETQ_TEST_PGBOUNCER_DSN is; run .ci/databases again")
	}
	return viaBouncer, direct
}
