package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"sheetq/app/api"
	"sheetq/app/audit"
	"sheetq/app/events"
	"sheetq/app/exports"
	"sheetq/app/metrics"
	"sheetq/app/middleware"
	"sheetq/app/oidc"
	"sheetq/app/problem"
	"sheetq/app/schedules"
	"sheetq/app/web"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// App is one sheetq server over one data directory: everything New built, which Start
// starts and Stop stops, and the HTTP handler that serves it. Run and the tests use the
// same constructor.
type App struct {
	cfg Config
	dir datadir.Dir
	log *slog.Logger
	// test is cfg.Test, or none: the knobs of tests.
	test TestHooks
	// patterns are the route table's patterns (routes.go), for the permission matrix test.
	patterns []string

	lock     *datadir.Lock
	store    *store.Store
	files    jobs.Files
	shared   bool // other nodes may use the store at the same time (store.Shared)
	polls    bool // a shared store without wake-ups across nodes: the engine and the hub poll it often
	kind     exportKind
	hub      *events.Hub
	metrics  *metrics.Metrics
	engine   *jobs.Engine
	janitor  *jobs.Janitor
	webhooks *webhook.Handler
	exports  *exports.Service
	sched    *schedules.Service
	mw       *middleware.Stack
	oidc     *oidc.Handler // sign-in with OpenID Connect; nil without [oidc]
	api      *api.API
	pages    *web.Pages
	audit    *audit.Log

	// deliveries delivers exports' files by email and to folders (deliveries.go).
	deliveries *deliver.Handler

	// loopback is whether the server listens on loopback only (the Host check); New
	// guesses it from Addr, Run sets it from the listener before building the handler.
	loopback bool

	// closers undo New in reverse order: the kind's watcher and sources, the store,
	// the data directory's lock.
	closers []func()
	// stops undo Start in reverse order.
	stops    []func()
	stopOnce sync.Once
}

// New resolves cfg (Resolve) and builds the app from the settings (build).
func New(ctx context.Context, cfg Config) (*App, error) {
	s, err := Resolve(cfg)
	if err != nil {
		return nil, err
	}
	return build(ctx, s)
}

