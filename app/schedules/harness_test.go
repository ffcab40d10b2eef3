package schedules_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sheetq/app/exports"
	"sheetq/app/schedules"
	"sheetq/internal/apiv1"
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
	dir    datadir.Dir
	store  *store.Store
	engine *jobs.Engine
	cat    *export.Catalog
	svc    *exports.Service
	sched  *schedules.Service
}

// openStore opens the test's store: the one place this package's tests open one.
func openStore(t testing.TB, dir datadir.Dir, dsn string, now func() time.Time) *store.Store {
	t.Helper()
	var (
		st  *store.Store
		err error
	)
	if dsn != "" {
		st, err = pg.Open(context.Background(), dsn, pg.Options{TestClock: now})
	} else {
		st, err = sqlite.Open(context.Background(), dir.DB(), sqlite.Options{Now: now})
	}
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// newHarness builds the service and starts what it needs (the catalog, the engine
// unless Idle); all of it stops when the test ends.
func newHarness(t *testing.T, opts testOpts) *harness {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir := datadir.Dir{Root: t.TempDir()}
	st := openStore(t, dir, opts.Store, opts.Now)

	cat := export.NewCatalog(dir.Reports(), export.Builtin(), log)
	cat.SetQueues([]string{store.DefaultQueue})
	if err := cat.Start(ctx); err != nil {
		t.Fatalf("start catalog: %v", err)
	}
	t.Cleanup(cat.Stop)
	kind := export.New(export.Config{TmpDir: dir.Tmp(), Library: cat, Version: "test"})

	engine := jobs.New(st, jobs.Config{
		Workers:       2,
		Heartbeat:     50 * time.Millisecond,
		StaleAfter:    10 * time.Second, // no recovery of live jobs on a slow -race machine
		PollInterval:  20 * time.Millisecond,
		BackoffBase:   10 * time.Millisecond,
		BackoffMax:    50 * time.Millisecond,
		ShutdownGrace: 200 * time.Millisecond,
		TmpDir:        dir.Tmp(), ExportsDir: dir.Exports(), Logger: log, Now: opts.Now,
		Gate: jobs.NewGate(time.Now, time.Sleep),
	})
	engine.Register(export.Name, kind)
	if !opts.Idle {
		if err := engine.Start(ctx); err != nil {
			t.Fatalf("start engine: %v", err)
		}
		t.Cleanup(engine.Stop)
	}
	svc := &exports.Service{Store: st, Engine: engine, Kind: kind}
	sched := &schedules.Service{Store: st, Exports: svc, Engine: engine, Log: log, Now: opts.Now}
	return &harness{t: t, dir: dir, store: st, engine: engine, cat: cat, svc: svc, sched: sched}
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
	js, err := h.sched.Firings(context.Background(), h.get(id))
	if err != nil {
		h.t.Fatalf("firings of %s: %v", id, err)
	}
	out := make([]apiv1.Job, 0, len(js))
	for _, j := range js {
		out = append(out, export.JobJSON(j, ""))
	}
	return out
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
	var j apiv1.Job
	waitFor(h.t, 20*time.Second, func() (bool, string) {
		sj, err := h.svc.Load(context.Background(), id)
		if err != nil {
			h.t.Fatalf("load job %s: %v", id, err)
		}
		j = export.JobJSON(sj, "")
		return slices.Contains(want, store.Status(j.Status)), fmt.Sprintf("job %s is %s (error %+v), want %v", id, j.Status, j.Error, want)
	})
	return j
}

// writeReport puts a report file in the reports folder and waits until the catalog
// serves it.
func (h *harness) writeReport(name, text string) {
	h.t.Helper()
	if err := os.MkdirAll(h.dir.Reports(), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir.Reports(), name), []byte(text), 0o644); err != nil {
		h.t.Fatal(err)
	}
	id := name[:len(name)-len(filepath.Ext(name))]
	waitFor(h.t, 10*time.Second, func() (bool, string) {
		_, err := h.cat.Report(id)
		return err == nil, fmt.Sprintf("%s not loaded: %v", id, err)
	})
}

// waitFor polls cond until it holds or the deadline passes; cond's message says what was
// seen last, for the failure.
func waitFor(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s: %s", timeout, msg)
		}
		<-tick.C
	}
}

// declaredHere lets Declare delete any declared schedule the file no longer declares,
// as a node on its own store does.
func declaredHere(string) bool { return true }
