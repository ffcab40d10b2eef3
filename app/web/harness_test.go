package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/app/exports"
	"sheetq/app/metrics"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/app/schedules"
	"sheetq/app/web"
	"sheetq/assets"
	"sheetq/internal/apiv1"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/export"
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
}

// testServer is the pages over real parts, with its handler served by httptest.
type testServer struct {
	t      *testing.T
	url    string
	hc     *http.Client
	dir    datadir.Dir
	store  *store.Store
	engine *jobs.Engine
	sched  *schedules.Service
	svc    *exports.Service
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

// newTestServer builds the pages' handler and starts what it needs (the catalog, the
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
	hooks, err := webhook.New(webhook.Config{Recorder: st, Logger: log})
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
	svc := &exports.Service{Store: st, Engine: engine, Kind: kind, MaxAttempts: opts.MaxAttempts, Metrics: m}
	sched := &schedules.Service{Store: st, Exports: svc, Engine: engine, Log: log, Now: opts.Now}
	var pages *web.Pages
	mw, err := middleware.New(middleware.Config{Tokens: tokens, SessionKey: key, Loopback: true, Log: log,
		Refused: func(w http.ResponseWriter, r *http.Request, status int, title, message string) {
			pages.RenderError(w, r, status, title, message)
		}})
	if err != nil {
		t.Fatalf("middleware: %v", err)
	}
	pages = web.New(web.Config{
		Exports: svc, Catalog: cat, Gate: engine.Config().Gate, Middleware: mw,
		DataDir: dir.Root, ReportsDir: dir.Reports(), Version: "test", Log: log,
		Problems: problem.Reporter{Log: log, Store: st.Driver().(store.WriteHealth)}, Schedules: sched, Metrics: m,
	})
	mux := http.NewServeMux()
	pages.Routes(mux)
	mux.Handle("GET /assets/", assets.Handler())

	m.WatchQueue(engine)
	if err := m.Start(ctx); err != nil {
		t.Fatalf("start metrics: %v", err)
	}
	t.Cleanup(m.Stop)
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
	return &testServer{t: t, url: hs.URL, hc: hs.Client(), dir: dir, store: st, engine: engine, sched: sched, svc: svc}
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

// create accepts body (an export request's JSON: report, params, format) through the
// exports service, as POST /api/v1/exports does, and requires it to be accepted.
func (ts *testServer) create(body string) apiv1.Job {
	ts.t.Helper()
	var req struct {
		Report string         `json:"report"`
		Params map[string]any `json:"params"`
		Format string         `json:"format"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		ts.t.Fatalf("export request %s: %v", body, err)
	}
	args, prob := ts.svc.Validate(req.Report, req.Params, req.Format, false)
	if prob != nil {
		ts.t.Fatalf("export request %s refused: %v", body, prob)
	}
	j, _, err := ts.svc.Enqueue(context.Background(), args, "", "")
	if err != nil {
		ts.t.Fatalf("enqueue %s: %v", body, err)
	}
	return export.JobJSON(j, "")
}

// job loads the export id, which must exist, as GET /api/v1/exports/{id} shows it.
func (ts *testServer) job(id string) apiv1.Job {
	ts.t.Helper()
	j, err := ts.svc.Load(context.Background(), id)
	if err != nil {
		ts.t.Fatalf("load job %s: %v", id, err)
	}
	return export.JobJSON(j, "")
}

// waitStatus polls the job until its status is one of want and returns it.
func (ts *testServer) waitStatus(id string, want ...store.Status) apiv1.Job {
	ts.t.Helper()
	var j apiv1.Job
	waitFor(ts.t, 20*time.Second, func() (bool, string) {
		j = ts.job(id)
		return slices.Contains(want, store.Status(j.Status)), fmt.Sprintf("job %s is %s (attempt %d, error %+v), want %v",
			id, j.Status, j.Attempt, j.Error, want)
	})
	return j
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

// page parses an HTML answer, requiring the status and an HTML content type.
func page(t *testing.T, res response, status int) *goquery.Document {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, res.body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want text/html", ct)
	}
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(res.body))
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// tid selects the elements with a data-testid.
func tid(s interface {
	Find(string) *goquery.Selection
}, id string) *goquery.Selection {
	return s.Find(`[data-testid="` + id + `"]`)
}

// postForm sends a urlencoded form with extra headers (Origin, Sec-Fetch-Site) and does
// not follow redirects, so the 303 itself can be checked.
func (ts *testServer) postForm(path string, form url.Values, header http.Header) response {
	ts.t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		ts.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	hc := *ts.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := hc.Do(req)
	if err != nil {
		ts.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return response{Response: res, body: b.Bytes()}
}

// formOf reads the export form of a report page: its hidden fields and defaults.
func formOf(t *testing.T, doc *goquery.Document) url.Values {
	t.Helper()
	form := tid(doc, "export-form")
	if form.Length() != 1 {
		t.Fatalf("no export-form")
	}
	if m, _ := form.Attr("method"); m != "post" {
		t.Errorf("form method %q", m)
	}
	if a, _ := form.Attr("action"); a != "/exports" {
		t.Errorf("form action %q", a)
	}
	v := url.Values{}
	form.Find("input").Each(func(_ int, in *goquery.Selection) {
		name, _ := in.Attr("name")
		val, _ := in.Attr("value")
		if typ, _ := in.Attr("type"); typ == "checkbox" {
			if _, on := in.Attr("checked"); !on {
				return
			}
		}
		v.Set(name, val)
	})
	return v
}

// writeReport puts a report file in the test server's reports folder.
func writeReport(t *testing.T, ts *testServer, name, text string) {
	t.Helper()
	if err := os.MkdirAll(ts.dir.Reports(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts.dir.Reports(), name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitReport waits until the catalog serves report id.
func (ts *testServer) waitReport(id string) {
	ts.t.Helper()
	waitFor(ts.t, 10*time.Second, func() (bool, string) {
		res := ts.get("/exports/new?report=" + id)
		return res.StatusCode == http.StatusOK, id + " not loaded: " + strconv.Itoa(res.StatusCode)
	})
}
