package app

import (
	"cmp"
	"context"
	"io"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"sheetq/app/events"
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// testOpts tunes newTestServer; the zero value is a loopback server without a token.
type testOpts struct {
	Token       string
	MaxAttempts int
	// Now, if set, is the clock of the store and the engine.
	Now func() time.Time
	// Hub tunes the event hub (buffers, keep-alive, progress interval).
	Hub events.Config
	// Webhooks configures webhook delivery; the zero value sends none (no secret).
	Webhooks webhook.Config
	// Tokens, BaseURL and TrustedProxies are the Config fields of the same names.
	Tokens         []Token
	BaseURL        string
	TrustedProxies []netip.Prefix
	// Log, if set, receives the server's logs (at debug level) instead of the test output.
	Log io.Writer
	// BusyTimeout is the store's busy_timeout (default: the production 10 s).
	BusyTimeout time.Duration
	// StallAfter turns on the engine's stall guard.
	StallAfter time.Duration
	// Idle leaves the engine stopped: accepted jobs stay PENDING.
	Idle bool
	// DataDir, if set, is the data directory instead of a fresh t.TempDir().
	DataDir string
	// BodyTimeout is the time a client has to send a request body (default: production).
	BodyTimeout time.Duration
	// Engine, if set, tunes the worker pool instead of the fast test settings.
	Engine *jobs.Config
	// Kinds are further job kinds, registered before the engine starts.
	Kinds map[string]jobs.Handler
	// Store, Files and Node are the Config fields StoreURL, FilesURL and Node: several
	// nodes on one PostgreSQL database (pgtest.FreshSchema) and one bucket
	// (objstoretest.Bucket), whose credentials FilesAccessKey and FilesSecretKey give.
	Store, Files, Node             string
	FilesAccessKey, FilesSecretKey string
	// PollOnly is Config.PollOnly (--poll-only), for a Store behind PgBouncer.
	PollOnly bool
}

// testServer is the real app, built by New as Run builds it, over a migrated SQLite file
// in t.TempDir(), with its handler served by httptest.
type testServer struct {
	*App
	*apptest.Client
	t *testing.T
}

// newTestServer builds and starts everything, and stops it (server, engine, store) when
// the test ends.
func newTestServer(t *testing.T, opts testOpts) *testServer {
	t.Helper()
	a, hs := startTestApp(t, opts)
	return &testServer{App: a, Client: apptest.NewClient(t, hs), t: t}
}

// testConfig is the Config of a test app: the fast engine settings below, and an
// explicit reports folder, which skips the first-run sample (seconds of generation).
func testConfig(t testing.TB, opts testOpts) Config {
	t.Helper()
	log := apptest.Logger(t, opts.Log)
	dir := datadir.Dir{Root: cmp.Or(opts.DataDir, t.TempDir())}
	ecfg := apptest.EngineConfig()
	ecfg.StallAfter = opts.StallAfter
	if opts.Engine != nil {
		ecfg = *opts.Engine
	}
	webhooks := opts.Webhooks
	cfg := Config{
		Addr: "127.0.0.1:0", DataDir: dir.Root, ReportsDir: dir.Reports(), Token: opts.Token,
		MaxAttempts: opts.MaxAttempts, Version: "test", Logger: log,
		Tokens: opts.Tokens, BaseURL: opts.BaseURL, TrustedProxies: opts.TrustedProxies,
		Engine: ecfg, Test: &TestHooks{BodyTimeout: opts.BodyTimeout, Now: opts.Now, BusyTimeout: opts.BusyTimeout, Events: opts.Hub, Webhooks: &webhooks, Idle: opts.Idle},
		StoreURL: opts.Store, FilesURL: opts.Files, Node: opts.Node, PollOnly: opts.PollOnly,
	}
	if opts.FilesAccessKey != "" {
		// The bucket's credentials come from the config file's [files], as an operator's would.
		cfg.File = &FileConfig{Files: FilesConfig{AccessKey: opts.FilesAccessKey, SecretKey: opts.FilesSecretKey}}
	}
	return cfg
}

// startTestApp is newTestServer for any testing.TB (a fuzz target's *testing.F too): New,
// the extra kinds, Start, and an httptest server on Handler; Stop at cleanup.
func startTestApp(t testing.TB, opts testOpts) (*App, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	a, err := New(ctx, testConfig(t, opts))
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	t.Cleanup(a.Stop)
	for name, h := range opts.Kinds {
		a.engine.Register(name, h)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start app: %v", err)
	}
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)
	// Runs before hs.Close (cleanups run last first): open event streams end, so Close
	// does not wait for them.
	t.Cleanup(a.hub.Stop)
	return a, hs
}

// jobCount is the number of jobs in the store, whatever their state.
func (ts *testServer) jobCount() int { return apptest.JobCount(ts.t, ts.store) }

// cancel cancels a job and waits until it is CANCELED.
func (ts *testServer) cancel(id string) {
	ts.t.Helper()
	apptest.Cancel(ts.t, ts.engine, id)
	ts.WaitStatus(id, store.StatusCanceled)
}
