package mysql_test

import (
	"context"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/storetest"
	"sheetq/store/storetest/conformance"
	"sheetq/store/storetest/mysqltest"
)

// newClock is the store's test clock: it stands still unless moved, as the suite needs,
// at whole milliseconds, as the suite compares stamps after truncating to them.
func newClock() *storetest.Clock {
	return storetest.ClockAt(time.Now().UTC().Truncate(time.Millisecond))
}

// TestConformance runs the store suite, which every driver must pass, against MySQL or
// MariaDB: each case on a migrated database of its own, on a clock the suite moves.
func TestConformance(t *testing.T) {
	mysqltest.DSN(t)
	conformance.Run(t, conformanceHarness)
}

// TestConformanceReads runs the suite's read cases.
func TestConformanceReads(t *testing.T) {
	mysqltest.DSN(t)
	conformance.RunReads(t, conformanceHarness)
}

// TestConformanceSchedules runs the schedules cases.
func TestConformanceSchedules(t *testing.T) {
	mysqltest.DSN(t)
	conformance.RunSchedules(t, conformanceHarness)
}

// TestConformanceAudit runs the audit log's and the people's cases.
func TestConformanceAudit(t *testing.T) {
	mysqltest.DSN(t)
	conformance.RunAudit(t, conformanceHarness)
}

// conformanceHarness is a store on a migrated database of its own, on a clock the suite
// moves.
func conformanceHarness(t *testing.T, o conformance.Options) conformance.Harness {
	clk := newClock()
	dsn := mysqltest.FreshDatabase(t)
	open := func(t *testing.T) store.Driver {
		d, err := mysql.OpenDriver(context.Background(), dsn, mysql.Options{TestClock: clk.Now})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return d
	}
	return conformance.Driven(t, o, open, clk.Now, clk.Advance)
}
