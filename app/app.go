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
	"runtime"
	"syscall"
	"time"

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
	// Token, when set, is required as a Bearer token on the API; it is mandatory when
	// Addr is not a loopback address.
	Token string
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
	if !isLoopbackHost(host) && c.Token == "" {
		return fmt.Errorf("listening on %s exposes sheetq beyond this machine: set an access token with --token or SHEETQ_TOKEN", c.Addr)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
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

	st, err := store.Open(ctx, dir.DB(), store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()

	kind, cleanup, err := openExports(ctx, cfg, dir)
	if err != nil {
		return err
	}
	defer cleanup()

	events := newHub(st, hubConfig{}, log)
	if err := events.Start(ctx); err != nil {
		return err
	}
	defer events.Stop()

	m, err := newMetrics(ctx, st, log)
	if err != nil {
		return err
	}
	defer m.wait() // after the engine stops (deferred below), before the store closes
	ecfg := cfg.Engine
	ecfg.TmpDir, ecfg.ExportsDir, ecfg.Logger = dir.Tmp(), dir.Exports(), log
	ecfg.OnChange = onChangeAll(ecfg.OnChange, m.onChange)
	events.wire(&ecfg)
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
	url := "http://" + ln.Addr().String()
	if err := lk.setOwner(url); err != nil {
		log.WarnContext(ctx, "write pid file", "err", err)
	}
	srv := &server{
		cfg: cfg, store: st, engine: eng, exports: kind.Kind, catalog: kind.catalog, dir: dir, log: log,
		loopback: isLoopbackHost(hostOf(ln.Addr().String())), hub: events,
		metrics: m, webhooks: hooks,
	}
	hs := &http.Server{
		Handler:           srv.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for handlers but does not end open event streams: the hub does.
	hs.RegisterOnShutdown(events.Stop)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.InfoContext(ctx, "listening", "addr", ln.Addr().String(), "url", url, "data", dir.Root,
		"workers", eng.Config().Workers, "version", cfg.Version)
	if cfg.Ready != nil {
		cfg.Ready(url)
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", eng.Config().ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	eng.Stop()
	log.Info("stopped")
	return nil
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
