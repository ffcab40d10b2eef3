package web_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"sheetq/app/api"
	"sheetq/app/exports"
	"sheetq/app/middleware"
	"sheetq/app/schedules"
	"sheetq/app/web"
	"sheetq/assets"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// The pages' harness: their handler built from real parts (a migrated SQLite file in
// t.TempDir(), the export kind over the built-in demo report, an engine, the exports
// and schedules services, the metrics that sample the queue), behind the real
// middleware, served by httptest. Exports a test needs are made through the exports
// service, as the API makes them; what crosses packages (a page and the API answering
// alike, the event streams) is tested in package app.

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
	// OnSignIn is the middleware's sign-in hook (the audit log's).
	OnSignIn func(context.Context, middleware.SignInEvent) error
	// API serves the JSON API beside the pages on one mux, as the app does, and gives
	// the pages its EncryptedFile (the export page's "Download with a password").
	API bool
}

// testServer is the pages over real parts, with its handler served by httptest.
type testServer struct {
	*apptest.Client
	t      *testing.T
	parts  *apptest.Parts
	dir    datadir.Dir
	store  *store.Store
	engine *jobs.Engine
	sched  *schedules.Service
	svc    *exports.Service
}

// openStore opens the migrated SQLite file of a test: the one place this package's
// tests open a store.
func openStore(dir datadir.Dir, now func() time.Time) (*store.Store, error) {
	return sqlite.Open(context.Background(), dir.DB(), sqlite.Options{Now: now})
}

// newTestServer builds the pages' handler and starts what it needs (the catalog, the
// metrics, the engine unless Idle, the schedules service); all of it stops when the
// test ends.
func newTestServer(t *testing.T, opts testOpts) *testServer {
	t.Helper()
	p := apptest.NewParts(t, apptest.Options{Open: openStore, Now: opts.Now, Log: opts.Log,
		MaxAttempts: opts.MaxAttempts, Webhooks: &webhook.Config{}})
	var pages *web.Pages
	mw := p.Middleware(opts.Token, middleware.Config{OnSignIn: opts.OnSignIn,
		Refused: func(w http.ResponseWriter, r *http.Request, status int, title, message string) {
			pages.RenderError(w, r, status, title, message)
		}})
	cfg := web.Config{
		Exports: p.Exports, Catalog: p.Catalog, Gate: p.Engine.Config().Gate, Middleware: mw,
		DataDir: p.Dir.Root, ReportsDir: p.Dir.Reports(), Version: "test", Log: p.Log,
		Problems: p.Problems(), Schedules: p.Schedules, Metrics: p.Metrics,
	}
	mux := http.NewServeMux()
	if opts.API {
		a := api.New(api.Config{
			Exports: p.Exports, Catalog: p.Catalog, Gate: p.Engine.Config().Gate, Middleware: mw,
			Metrics: p.Metrics, DataDir: p.Dir.Root, ExportsDir: p.Dir.Exports(), Version: "test", Log: p.Log,
			Problems: p.Problems(), Schedules: p.Schedules,
		})
		a.Routes(mux)
		cfg.EncryptedFile = a.EncryptedFile
	}
	pages = web.New(cfg)
	pages.Routes(mux)
	mux.Handle("GET /assets/", assets.Handler())

	p.StartMetrics()
	if !opts.Idle {
		p.StartEngine()
	}
	p.StartSchedules()
	c := apptest.Serve(t, mw.Wrap(mux, p.Metrics.Instrument(mux)))
	return &testServer{Client: c, t: t, parts: p, dir: p.Dir, store: p.Store, engine: p.Engine, sched: p.Schedules, svc: p.Exports}
}

// The pages' server has no API unless testOpts.API: exports are made and read through
// the exports service.

func (ts *testServer) create(body string) apiv1.Job {
	ts.t.Helper()
	return ts.parts.CreateExport(body)
}

func (ts *testServer) job(id string) apiv1.Job {
	ts.t.Helper()
	return ts.parts.LoadExport(id)
}

func (ts *testServer) waitStatus(id string, want ...store.Status) apiv1.Job {
	ts.t.Helper()
	return ts.parts.WaitExport(id, want...)
}

// jobCount is the number of jobs in the store, whatever their state.
func (ts *testServer) jobCount() int { return apptest.JobCount(ts.t, ts.store) }

// cancel cancels a job and waits until it is CANCELED.
func (ts *testServer) cancel(id string) {
	ts.t.Helper()
	apptest.Cancel(ts.t, ts.engine, id)
	ts.waitStatus(id, store.StatusCanceled)
}
