// Package app wires sheetq together: configuration, the data directory, the engine and
// the HTTP server (API and pages), in a fixed start and stop order.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"time"

	"sheetq/app/events"
	prob "sheetq/app/problem"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// Config is everything `sheetq serve` needs.
type Config struct {
	// Addr is the listen address (default 127.0.0.1:8080; port 0 picks a free port).
	Addr string
	// AddrFallback, when set, listens on a free port of the same host if Addr's port is
	// already in use; main sets it when the user did not choose the address.
	AddrFallback bool
	// DataDir is the data directory (required).
	DataDir string
	// ConfigFile is the config file (default <data>/sheetq.toml, which may be absent).
	ConfigFile string
	// ReportsDir is the watched reports folder (default <data>/reports).
	ReportsDir string
	// Token, when set, is required as a Bearer token on the API (its name is "default");
	// some token is mandatory when Addr is not a loopback address.
	Token string
	// Tokens are further named access tokens; the config file's [[tokens]] add to them.
	Tokens []Token
	// BaseURL is the public URL (scheme://host) when sheetq is published behind a reverse
	// proxy; it makes webhook links absolute and is shown in the page's examples.
	BaseURL string
	// TrustedProxies are the peers whose X-Forwarded-For, -Proto and -Host are believed.
	TrustedProxies []netip.Prefix
	// File is the config file when the caller has read it already; nil: Run reads
	// ConfigFile (or <data>/sheetq.toml).
	File *FileConfig
	// Retention is how long finished exports keep their files (rows: twice as long);
	// zero keeps everything.
	Retention time.Duration
	// MaxAttempts is each new export's attempt budget (default 3).
	MaxAttempts int
	// Engine tunes the worker pool; its directories are set from DataDir.
	Engine jobs.Config
	// Version is shown in /healthz and the page header.
	Version string
	// Logger receives all logs (default slog.Default()).
	Logger *slog.Logger
	// Ready, if set, is called with the base URL once the server accepts connections.
	Ready func(url string)
	// CheckDB is how much of the database file is checked at start (default
	// store.CheckQuick); a damaged file is refused.
	CheckDB store.CheckMode
	// Force, once closed while Run shuts down (a second Ctrl-C), stops the running jobs
	// at once and puts them back in the queue instead of waiting out the grace period.
	Force <-chan struct{}

	tokens []Token // every accepted token, set by validate
}

