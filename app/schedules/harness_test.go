package schedules_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"sheetq/app/exports"
	"sheetq/app/schedules"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/sqlite"
	"sheetq/store/storetest/pgtest"
)

// The schedules service's harness: the service over real parts (a migrated SQLite file
// in t.TempDir(), or a fresh PostgreSQL schema; the export kind over the built-in demo
// report and the reports folder; an engine; the exports service), with its firing loop
// not started: each test fires by hand (FireDue) between moves of its clock. What goes
// through HTTP is tested in app/api and app/web; two nodes and the config file's
// schedules through app.New in package app.

// testOpts tunes newHarness; the zero value is SQLite, the real clock, a running engine.
type testOpts struct {
	// Now, if set, is the clock of the store, the engine and the service.
	Now func() time.Time
	// Store, if set, is a PostgreSQL DSN (pgtest.FreshSchema) instead of SQLite.
	Store string
	// Idle leaves the engine stopped: fired exports stay PENDING.
	Idle bool
}

// harness is the schedules service and what it stands on.
type harness struct {
	t      *testing.T
	parts  *apptest.Parts
	dir    datadir.Dir
	store  *store.Store
	engine *jobs.Engine
	cat    *export.Catalog
	svc    *exports.Service
	sched  *schedules.Service
}

// opener opens the test's store: the one place this package's tests open one, on
// PostgreSQL when dsn is set.
func opener(dsn string) func(datadir.Dir, func() time.Time) (*store.Store, error) {
	return func(dir datadir.Dir, now func() time.Time) (*store.Store, error) {
		if dsn != "" {
			return pg.Open(context.Background(), dsn, pg.Options{TestClock: now})
		}
		return sqlite.Open(context.Background(), dir.DB(), sqlite.Options{Now: now})
	}
}

// newHarness builds the service and starts what it needs (the catalog, the engine
// unless Idle); all of it stops when the test ends.
func newHarness(t *testing.T, opts testOpts) *harness {
	t.Helper()
	p := apptest.NewParts(t, apptest.Options{Open: opener(opts.Store), Now: opts.Now})
	if !opts.Idle {
		p.StartEngine()
	}
	return &harness{t: t, parts: p, dir: p.Dir, store: p.Store, engine: p.Engine, cat: p.Catalog, svc: p.Exports, sched: p.Schedules}
}

// onBothStores runs fn on SQLite and on PostgreSQL (skipped without its test database).
func onBothStores(t *testing.T, fn func(t *testing.T, storeURL string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "") })
	t.Run("postgres", func(t *testing.T) { fn(t, pgtest.FreshSchema(t)) })
}

// create keeps in as a new schedule, requiring it to be accepted.
func (h *harness) create(in schedules.Input) store.Schedule {
	h.t.Helper()
	sc, err := h.sched.Create(context.Background(), in, "")
	if err != nil {
		h.t.Fatalf("create schedule %+v: %v", in, err)
	}
	return sc
}

// get reads schedule id, which must exist.
func (h *harness) get(id string) store.Schedule {
	h.t.Helper()
	sc, err := h.sched.Get(context.Background(), id)
	if err != nil {
		h.t.Fatalf("get schedule %s: %v", id, err)
	}
	return sc
}

// firings are the exports schedule id's firings made, as GET
// /api/v1/schedules/{id}/exports shows them.
func (h *harness) firings(id string) []apiv1.Job {
	h.t.Helper()
	return h.parts.Firings(h.get(id))
}

// fireDue fires what is due and requires want firings.
func (h *harness) fireDue(want int, what string) {
	h.t.Helper()
	if n, err := h.sched.FireDue(context.Background()); err != nil || n != want {
		h.t.Fatalf("FireDue %s: %d, %v; want %d", what, n, err, want)
	}
}

// waitStatus polls export id until its status is one of want and returns it.
func (h *harness) waitStatus(id string, want ...store.Status) apiv1.Job {
	h.t.Helper()
	return h.parts.WaitExport(id, want...)
}

// writeReport puts a report file in the reports folder and waits until the catalog
// serves it.
func (h *harness) writeReport(name, text string) {
	h.t.Helper()
	apptest.WriteReport(h.t, h.dir, name, text)
	id := name[:len(name)-len(filepath.Ext(name))]
	apptest.WaitFor(h.t, 10*time.Second, func() (bool, string) {
		_, err := h.cat.Report(id)
		return err == nil, fmt.Sprintf("%s not loaded: %v", id, err)
	})
}

// declaredHere lets Declare delete any declared schedule the file no longer declares,
// as a node on its own store does.
func declaredHere(string) bool { return true }
