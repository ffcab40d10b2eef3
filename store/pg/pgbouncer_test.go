package pg_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/conformance"
	"sheetq/store/storetest/pgtest"
)

// The tests in this file share PgBouncer's one schema (pgtest.Bouncer): none runs in
// parallel.

// TestConformanceThroughPgBouncer runs the store suite through a real PgBouncer in
// transaction mode with Options.PollOnly, as a --poll-only node runs
// (docs/several-nodes.md): every transaction may meet another server connection. The
// role has one schema (PgBouncer refuses search_path in the URL), so each case starts by
// emptying it; the suite's cases run one after another.
func TestConformanceThroughPgBouncer(t *testing.T) {
	via, direct := pgtest.Bouncer(t)
	conformance.Run(t, func(t *testing.T, o conformance.Options) conformance.Harness {
		pgtest.ResetBouncerSchema(t, direct)
		clk := newClock()
		open := func(t *testing.T) store.Driver {
			st, err := pg.OpenDriver(context.Background(), via, pg.Options{TestClock: clk.Now, PollOnly: true})
			if err != nil {
				t.Fatalf("open store through PgBouncer: %v", err)
			}
			return st
		}
		return conformance.Driven(t, o, open, clk.Now, clk.Advance)
	})
}

// TestOpenRefusesPgBouncerInTransactionMode: without PollOnly, a store behind a pooler in
// transaction mode would fail now and then with "prepared statement does not exist" (or
// "already exists"), and its Listener would wait for wake-ups that never come: Open
// refuses it, before a migration, with ErrTransactionPooler.
func TestOpenRefusesPgBouncerInTransactionMode(t *testing.T) {
	via, direct := pgtest.Bouncer(t)
	st, err := pg.Open(ctx, via, pg.Options{})
	if err == nil {
		st.Close()
		t.Fatal("Open without PollOnly through PgBouncer in transaction mode returned no error")
	}
	if !errors.Is(err, pg.ErrTransactionPooler) {
		t.Fatalf("Open: %v, want ErrTransactionPooler", err)
	}
	// Refused before it migrated: the schema is still empty.
	if tables := countTables(t, direct); tables != 0 {
		t.Fatalf("%d tables in the schema after the refused Open, want 0", tables)
	}
}

// TestNodeThroughPgBouncerInSessionMode: a pooler in session mode keeps a server
// connection per client, so prepared statements and LISTEN work: Open does not refuse
// it, and its Listener wakes an idle node (whose poll is an hour) for a job enqueued
// by another node straight on the server.
func TestNodeThroughPgBouncerInSessionMode(t *testing.T) {
	session, direct := pgtest.BouncerSession(t)
	q := "q-" + rand.Text()[:8]
	ran := make(chan string, 1)
	b, _ := newNode(t, session, q, pg.Options{}, time.Hour, true, ranHandler(ran), nil)
	a := openStore(t, direct, pg.Options{})
	b.waitIdle(t, 2)
	j := enqueueIn(t, a, q)
	if got := recv(t, "the node behind PgBouncer to run the job", ran); got != j.ID {
		t.Fatalf("the node ran %s, want %s", got, j.ID)
	}
	waitStatus(t, a, j.ID, store.StatusSucceeded)
}

// countTables is the number of tables in the schema that dsn's role finds first.
func countTables(t *testing.T, dsn string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
