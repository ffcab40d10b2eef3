package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/app/api"
	"sheetq/app/exports"
	"sheetq/app/metrics"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/app/schedules"
	"sheetq/internal/apiv1"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// The API's harness: its handler built from real parts (a migrated SQLite file in
// t.TempDir(), the export kind over the built-in demo report, an engine, the exports
// and schedules services), behind the real middleware, served by httptest. What crosses
// packages (the event streams, webhooks announced by the store, the composition
// itself) is tested in package app.

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
}

// testServer is the API over real parts, with its handler served by httptest.
type testServer struct {
	t      *testing.T
	url    string
	hc     *http.Client
	dir    datadir.Dir
	store  *store.Store
	engine *jobs.Engine
	sched  *schedules.Service
}

// openStore opens the migrated SQLite file of a test: the one place this package's
// tests open a store.
func openStore(t testing.TB, path string, now func() time.Time) *store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Now: now})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// newTestServer builds the API's handler and starts what it needs (the catalog, the
// engine unless Idle, the schedules service); all of it stops when the test ends.
func newTestServer(t *testing.T, opts testOpts) *testServer {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if opts.Log != nil {
		log = slog.New(slog.NewTextHandler(opts.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	dir := datadir.Dir{Root: t.TempDir()}
	st := openStore(t, dir.DB(), opts.Now)

	cat := export.NewCatalog(dir.Reports(), export.Builtin(), log)
	cat.SetQueues([]string{store.DefaultQueue})
	if err := cat.Start(ctx); err != nil {
		t.Fatalf("start catalog: %v", err)
	}
	t.Cleanup(cat.Stop)
	kind := export.New(export.Config{TmpDir: dir.Tmp(), Library: cat, Version: "test"})

	m := metrics.New(st, log)
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
	// As the app registers it: without a secret, a request with a webhook is refused.
	hcfg := opts.Webhooks
	hcfg.Recorder, hcfg.Logger = st, log
	hooks, err := webhook.New(hcfg)
	if err != nil {
		t.Fatalf("webhooks: %v", err)
	}
	engine.Register(webhook.Name, hooks)

	var tokens []middleware.Token
	if opts.Token != "" {
		tokens = append(tokens, middleware.Token{Name: middleware.DefaultTokenName, Secret: opts.Token})
	}
	var key []byte
	if len(tokens) > 0 {
		if key, err = middleware.LoadSessionKey(dir.SessionKey()); err != nil {
			t.Fatalf("session key: %v", err)
		}
	}
	mw, err := middleware.New(middleware.Config{Tokens: tokens, SessionKey: key, Loopback: true, Log: log})
	if err != nil {
		t.Fatalf("middleware: %v", err)
	}

	svc := &exports.Service{Store: st, Engine: engine, Kind: kind, MaxAttempts: opts.MaxAttempts, Metrics: m}
	sched := &schedules.Service{Store: st, Exports: svc, Engine: engine, Log: log, Now: opts.Now}
	a := api.New(api.Config{
		Exports: svc, Catalog: cat, Webhooks: hooks, Gate: engine.Config().Gate, Middleware: mw, Metrics: m,
		DataDir: dir.Root, ExportsDir: dir.Exports(), Version: "test", Log: log,
		Problems: problem.Reporter{Log: log, Store: st.Driver().(store.WriteHealth)}, Schedules: sched,
	})
	mux := http.NewServeMux()
	a.Routes(mux)

	if !opts.Idle {
		if err := engine.Start(ctx); err != nil {
			t.Fatalf("start engine: %v", err)
		}
		t.Cleanup(engine.Stop)
	}
	if err := sched.Start(ctx); err != nil {
		t.Fatalf("start schedules: %v", err)
	}
	t.Cleanup(sched.Stop)
	hs := httptest.NewServer(mw.Wrap(mux, m.Instrument(mux)))
	t.Cleanup(hs.Close)
	return &testServer{t: t, url: hs.URL, hc: hs.Client(), dir: dir, store: st, engine: engine, sched: sched}
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

// tickClock is a clock whose readings are at least a millisecond apart, so that jobs
// created one after another have distinct created_at and "newest first" has one answer.
func tickClock() func() time.Time {
	var (
		mu   sync.Mutex
		last time.Time
	)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if next := last.Add(time.Millisecond); now.Before(next) {
			now = next
		}
		last = now
		return now
	}
}

// syncBuffer is a bytes.Buffer the server's goroutines can log to while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
