package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

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
)

// Options tunes NewParts.
type Options struct {
	// Open opens the test's store in dir with the clock now (nil: time.Now): each
	// package's one call of a driver. NewParts fails the test on its error and closes the
	// store when the test ends.
	Open func(dir datadir.Dir, now func() time.Time) (*store.Store, error)
	// Now, if set, is the clock of the store, the engine and the schedules service.
	Now func() time.Time
	// Log, if set, receives the logs (at debug level) instead of the test output.
	Log io.Writer
	// MaxAttempts is the exports service's (0: the job kind's default).
	MaxAttempts int
	// Webhooks, if set, configures the webhook kind, registered as the app registers it:
	// without a secret, a request with a webhook is refused. Nil registers none.
	Webhooks *webhook.Config
	// Sources are the export kind's sources by name, as the config file's [sources]
	// would open them, beside the built-in demo; nil: the demo alone.
	Sources map[string]export.Source
}

// Parts are the real parts a handler stands on: a migrated store in t.TempDir(), the
// catalog over the built-in demo report and the reports folder, the export kind, an
// engine with the fast test settings, the metrics, the exports and schedules services.
// NewParts starts the catalog only; a harness starts the rest it needs.
type Parts struct {
	t         testing.TB
	Dir       datadir.Dir
	Log       *slog.Logger
	Store     *store.Store
	Catalog   *export.Catalog
	Kind      *export.Kind
	Metrics   *metrics.Metrics
	Engine    *jobs.Engine
	Webhooks  *webhook.Handler // nil unless Options.Webhooks
	Exports   *exports.Service
	Schedules *schedules.Service
}

// NewParts builds the parts; all of them stop when the test ends.
func NewParts(t testing.TB, opts Options) *Parts {
	t.Helper()
	ctx := context.Background()
	log := Logger(t, opts.Log)
	dir := datadir.Dir{Root: t.TempDir()}
	st := OpenStore(t, opts.Open, dir, opts.Now)

	cat := export.NewCatalog(dir.Reports(), export.Builtin(), log)
	cat.SetQueues([]string{store.DefaultQueue})
	if err := cat.Start(ctx); err != nil {
		t.Fatalf("start catalog: %v", err)
	}
	t.Cleanup(cat.Stop)
	kind := export.New(export.Config{TmpDir: dir.Tmp(), Library: cat, Sources: opts.Sources, Version: "test"})

	m := metrics.New(st, log)
	ecfg := EngineConfig()
	ecfg.TmpDir, ecfg.ExportsDir, ecfg.Logger, ecfg.Now = dir.Tmp(), dir.Exports(), log, opts.Now
	ecfg.Gate = jobs.NewGate(time.Now, time.Sleep)
	engine := jobs.New(st, ecfg)
	engine.Register(export.Name, kind)
	var hooks *webhook.Handler
	if opts.Webhooks != nil {
		hcfg := *opts.Webhooks
		hcfg.Recorder, hcfg.Logger = st, log
		var err error
		if hooks, err = webhook.New(hcfg); err != nil {
			t.Fatalf("webhooks: %v", err)
		}
		engine.Register(webhook.Name, hooks)
	}
	svc := &exports.Service{Store: st, Engine: engine, Kind: kind, MaxAttempts: opts.MaxAttempts, Metrics: m}
	sched := &schedules.Service{Store: st, Exports: svc, Engine: engine, Log: log, Now: opts.Now}
	return &Parts{t: t, Dir: dir, Log: log, Store: st, Catalog: cat, Kind: kind, Metrics: m, Engine: engine,
		Webhooks: hooks, Exports: svc, Schedules: sched}
}

