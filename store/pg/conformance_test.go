package pg_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest"
	"sheetq/store/storetest/conformance"
	"sheetq/store/storetest/pgtest"
)

// testDSN and freshSchema are pgtest's: the test server's DSN (skip without it, fail in
// CI) and a schema of the test's own, dropped when it ends.
func testDSN(t testing.TB) string     { return pgtest.DSN(t) }
func freshSchema(t testing.TB) string { return pgtest.FreshSchema(t) }

// newClock is the store's test clock: it stands still unless moved, as the suite needs,
// at whole milliseconds, as the suite compares stamps after truncating to them.
func newClock() *storetest.Clock {
	return storetest.ClockAt(time.Now().UTC().Truncate(time.Millisecond))
}

// TestConformance runs the store suite, which every implementation must pass, against
// PostgreSQL: each case on a migrated schema of its own, on a clock the suite moves.
func TestConformance(t *testing.T) {
	testDSN(t)
	conformance.Run(t, conformanceHarness)
}

// TestConformanceReads runs the suite's read cases, the SQLite store's assertions,
// against PostgreSQL.
func TestConformanceReads(t *testing.T) {
	testDSN(t)
	conformance.RunReads(t, conformanceHarness)
}

// conformanceHarness is a store on a migrated schema of its own, on a clock the suite
// moves.
func conformanceHarness(t *testing.T, o conformance.Options) conformance.Harness {
	clk := newClock()
	dsn := freshSchema(t)
	open := func(t *testing.T) store.Driver {
		d, err := pg.OpenDriver(context.Background(), dsn, pg.Options{TestClock: clk.Now})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return d
	}
	return conformance.Driven(t, o, open, clk.Now, clk.Advance)
}

// TestNodesStartingTogetherMigrateOnce: stores opened at once on a fresh schema, as
// nodes that start together, all open, and each migration is applied once.
func TestNodesStartingTogetherMigrateOnce(t *testing.T) {
	dsn := freshSchema(t)
	const nodes = 6
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stores []*store.Store
		errs   []error
	)
	start := make(chan struct{})
	for range nodes {
		wg.Go(func() {
			<-start
			st, err := pg.Open(context.Background(), dsn, pg.Options{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			stores = append(stores, st)
		})
	}
	close(start)
	wg.Wait()
	for _, st := range stores {
		defer st.Close()
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d opens failed: %v", len(errs), nodes, errs)
	}
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, versions int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != len(files) || versions != len(files) {
		t.Fatalf("schema_migrations has %d rows of %d versions, want %d once each", rows, versions, len(files))
	}
	// And every store works on it.
	for i, st := range stores {
		if _, err := st.EventsAfter(context.Background(), 0, 1); err != nil {
			t.Fatalf("store %d: %v", i, fmt.Errorf("read: %w", err))
		}
	}
}

// TestConformanceSchedules runs the schedules cases against PostgreSQL.
func TestConformanceSchedules(t *testing.T) {
	conformance.RunSchedules(t, conformanceHarness)
}

// TestConformanceAudit runs the audit log's and the people's cases against PostgreSQL.
func TestConformanceAudit(t *testing.T) {
	testDSN(t)
	conformance.RunAudit(t, conformanceHarness)
}
