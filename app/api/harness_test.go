package api_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"sheetq/app/api"
	"sheetq/app/audit"
	"sheetq/app/middleware"
	"sheetq/app/schedules"
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// The API's harness: its handler built from real parts (apptest.Parts: a migrated
// SQLite file in t.TempDir(), the export kind over the built-in demo report, an engine,
// the exports and schedules services), behind the real middleware, served by httptest.
// What crosses packages (the event streams, webhooks announced by the store, the
// composition itself) is tested in package app.

// testOpts tunes newTestServer; the zero value is a loopback server without a token.
type testOpts struct {
	Token       string
	MaxAttempts int
	// Now, if set, is the clock of the store and the engine.
	Now func() time.Time
	// Idle leaves the engine stopped: accepted jobs stay PENDING.
	Idle bool
	// Log, if set, receives the server's logs (at debug level) instead of the test output.
	Log io.Writer
	// Webhooks configures the webhook kind; the zero value has no secret, so a request
	// with a webhook is refused.
	Webhooks webhook.Config
	// Sources are the export kind's sources beside the demo (apptest.Options.Sources).
	Sources map[string]export.Source
	// Audit records the exports' requests in an audit log, served at /api/v1/audit, as
	// the app does; false keeps none.
	Audit bool
}

// testServer is the API over real parts, with its handler served by httptest.
type testServer struct {
	*apptest.Client
	t      *testing.T
	dir    datadir.Dir
	store  *store.Store
	engine *jobs.Engine
	sched  *schedules.Service
}

// openStore opens the migrated SQLite file of a test: the one place this package's
// tests open a store.
func openStore(dir datadir.Dir, now func() time.Time) (*store.Store, error) {
	return sqlite.Open(context.Background(), dir.DB(), sqlite.Options{Now: now})
}

// newTestServer builds the API's handler and starts what it needs (the catalog, the
// engine unless Idle, the schedules service); all of it stops when the test ends.
func newTestServer(t *testing.T, opts testOpts) *testServer {
	t.Helper()
	p := apptest.NewParts(t, apptest.Options{Open: openStore, Now: opts.Now, Log: opts.Log,
		MaxAttempts: opts.MaxAttempts, Webhooks: &opts.Webhooks, Sources: opts.Sources})
	mw := p.Middleware(opts.Token, middleware.Config{})
	var log *audit.Log
	if opts.Audit {
		log = audit.New(p.Store, p.Log)
		p.Exports.Audit = log
	}
	a := api.New(api.Config{
		Exports: p.Exports, Catalog: p.Catalog, Webhooks: p.Webhooks, Gate: p.Engine.Config().Gate, Middleware: mw,
		Metrics: p.Metrics, DataDir: p.Dir.Root, ExportsDir: p.Dir.Exports(), Version: "test", Log: p.Log,
		Problems: p.Problems(), Schedules: p.Schedules, Audit: log,
	})
	mux := http.NewServeMux()
	a.Routes(mux)

	if !opts.Idle {
		p.StartEngine()
	}
	p.StartSchedules()
	c := apptest.Serve(t, mw.Wrap(mux, p.Metrics.Instrument(mux)))
	return &testServer{Client: c, t: t, dir: p.Dir, store: p.Store, engine: p.Engine, sched: p.Schedules}
}

// jobCount is the number of jobs in the store, whatever their state.
func (ts *testServer) jobCount() int { return apptest.JobCount(ts.t, ts.store) }

// cancel cancels a job and waits until it is CANCELED.
func (ts *testServer) cancel(id string) {
	ts.t.Helper()
	apptest.Cancel(ts.t, ts.engine, id)
	ts.WaitStatus(id, store.StatusCanceled)
}