// OpenStore opens the store in dir with open, failing the test on its error, and closes
// it when the test ends.
func OpenStore(t testing.TB, open func(datadir.Dir, func() time.Time) (*store.Store, error), dir datadir.Dir, now func() time.Time) *store.Store {
	t.Helper()
	st, err := open(dir, now)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Middleware is the real middleware over cfg, on a loopback server, logging to the
// parts' logger; a token, if set, is the one accepted, with a session key in the data
// directory.
func (p *Parts) Middleware(token string, cfg middleware.Config) *middleware.Stack {
	p.t.Helper()
	if token != "" {
		cfg.Tokens = append(cfg.Tokens, middleware.Token{Name: middleware.DefaultTokenName, Secret: token})
	}
	if len(cfg.Tokens) > 0 {
		key, err := middleware.LoadSessionKey(p.Dir.SessionKey())
		if err != nil {
			p.t.Fatalf("session key: %v", err)
		}
		cfg.SessionKey = key
	}
	cfg.Loopback, cfg.Log = true, p.Log
	mw, err := middleware.New(cfg)
	if err != nil {
		p.t.Fatalf("middleware: %v", err)
	}
	return mw
}

// Problems is the reporter of the handlers' faults, as the app builds it.
func (p *Parts) Problems() problem.Reporter {
	return problem.Reporter{Log: p.Log, Store: p.Store.Driver().(store.WriteHealth)}
}

// StartEngine starts the worker pool until the test ends.
func (p *Parts) StartEngine() {
	p.t.Helper()
	if err := p.Engine.Start(context.Background()); err != nil {
		p.t.Fatalf("start engine: %v", err)
	}
	p.t.Cleanup(p.Engine.Stop)
}

// StartSchedules starts the schedules service's firing loop until the test ends.
func (p *Parts) StartSchedules() {
	p.t.Helper()
	if err := p.Schedules.Start(context.Background()); err != nil {
		p.t.Fatalf("start schedules: %v", err)
	}
	p.t.Cleanup(p.Schedules.Stop)
}

// StartMetrics starts the metrics, sampling the engine's queue, until the test ends.
func (p *Parts) StartMetrics() {
	p.t.Helper()
	p.Metrics.WatchQueue(p.Engine)
	if err := p.Metrics.Start(context.Background()); err != nil {
		p.t.Fatalf("start metrics: %v", err)
	}
	p.t.Cleanup(p.Metrics.Stop)
}

// CreateExport accepts body (an export request's JSON: report, params, format) through
// the exports service, as POST /api/v1/exports does, and requires it to be accepted.
func (p *Parts) CreateExport(body string) apiv1.Job {
	p.t.Helper()
	var req struct {
		Report string         `json:"report"`
		Params map[string]any `json:"params"`
		Format string         `json:"format"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		p.t.Fatalf("export request %s: %v", body, err)
	}
	args, prob := p.Exports.Validate(context.Background(), req.Report, req.Params, export.FileOptions{Format: req.Format})
	if prob != nil {
		p.t.Fatalf("export request %s refused: %v", body, prob)
	}
	j, _, err := p.Exports.Enqueue(context.Background(), args, "", "")
	if err != nil {
		p.t.Fatalf("enqueue %s: %v", body, err)
	}
	return export.JobJSON(j, "")
}

// LoadExport loads the export id, which must exist, as GET /api/v1/exports/{id} shows it.
func (p *Parts) LoadExport(id string) apiv1.Job {
	p.t.Helper()
	j, err := p.Exports.Load(context.Background(), id)
	if err != nil {
		p.t.Fatalf("load job %s: %v", id, err)
	}
	return export.JobJSON(j, "")
}

// WaitExport polls export id, through the exports service, until its status is one of
// want, and returns it.
func (p *Parts) WaitExport(id string, want ...store.Status) apiv1.Job {
	p.t.Helper()
	var j apiv1.Job
	WaitFor(p.t, 20*time.Second, func() (bool, string) {
		j = p.LoadExport(id)
		return slices.Contains(want, store.Status(j.Status)), fmt.Sprintf("job %s is %s (attempt %d, error %+v), want %v",
			id, j.Status, j.Attempt, j.Error, want)
	})
	return j
}

// Firings are the exports sc's firings made, as GET /api/v1/schedules/{id}/exports
// shows them.
func (p *Parts) Firings(sc store.Schedule) []apiv1.Job {
	p.t.Helper()
	js, err := p.Schedules.Firings(context.Background(), sc)
	if err != nil {
		p.t.Fatalf("firings of %s: %v", sc.ID, err)
	}
	out := make([]apiv1.Job, 0, len(js))
	for _, j := range js {
		out = append(out, export.JobJSON(j, ""))
	}
	return out
}

// JobCount is the number of jobs in st, whatever their state.
func JobCount(t testing.TB, st *store.Store) int {
	t.Helper()
	counts, err := st.Counts(context.Background())
	if err != nil {
		t.Fatalf("counts: %v", err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// Cancel cancels job id through engine; the caller then waits until it is CANCELED, so
// that no execution outlives the test.
func Cancel(t testing.TB, engine *jobs.Engine, id string) {
	t.Helper()
	if _, err := engine.Cancel(context.Background(), id); err != nil {
		t.Fatalf("cancel %s: %v", id, err)
	}
}

// EventTypes lists job id's event types in order, read from st.
func EventTypes(t testing.TB, st *store.Store, id string) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatalf("events %s: %v", id, err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
