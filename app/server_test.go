package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"sheetq/app/events"
	"sheetq/internal/apiv1"
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
	t   *testing.T
	url string
	hc  *http.Client
}

// newTestServer builds and starts everything, and stops it (server, engine, store) when
// the test ends.
func newTestServer(t *testing.T, opts testOpts) *testServer {
	t.Helper()
	a, hs := startTestApp(t, opts)
	return &testServer{App: a, t: t, url: hs.URL, hc: hs.Client()}
}

// testConfig is the Config of a test app: the fast engine settings below, and an
// explicit reports folder, which skips the first-run sample (seconds of generation).
func testConfig(t testing.TB, opts testOpts) Config {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if opts.Log != nil {
		log = slog.New(slog.NewTextHandler(opts.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	dir := datadir.Dir{Root: cmp.Or(opts.DataDir, t.TempDir())}
	ecfg := jobs.Config{
		Workers:       2,
		Heartbeat:     50 * time.Millisecond,
		StaleAfter:    10 * time.Second, // no recovery of live jobs on a slow -race machine
		PollInterval:  20 * time.Millisecond,
		BackoffBase:   10 * time.Millisecond,
		BackoffMax:    50 * time.Millisecond,
		ShutdownGrace: 200 * time.Millisecond,
		StallAfter:    opts.StallAfter,
	}
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

// response is a finished HTTP exchange.
type response struct {
	*http.Response
	body []byte
}

// request sends method path with body (nil for none); header values are added as given,
// so a name listed twice sends two header lines.
func (ts *testServer) request(method, path string, body io.Reader, header http.Header) response {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, body)
	if err != nil {
		ts.t.Fatalf("new request: %v", err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if host := header.Get("Host"); host != "" {
		req.Host = host
	}
	res, err := ts.hc.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{Response: res, body: b}
}

func (ts *testServer) get(path string) response {
	ts.t.Helper()
	return ts.request(http.MethodGet, path, nil, nil)
}

// post sends a JSON body to POST /api/v1/exports, with an Idempotency-Key when key is set.
func (ts *testServer) post(body, key string) response {
	ts.t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return ts.request(http.MethodPost, "/api/v1/exports", strings.NewReader(body), h)
}

// create posts body and requires a 202 with a job.
func (ts *testServer) create(body string) apiv1.Job {
	ts.t.Helper()
	res := ts.post(body, "")
	if res.StatusCode != http.StatusAccepted {
		ts.t.Fatalf("POST %s: status %d, want 202; body %s", body, res.StatusCode, res.body)
	}
	return decodeJob(ts.t, res)
}

// job fetches GET /api/v1/exports/{id}, requiring a 200.
func (ts *testServer) job(id string) (apiv1.Job, response) {
	ts.t.Helper()
	res := ts.get("/api/v1/exports/" + id)
	if res.StatusCode != http.StatusOK {
		ts.t.Fatalf("GET job %s: status %d; body %s", id, res.StatusCode, res.body)
	}
	return decodeJob(ts.t, res), res
}

// waitStatus polls the job until its status is one of want and returns it.
func (ts *testServer) waitStatus(id string, want ...store.Status) (apiv1.Job, response) {
	ts.t.Helper()
	var (
		j   apiv1.Job
		res response
	)
	waitFor(ts.t, 20*time.Second, func() (bool, string) {
		j, res = ts.job(id)
		return slices.Contains(want, store.Status(j.Status)), fmt.Sprintf("job %s is %s (attempt %d, error %+v), want %v",
			id, j.Status, j.Attempt, j.Error, want)
	})
	return j, res
}

// jobCount is the number of jobs in the store, whatever their state.
func (ts *testServer) jobCount() int {
	ts.t.Helper()
	counts, err := ts.store.Counts(context.Background())
	if err != nil {
		ts.t.Fatalf("counts: %v", err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// cancel cancels a job through the engine and waits until it is CANCELED, so that no
// execution outlives the test.
func (ts *testServer) cancel(id string) {
	ts.t.Helper()
	if _, err := ts.engine.Cancel(context.Background(), id); err != nil {
		ts.t.Fatalf("cancel %s: %v", id, err)
	}
	ts.waitStatus(id, store.StatusCanceled)
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

func decodeJob(t *testing.T, res response) apiv1.Job {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, res.body)
	}
	var j apiv1.Job
	if err := json.Unmarshal(res.body, &j); err != nil {
		t.Fatalf("decode job: %v; body %s", err, res.body)
	}
	if j.ID == "" {
		t.Fatalf("job without id: %s", res.body)
	}
	return j
}

// checkProblem requires an RFC 9457 problem with the given status and code, and returns
// its members.
func checkProblem(t *testing.T, res response, status int, code string) map[string]any {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", res.StatusCode, status, res.body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, res.body)
	}
	var p map[string]any
	if err := json.Unmarshal(res.body, &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, res.body)
	}
	for _, k := range []string{"type", "title", "detail", "code"} {
		if s, _ := p[k].(string); s == "" {
			t.Errorf("problem member %q missing or empty: %s", k, res.body)
		}
	}
	if got, _ := p["status"].(float64); int(got) != status {
		t.Errorf("problem status %v, want %d", p["status"], status)
	}
	if code != "" && p["code"] != code {
		t.Errorf("problem code %v, want %q; detail %v", p["code"], code, p["detail"])
	}
	return p
}
