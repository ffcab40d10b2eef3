package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"time"

	"sheetq/app/middleware"
	"sheetq/internal/datadir"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// Run resolves cfg (Resolve) and serves it (Serve).
func Run(ctx context.Context, cfg Config) error {
	s, err := Resolve(cfg)
	if err != nil {
		return err
	}
	return Serve(ctx, s)
}

// Serve serves the settings until ctx is cancelled, then shuts down in order: stop
// accepting requests, stop the engine (grace period), close the store, release the data
// directory. It builds the app as New does, for the tests too.
func Serve(ctx context.Context, s *Settings) error {
	a, err := build(ctx, s)
	if err != nil {
		return err
	}
	// Deferred so that an early return still stops claiming; the normal path stops the
	// engine explicitly after the HTTP server.
	defer a.Stop()
	if err := a.Start(ctx); err != nil {
		return err
	}
	cfg, log, eng := a.cfg, a.log, a.engine

	ln, err := listen(ctx, cfg, log)
	if err != nil {
		return err
	}
	// A URL a person (and a second sheetq, OpenRunning) can open: not http://[::]:8080.
	url := localURL(middleware.HostOf(cfg.Addr), ln.Addr())
	if err := a.lock.SetOwner(url); err != nil {
		log.WarnContext(ctx, "write pid file", "err", err)
	}
	a.mw.SetLoopback(middleware.IsLoopbackHost(middleware.HostOf(ln.Addr().String())))
	// Headers must arrive within ReadHeaderTimeout and bodies within their own deadline
	// (app/middleware/body.go); no WriteTimeout, which would cut event streams and long
	// downloads.
	hs := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for handlers but does not end open event streams: the hub does.
	hs.RegisterOnShutdown(a.hub.Stop)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	attrs := []any{"addr", ln.Addr().String(), "url", url, "data", a.dir.Root,
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
func openStoreError(dir datadir.Dir, err error) error {
	var ce *sqlite.CorruptError
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
func repairAdvice(dir datadir.Dir) string {
	db := dir.DB()
	return fmt.Sprintf("run `sheetq doctor --data %s` to see what is damaged, then replace %s with a copy made by `sheetq backup` (and delete %s-wal and %s-shm if they exist)",
		dir.Root, db, db, db)
}

// checkInBackground finishes the start-up check of a file too large for its time budget
// (store.StartChecker) beside the running server; damage found makes
// readiness fail and is logged with what to do. The returned func stops it and waits.
func checkInBackground(ctx context.Context, st store.StartChecker, dir datadir.Dir, log *slog.Logger) (wait func()) {
	complete, attrs := st.CheckedAtStart()
	if complete {
		if attrs != nil {
			log.DebugContext(ctx, "database checked", attrs...)
		}
		return func() {}
	}
	log.InfoContext(ctx, "the database check goes on after start: the file is too large to check within the start-up budget", attrs...)
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
			log.InfoContext(ctx, "database checked", "took", time.Since(start).Round(time.Millisecond))
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

// explained is an error whose message says what is wrong and what to do, in place of the
// message of the error it wraps (still found by errors.Is and errors.As).
type explained struct {
	err error
	msg string
}

func (e explained) Error() string { return e.msg }
func (e explained) Unwrap() error { return e.err }
