package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest/conformance"
)

// TestConformance runs the store suite, which every implementation must pass, against
// SQLite: a migrated file in t.TempDir on a clock the suite moves.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformanceHarness)
}

// TestConformanceUnqueued runs the suite against SQLite with Options.Unbatched, where
// every write is a transaction of its own instead of a place in the writer's queue (rule
// 31): the comparison mode must keep every rule too.
func TestConformanceUnqueued(t *testing.T) {
	conformance.Run(t, func(t *testing.T, o conformance.Options) conformance.Harness {
		clk := newClock()
		path := filepath.Join(t.TempDir(), "sheetq.db")
		open := func(t *testing.T) store.Driver {
			d, err := sqlite.OpenDriver(context.Background(), path, sqlite.Options{Now: clk.Now, Unbatched: true})
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			return d
		}
		return conformance.Driven(t, o, open, clk.Now, clk.Advance)
	})
}

// TestConformanceReads runs the suite's read cases, which the PostgreSQL store passes
// too, against SQLite.
func TestConformanceReads(t *testing.T) {
	conformance.RunReads(t, conformanceHarness)
}

// conformanceHarness is a store on a fresh file in t.TempDir, on a clock the suite moves.
func conformanceHarness(t *testing.T, o conformance.Options) conformance.Harness {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	open := func(t *testing.T) store.Driver {
		d, err := sqlite.OpenDriver(context.Background(), path, sqlite.Options{Now: clk.Now})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return d
	}
	return conformance.Driven(t, o, open, clk.Now, clk.Advance)
}

// TestConformanceSchedules runs the schedules cases against SQLite.
func TestConformanceSchedules(t *testing.T) {
	conformance.RunSchedules(t, conformanceHarness)
}

// driverOf is st's SQLite driver, for the tests that look behind the core at what only
// the file has.
func driverOf(st *store.Store) *sqlite.Store { return st.Driver().(*sqlite.Store) }

// TestConformanceAudit runs the audit log's and the people's cases against SQLite.
func TestConformanceAudit(t *testing.T) {
	conformance.RunAudit(t, conformanceHarness)
}