func (c *Config) validate() error {
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8080")
	if c.DataDir == "" {
		return errors.New("no data directory: set --data")
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("bad --addr %q: %w", c.Addr, err)
	}
	if c.File == nil {
		path := cmp.Or(c.ConfigFile, DataDir{Root: c.DataDir}.Config())
		fc, err := LoadFileConfig(path, c.ConfigFile == "")
		if err != nil {
			return err
		}
		c.File = &fc
	}
	if c.tokens, err = c.allTokens(); err != nil {
		return err
	}
	if c.BaseURL, err = normalizeBaseURL(c.BaseURL); err != nil {
		return err
	}
	if !isLoopbackHost(host) && len(c.tokens) == 0 {
		return fmt.Errorf("listening on %s exposes sheetq beyond this machine: set an access token with --token or SHEETQ_TOKEN, or [[tokens]] in the config file", c.Addr)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = slog.New(LogHandler(c.Logger.Handler()))
	return nil
}

// allTokens is every token the server accepts: --token as "default", Tokens, and the
// config file's [[tokens]]. Names and secrets must be unique.
func (c *Config) allTokens() ([]Token, error) {
	var all []Token
	if c.Token != "" {
		all = append(all, Token{Name: DefaultTokenName, Secret: c.Token})
	}
	all = append(all, c.Tokens...)
	for i, t := range c.File.Tokens {
		secret, err := resolveSecret(t.Token)
		if err != nil {
			return nil, fmt.Errorf("config: token %q: %w", t.Name, err)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("config: [[tokens]] number %d has no name", i+1)
		}
		all = append(all, Token{Name: t.Name, Secret: secret})
	}
	names, secrets := map[string]bool{}, map[string]bool{}
	for _, t := range all {
		switch {
		case !tokenName.MatchString(t.Name):
			return nil, fmt.Errorf("token name %q: use letters, digits, '.', '_' and '-' (at most 64)", t.Name)
		case weakSecret(t.Secret) != "":
			return nil, fmt.Errorf("token %q is %s: %s", t.Name, weakSecret(t.Secret), tokenAdvice)
		case names[t.Name]:
			return nil, fmt.Errorf("two tokens are named %q (--token is named %q)", t.Name, DefaultTokenName)
		case secrets[t.Secret]:
			return nil, fmt.Errorf("token %q has the same secret as another token", t.Name)
		}
		names[t.Name], secrets[t.Secret] = true, true
	}
	return all, nil
}

// Run serves until ctx is cancelled, then shuts down in order: stop accepting requests,
// stop the engine (grace period), close the store, release the data directory.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Logger
	dir := DataDir{Root: cfg.DataDir}
	lk, err := dir.lock()
	if err != nil {
		return err
	}
	defer lk.unlock()

	st, err := store.Open(ctx, dir.DB(), store.Options{FollowUps: webhook.Announcer{BaseURL: cfg.BaseURL, Describe: export.JobJSON}.FollowUps, Check: cfg.CheckDB})
	if err != nil {
		return openStoreError(dir, err)
	}
	defer st.Close()
	finishCheck := checkInBackground(ctx, st, dir, log)
	defer finishCheck() // before the store closes
	if err := st.WriteHealth(); errors.Is(err, store.ErrDiskFull) {
		log.WarnContext(ctx, "the disk that holds the database is full: new exports and other changes fail with disk_full, and GET /readyz answers 503, until space is freed",
			"data", dir.Root, "err", err)
	}

	kind, cleanup, err := openExports(ctx, cfg, dir)
	if err != nil {
		return err
	}
	defer cleanup()

	hub := events.New(st, events.Config{}, log, prob.Reporter{Store: st, Log: log})
	if err := hub.Start(ctx); err != nil {
		return err
	}
	defer hub.Stop()

	m, err := newMetrics(ctx, st, log)
	if err != nil {
		return err
	}
	defer m.wait() // after the engine stops (deferred below), before the store closes
	ecfg := cfg.Engine
	ecfg.TmpDir, ecfg.ExportsDir, ecfg.Logger = dir.Tmp(), dir.Exports(), log
	ecfg.OnChange = onChangeAll(ecfg.OnChange, m.onChange)
	// One gate for the handlers that accept exports and the workers that yield to them.
	ecfg.Gate = jobs.NewGate(time.Now, time.Sleep)
	hub.Wire(&ecfg)
	eng := jobs.New(st, ecfg)
	m.watchQueue(eng)
	eng.Register(export.Name, kind.Kind)
	hooks, err := openWebhooks(kind.config.Webhooks, log, st)
	if err != nil {
		return err
	}
	eng.Register(webhook.Name, hooks)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	// Deferred so that an early return still stops claiming; the normal path stops it
	// explicitly after the HTTP server.
	defer eng.Stop()

	janitor := jobs.NewJanitor(st, jobs.JanitorConfig{
		Retention: cfg.Retention, ExportsDir: dir.Exports(), Logger: log, OnChange: eng.Config().OnChange,
	})
	if err := janitor.Start(ctx); err != nil {
		return err
	}
	defer janitor.Stop()

	ln, err := listen(ctx, cfg, log)
	if err != nil {
		return err
	}
	// A URL a person (and a second sheetq, OpenRunning) can open: not http://[::]:8080.
	url := localURL(hostOf(cfg.Addr), ln.Addr())
	if err := lk.setOwner(url); err != nil {
		log.WarnContext(ctx, "write pid file", "err", err)
	}
	srv := &server{
		cfg: cfg, store: st, engine: eng, exports: kind.Kind, catalog: kind.catalog, dir: dir, log: log,
		loopback: isLoopbackHost(hostOf(ln.Addr().String())), hub: hub,
		metrics: m, webhooks: hooks, gate: eng.Config().Gate,
	}
	if err := srv.initAuth(); err != nil {
		return err
	}
	// Headers must arrive within ReadHeaderTimeout and bodies within their own deadline
	// (app/body.go); no WriteTimeout, which would cut event streams and long downloads.
	hs := &http.Server{
		Handler:           srv.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for handlers but does not end open event streams: the hub does.
	hs.RegisterOnShutdown(hub.Stop)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	attrs := []any{"addr", ln.Addr().String(), "url", url, "data", dir.Root,
		"workers", eng.Config().Workers, "version", cfg.Version, "tokens", len(cfg.tokens)}
	if u := networkURL(ln.Addr()); u != "" {
		attrs = append(attrs, "network_url", u)
	}
	if cfg.BaseURL != "" {
		attrs = append(attrs, "public_url", cfg.BaseURL+"/")
	}
	log.InfoContext(ctx, "listening", attrs...)
	if cfg.Ready != nil {
		cfg.Ready(url)
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	grace, running := eng.Config().ShutdownGrace, eng.Running()
	if running > 0 {
		log.Info(fmt.Sprintf("shutting down: waiting up to %s for %d running jobs to finish; interrupt again (Ctrl-C) to stop them now, and they go back to the queue", grace, running),
			"running", running, "grace", grace)
	} else {
		log.Info("shutting down", "running", 0)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A second interrupt cuts both waits short: for open requests and for running jobs.
	stopped, forced := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(forced)
		select {
		case <-cfg.Force: // nil without a caller that forces: never
			log.Warn("interrupted again: stopping running jobs now; they go back to the queue", "running", eng.Running())
			cancel()
			eng.StopNow()
		case <-stopped:
		}
	}()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	eng.Stop()
	close(stopped)
	<-forced
	log.Info("stopped")
	return nil
}

// openStoreError says what is wrong with the database and what to do about it, for the
// failures a person can fix: a damaged file, a full disk, a file that cannot be written.
func openStoreError(dir DataDir, err error) error {
	var ce *store.CorruptError
	switch {
	case errors.As(err, &ce):
		return explained{err, fmt.Sprintf("the database %s is damaged (%s), so sheetq will not start on it: %s",
			ce.Path, strings.Join(ce.Findings, "; "), repairAdvice(dir))}
	case errors.Is(err, store.ErrDiskFull):
		return explained{err, fmt.Sprintf("the disk that holds %s is full, so sheetq cannot create or update its database: free some space there and start again (%v)", dir.DB(), err)}
	case errors.Is(err, store.ErrReadOnly):
		return explained{err, fmt.Sprintf("the database %s cannot be written (%v): make it and its folder writable for this user, or choose another data directory with --data", dir.DB(), err)}
	}
	return err
}

// repairAdvice says what to do about a damaged database.
func repairAdvice(dir DataDir) string {
	db := dir.DB()
	return fmt.Sprintf("run `sheetq doctor --data %s` to see what is damaged, then replace %s with a copy made by `sheetq backup` (and delete %s-wal and %s-shm if they exist)",
		dir.Root, db, db, db)
}

// checkInBackground finishes the start-up check of a file too large for its time budget
// (store.CheckResult.Complete false) beside the running server; damage found makes
// readiness fail and is logged with what to do. The returned func stops it and waits.
func checkInBackground(ctx context.Context, st *store.Store, dir DataDir, log *slog.Logger) (wait func()) {
	res := st.OpenCheck()
	if res.Complete {
		if res.Mode != store.CheckOff && res.Pages > 0 {
			log.DebugContext(ctx, "database checked", "mode", res.Mode, "pages", res.Pages, "took", res.Took.Round(time.Millisecond))
		}
		return func() {}
	}
	log.InfoContext(ctx, "the database check goes on after start: the file is too large to check within the start-up budget",
		"mode", res.Mode, "pages", res.Pages, "took", res.Took.Round(time.Millisecond))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		err := st.FinishCheck(ctx)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, store.ErrCorrupt):
			log.ErrorContext(ctx, "the database is damaged: stop sheetq, "+repairAdvice(dir)+"; until then GET /readyz answers 503", "err", err)
		case err != nil:
			log.WarnContext(ctx, "the database check after start failed", "err", err)
		default:
			log.InfoContext(ctx, "database checked", "mode", res.Mode, "took", time.Since(start).Round(time.Millisecond))
		}
	}()
	return func() { cancel(); <-done }
}

// listen listens on cfg.Addr or, with AddrFallback and that port in use, on a free port
// of the same host.
func listen(ctx context.Context, cfg Config, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil && cfg.AddrFallback && addrInUse(err) {
		host, port, _ := net.SplitHostPort(cfg.Addr) // validated
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err == nil {
			log.WarnContext(ctx, fmt.Sprintf("port %s is in use; listening on %s instead", port, ln.Addr()),
				"wanted", cfg.Addr, "addr", ln.Addr().String())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	return ln, nil
}

// addrInUse reports whether a listen failed because another socket holds the address.
func addrInUse(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	// Windows reports WSAEADDRINUSE, which its syscall package does not name.
	return errno == syscall.EADDRINUSE || (runtime.GOOS == "windows" && errno == 10048)
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// isLoopbackHost reports whether host names this machine only.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