// build builds the app from resolved settings: it takes the data directory's lock, opens
// the store (a damaged database is refused), prepares the export kind (the first-run
// sample, the config file's sources, the watched reports folder), and builds the hub,
// the metrics, the engine with its kinds, the janitor, the middleware and the handlers.
// Nothing runs jobs until Start. On error, what was built is closed again.
func build(ctx context.Context, s *Settings) (_ *App, err error) {
	cfg := s.cfg
	a := &App{cfg: cfg, test: cfg.hooks(), dir: datadir.Dir{Root: cfg.DataDir}, log: cfg.Logger,
		loopback: middleware.IsLoopbackHost(middleware.HostOf(cfg.Addr))}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	log, dir := a.log, a.dir
	if a.lock, err = dir.Lock(); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() { a.lock.Unlock() })

	st, err := a.openStore(ctx)
	if err != nil {
		return nil, err
	}
	a.store = st
	drv := st.Driver()
	if sh, ok := drv.(store.Shared); ok {
		a.shared = sh.Shared()
	}
	a.closers = append(a.closers, func() {
		if err := st.Close(); err != nil {
			log.Warn("close store", "err", err)
		}
	})
	health, _ := drv.(store.WriteHealth)
	if health != nil {
		if err := health.WriteHealth(); errors.Is(err, store.ErrDiskFull) {
			log.WarnContext(ctx, "the disk that holds the database is full: new exports and other changes fail with disk_full, and GET /readyz answers 503, until space is freed",
				"data", dir.Root, "err", err)
		}
	}

	kind, cleanup, err := openExports(ctx, cfg, dir)
	if err != nil {
		return nil, err
	}
	a.kind = kind
	a.closers = append(a.closers, cleanup)

	// The audit log (issue 39): who requested, downloaded, canceled, retried, deleted,
	// signed in and was refused what. Each action is recorded before it is done, and an
	// action whose entry cannot be written is refused.
	a.audit = audit.New(st, log)
	problems := problem.Reporter{Log: log, Refused: a.audit.Refused}
	if health != nil {
		// Readiness follows the faults requests meet on the file (a full disk).
		problems.Store = health
	}
	hubCfg := a.test.Events
	// A shared store that cannot tell this node of other nodes' changes (MySQL and
	// MariaDB have no LISTEN; PostgreSQL behind --poll-only) is polled: that poll bounds
	// how soon this node picks up another node's job and shows its events.
	_, listens := drv.(store.Listener)
	a.polls = a.shared && (cfg.PollOnly || !listens)
	if a.polls {
		// No NOTIFY tells this node of other nodes' events: its streams read the log
		// four times a second instead of once.
		hubCfg.Poll = cmp.Or(hubCfg.Poll, 250*time.Millisecond)
	}
	// A member's stream carries only their exports (app/events access.go); the
	// exports service, made below, says which those are.
	hubCfg.Visible = func(ctx context.Context, owner, report string) bool { return a.exports.VisibleTo(ctx, owner, report) }
	a.hub = events.New(st, hubCfg, log, problems)
	a.metrics = metrics.New(st, log)
	ecfg := cfg.Engine
	ecfg.TmpDir, ecfg.ExportsDir, ecfg.Logger = dir.Tmp(), dir.Exports(), log
	if a.files, err = a.openFiles(ctx); err != nil {
		return nil, err
	}
	ecfg.Files = a.files
	if s3, ok := a.files.(*jobs.S3Files); ok {
		// An export's checkpoints keep their rows in the bucket too, for an attempt on
		// another node (ARCHITECTURE.md, "Checkpoints and resume").
		kind.Kind.SetRemote(s3.Pieces())
	}
	if a.test.Now != nil {
		ecfg.Now = a.test.Now
	}
	if cfg.Node != "" {
		ecfg.WorkerID = cfg.Node
	}
	if d := jobs.FaultClockOffset(); d != 0 {
		// A crash test's node whose own clock is off (faultpoints builds only). Not
		// TestHooks.Now: that is the store's clock, which on PostgreSQL is the database's.
		fmt.Fprintf(os.Stderr, "sheetq: test clock offset %s\n", d)
		ecfg.Now = func() time.Time { return time.Now().Add(d) }
	}
	// Other nodes run jobs from a shared store: a PROCESSING job at start may be theirs.
	ecfg.Shared = a.shared
	if a.polls {
		// Polling is the only way this node learns of other nodes' jobs
		// (docs/several-nodes.md): a tenth of a second is a tiny indexed query per lane.
		ecfg.PollInterval = cmp.Or(ecfg.PollInterval, 100*time.Millisecond)
	}
	ecfg.OnChange = onChangeAll(ecfg.OnChange, a.metrics.OnChange)
	if an, ok := drv.(store.Announcer); ok {
		// Other nodes' event streams read this node's events when told (store.Listener).
		ecfg.OnChange = onChangeAll(ecfg.OnChange, an.AnnounceEvents)
	}
	// One gate for the handlers that accept exports and the workers that yield to them.
	ecfg.Gate = jobs.NewGate(time.Now, time.Sleep)
	a.hub.Wire(&ecfg)
	ecfg.OnResumed = a.metrics.Resumes()
	a.engine = jobs.New(st, ecfg)
	if err := a.listen(ctx); err != nil {
		return nil, err
	}
	a.metrics.WatchQueue(a.engine)
	a.metrics.WatchGroupCommit()
	if wo, ok := drv.(store.WriteObserver); ok { // a server has no one writer to time
		wo.ObserveWrites(a.metrics.WatchWrites())
	}
	a.metrics.WatchBatches(a.engine.BatchStats)
	a.metrics.WatchStreams(func() (int, int64) { s := a.hub.Stats(); return s.Clients, s.Dropped })
	a.engine.Register(export.Name, kind.Kind)
	if a.webhooks, err = openWebhooks(kind.config, a.test.Webhooks, log, st); err != nil {
		return nil, err
	}
	a.engine.Register(webhook.Name, a.webhooks)
	if a.deliveries, err = a.openDeliveries(kind.config); err != nil {
		return nil, err
	}
	a.engine.Register(deliver.Name, a.deliveries)
	a.janitor = jobs.NewJanitor(st, jobs.JanitorConfig{
		Retention: cfg.Retention, ExportsDir: dir.Exports(), Files: a.files, Logger: log, OnChange: a.engine.Config().OnChange,
		Now: a.engine.Config().Now, Leftovers: []jobs.LeftoverRemover{kind.Kind},
	})

	var key []byte
	signsIn := len(cfg.tokens) > 0 || cfg.signIn.oidc != nil
	if signsIn {
		if key, err = middleware.LoadSessionKey(dir.SessionKey()); err != nil {
			return nil, err
		}
	}
	a.mw, err = middleware.New(middleware.Config{Tokens: cfg.tokens, OIDC: cfg.signIn.people, SessionKey: key, BaseURL: cfg.BaseURL,
		TrustedProxies: cfg.TrustedProxies, Loopback: a.loopback, BodyTimeout: a.test.BodyTimeout, Log: log,
		OnSignIn: a.signedIn, OnPerson: a.personSeen,
		// The pages show the middleware's refusals of browsers (a forged form).
		Refused: func(w http.ResponseWriter, r *http.Request, status int, title, message string) {
			a.pages.RenderError(w, r, status, title, message)
		}})
	if err != nil {
		return nil, err
	}
	if signsIn {
		// Beside the session key, so that a sign-out still holds after a restart.
		if err = a.mw.Auth().LoadGenerations(filepath.Join(dir.Root, "session.generations")); err != nil {
			return nil, err
		}
	}
	if o := cfg.signIn.oidc; o != nil {
		// People sign in with OpenID Connect (app/oidc); the provider is first asked at
		// the first sign-in, so a provider that is down does not stop the start.
		oc := *o
		oc.Key, oc.Middleware, oc.Log = key, a.mw, log
		oc.Page = func(w http.ResponseWriter, r *http.Request, status int, title, message string) {
			a.pages.RenderError(w, r, status, title, message)
		}
		if a.oidc, err = oidc.New(oc); err != nil {
			return nil, err
		}
	}
	a.metrics.WatchBodies(a.mw.BodiesReading)
	a.metrics.WatchGate(a.engine.Config().Gate.Active)
	a.exports = &exports.Service{Store: st, Engine: a.engine, Kind: kind.Kind, MaxAttempts: cfg.MaxAttempts, Metrics: a.metrics,
		Policy: cfg.File.Access.Policy(), Audit: a.audit}
	// A delivery target is checked when a schedule is saved (or declared in the config
	// file), not only when its delivery runs: a folder against [deliveries] folders, an
	// email against [smtp] host being set (the deliveries' own check), a webhook against
	// [webhooks] secret being set and the address policy of an export request's webhook.
	a.sched = &schedules.Service{Store: st, Exports: a.exports, Engine: a.engine, Log: log, Now: a.test.Now,
		EmailDomains: kind.config.Deliveries.EmailDomains, Audit: a.audit,
		CheckTarget: func(t deliver.Target) error {
			if t.Type != deliver.TypeWebhook {
				return a.deliveries.CheckTarget(t)
			}
			if !a.webhooks.Configured() {
				return errors.New("webhook delivery needs a signing secret: set [webhooks] secret in the config file")
			}
			if err := t.Check(); err != nil {
				return err // the URL's form, as an export request's webhook must have it
			}
			// The address policy of an export request's webhook ([webhooks]
			// allow_private), so that a schedule reaches no more than a request may
			// (issue 36). A name that does not resolve now is not refused, unlike a
			// request's: a schedule outlives today's DNS (a node starting while DNS is
			// down declares the config file's schedules), and each delivery checks the
			// address it dials.
			err := a.webhooks.CheckURL(context.Background(), t.URL)
			if errors.Is(err, webhook.ErrNotAllowed) {
				return fmt.Errorf("%w (set [webhooks] allow_private = true to allow private addresses)", err)
			}
			return a.deliveries.CheckTarget(t)
		}}
	if signsIn {
		// A schedule fires as its owner now; a server without sign-in has one user, the
		// local admin, who owns every schedule.
		a.sched.Owners = a.owner
	}
	a.pages = web.New(web.Config{
		Exports: a.exports, Catalog: kind.catalog, Gate: a.engine.Config().Gate, Middleware: a.mw,
		DataDir: dir.Root, ReportsDir: cmp.Or(cfg.ReportsDir, dir.Reports()), Version: cfg.Version, Log: log, Problems: problems,
		Schedules: a.sched, Metrics: a.metrics, Deliveries: a.deliveries, Audit: a.audit,
		EncryptedFile: func(w http.ResponseWriter, r *http.Request, job store.Job, password string) error {
			return a.api.EncryptedFile(w, r, job, password)
		},
	})
	a.api = api.New(api.Config{
		Exports: a.exports, Catalog: kind.catalog, Webhooks: a.webhooks, Gate: a.engine.Config().Gate,
		Middleware: a.mw, Metrics: a.metrics, DataDir: dir.Root, ExportsDir: dir.Exports(), Version: cfg.Version, Log: log, Problems: problems,
		Files: a.files, Download: cfg.stores.Download, Schedules: a.sched, Audit: a.audit,
	})
	return a, nil
}

// Start starts the background services in order: the rest of a database check too long
// for start-up, the event hub, the metrics, the engine (unless TestHooks.Idle) and the
// janitor. On error, what was started is stopped again.
func (a *App) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.stop()
		}
	}()
	if sc, ok := a.store.Driver().(store.StartChecker); ok {
		a.stops = append(a.stops, checkInBackground(ctx, sc, a.dir, a.log))
	}
	if err := a.declareSchedules(ctx, a.kind.config); err != nil {
		return err
	}
	a.stops = append(a.stops, pruneAudit(ctx, a.audit, a.cfg.AuditKeep))
	for _, svc := range []service{a.hub, a.metrics, a.engine, a.janitor, a.sched} {
		if svc == service(a.engine) && a.test.Idle {
			continue
		}
		if err := svc.Start(ctx); err != nil {
			return err
		}
		a.stops = append(a.stops, svc.Stop)
		if svc == service(a.engine) {
			a.warnLaneless(ctx)
		}
	}
	return nil
}

// warnLaneless logs each queue that has PENDING jobs but no lane in this engine (its
// [queues.NAME] was removed from the config file): they wait until the lane is back, and
// the log says so at start rather than leaving only the Queue page to show it.
func (a *App) warnLaneless(ctx context.Context) {
	pending, err := a.store.PendingByQueue(ctx)
	if err != nil {
		a.log.WarnContext(ctx, "cannot count waiting jobs by queue", "err", err)
		return
	}
	lanes := map[string]bool{}
	for _, l := range a.engine.Lanes() {
		lanes[l.Queue] = true
	}
	for _, q := range slices.Sorted(maps.Keys(pending)) {
		if !lanes[q] {
			a.log.WarnContext(ctx, "queue has waiting jobs but no workers here; add it to the config file to run them",
				"queue", q, "pending", pending[q], "config", "[queues."+q+"] workers = N")
		}
	}
}

// service is the shape every background service shares: Start spawns and returns,
// Stop is idempotent and waits for its goroutines.
type service interface {
	Start(ctx context.Context) error
	Stop()
}

// Stop stops what Start started, in reverse order (the janitor, the engine with its
// grace period, the metrics' catch-ups, the hub and its streams, the database check),
// then closes what New opened (the reports watcher and sources, the store) and releases
// the data directory. It may be called more than once.
func (a *App) Stop() {
	a.stopOnce.Do(func() {
		a.stop()
		a.close()
	})
}

func (a *App) stop() {
	for i := len(a.stops) - 1; i >= 0; i-- {
		a.stops[i]()
	}
	a.stops = nil
}

func (a *App) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// Handler is the HTTP handler of every route: one mux composing the API's, the pages'
// and the event streams' handlers, behind the middleware (routes.go).
func (a *App) Handler() http.Handler { return a.routes() }
