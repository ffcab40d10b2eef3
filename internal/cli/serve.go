package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"sheetq/app"
	"sheetq/internal/cpuprofile"
	"sheetq/internal/datadir"
	"sheetq/internal/gcdefaults"
	"sheetq/jobs"
	"sheetq/jobs/deliver"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// ShutdownSignals are the signals that end the server gracefully, for main's
// signal.NotifyContext; SIGHUP too: closing the terminal that runs sheetq must shut it
// down gracefully. A second one stops running exports at once (secondSignal).
func ShutdownSignals() []os.Signal {
	return []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}
}

// The ranges of serve's whole-number flags that have both ends (--max-attempts has
// one: at least 1).
var (
	workersRange = intRange{1, 256}
	niceRange    = intRange{0, 19}
)

// serve runs `sheetq serve`: the flags, SHEETQ_* and the config file's [serve] table
// become app.Config (flags beat the environment, which beats the file), which
// app.Resolve completes with the file's other tables into the settings app.Serve runs.
func serve(ctx context.Context, version string, args []string, stdout, stderr io.Writer) error {
	force, unwatch := secondSignal()
	defer unwatch()
	sv, err := serveSettings(version, args, stderr, force)
	if err != nil {
		return err
	}
	settings, log, cpuProf := sv.settings, sv.log, sv.cpuProf
	lanes := settings.Engine()
	if lanes.Nice > 0 && jobs.LowerPrioritySupported {
		// Each running export holds a P on its low-priority thread even while the OS runs
		// something else in its place; a P per export slot on top of the default keeps one
		// free for every core, so requests never queue behind an export's thread. Only
		// the export slots: webhooks and deliveries wait on the network, holding no P,
		// and every P costs while the collector marks, which runs a quarter of the Ps as
		// dedicated mark workers and each other idle P as one more. With a P for every
		// lane's worker (8 on 2 cores at the defaults) a collection's mark phase put up to
		// eight threads of normal priority on the two cores, and the requests it overlapped
		// waited their turn (BENCHMARKS.md, issue 43).
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + exportSlots(lanes))
	}
	gcdefaults.Apply(exportSlots(lanes))
	stopProfile, err := cpuprofile.Start(cpuProf)
	if err != nil {
		return blameEnv(sv.fs, usageError{fmt.Errorf("--cpuprofile: %w", err)}, "cpuprofile")
	}
	err = app.Serve(ctx, settings)
	if perr := stopProfile(); perr != nil {
		log.Warn("the CPU profile is incomplete", "file", cpuProf, "err", perr)
	}
	if sv.open && errors.Is(err, datadir.ErrInUse) {
		// A second double-click: show the running instance instead of an error, also
		// when the first is still starting.
		waiting := func() {
			fmt.Fprintf(stderr, "sheetq is starting in another process; waiting for it (up to %s)\n", openWait)
		}
		url, oerr := app.OpenRunning(ctx, datadir.Dir{Root: sv.dataDir}, openWait, waiting)
		if oerr == nil {
			fmt.Fprintf(stderr, "sheetq is already running at %s; opened it in the browser\n", url)
			return nil
		}
		return fmt.Errorf("%w; %v", err, oerr)
	}
	return err
}

// served is what serveSettings makes of serve's command line: the settings the app
// runs, and what serve does around them.
type served struct {
	settings *app.Settings
	log      *slog.Logger
	fs       *flag.FlagSet // the parsed flags, whose errors name SHEETQ_* (blameEnv)
	cpuProf  string        // --cpuprofile
	open     bool          // --open
	dataDir  string
}

// serveSettings parses serve's flags and SHEETQ_*, applies the config file's [serve]
// table to the flags neither set, checks the values, and resolves them with the rest of
// the file (app.Resolve): flags beat the environment, which beats the file, which beats
// the defaults. It starts nothing; force is the second signal's channel (secondSignal).
func serveSettings(version string, args []string, stderr io.Writer, force <-chan struct{}) (served, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      app.Config
		eng      jobs.Config
		logLevel string
		logJSON  bool
		open     bool
		proxies  string
		checkDB  string
		cpuProf  string
	)
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address (`host:port`; port 0 picks a free port)")
	fs.StringVar(&cfg.DataDir, "data", "", "data `directory` (default: the user's data folder)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "config `file` naming the data sources (default <data>/sheetq.toml)")
	fs.StringVar(&cfg.ReportsDir, "reports", "", "reports `folder`, watched for changes (default <data>/reports)")
	fs.StringVar(&cfg.Token, "token", "", "access `token` required as Authorization: Bearer, named \"default\" (some token is mandatory off loopback; more in the config file's [[tokens]])")
	fs.StringVar(&cfg.BaseURL, "base-url", "", "public `URL` when published behind a reverse proxy, e.g. https://sheetq.example.com/")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For/-Proto/-Host are believed")
	def := jobs.Defaults()
	fs.IntVar(&eng.Workers, "workers", def.Workers, "how many exports run at once")
	wantRange(fs, "workers", workersRange)
	fs.IntVar(&eng.Nice, "worker-nice", 19, "CPU priority of running exports as a nice value, 0 to 19 (Linux): 19 lets accepting requests, pages and the rest of the machine go first; 0 runs exports at the server's priority")
	wantRange(fs, "worker-nice", niceRange)
	fs.DurationVar(&eng.Heartbeat, "heartbeat", def.Heartbeat, "how often a running export records it is alive")
	fs.DurationVar(&eng.StaleAfter, "stale-after", def.StaleAfter, "heartbeat age after which a running export is recovered")
	fs.DurationVar(&eng.StallAfter, "stall-after", 30*time.Minute, "fail an attempt that reports no progress for this long (0 = off)")
	fs.DurationVar(&eng.ShutdownGrace, "shutdown-grace", def.ShutdownGrace, "on SIGINT/SIGTERM, how long running exports may finish")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", store.DefaultMaxAttempts, "attempts per export before it fails")
	fs.DurationVar(&cfg.Retention, "retention", 7*24*time.Hour, "remove finished exports' files after this long, and the exports after twice as long (0 = keep)")
	fs.DurationVar(&cfg.AuditKeep, "audit-keep", 9600*time.Hour, "remove audit log entries after this long (default 400 days; 0 = keep)")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&logJSON, "log-json", false, "log JSON lines instead of text")
	fs.BoolVar(&open, "open", false, "open the browser once the server is up")
	fs.StringVar(&cfg.StoreURL, "store", "", "job store shared by several nodes: a postgres:// or mysql://user:password@host:port/database `URL` (mariadb:// too), or env:NAME naming a variable that holds one (default: the data directory's SQLite file)")
	fs.StringVar(&cfg.FilesURL, "files", "", "file store shared by several nodes: s3://BUCKET/PREFIX?endpoint=http://host:port&region=REGION `URL` (default: the data directory's exports folder)")
	fs.StringVar(&cfg.FilesDownload, "files-download", "", "how a download from an s3:// file store reaches the client: stream (through this node; the default) or redirect (to a presigned URL of the bucket, valid 15 minutes)")
	fs.StringVar(&cfg.Node, "node", "", "this node's `name` in the jobs it runs and in its logs (default host/pid)")
	fs.BoolVar(&cfg.PollOnly, "poll-only", false, "with a PostgreSQL store, find new work by polling alone, without a LISTEN connection (for PgBouncer in transaction mode)")
	fs.StringVar(&cpuProf, "cpuprofile", "", "write the server's CPU profile to `FILE` until it stops (for BENCHMARKS.md; go tool pprof reads it)")
	fs.StringVar(&checkDB, "check-db", "quick", "check the database file at start, refusing a damaged one: quick (the header, pages of zeros, and SQLite's quick_check for up to 2 s, finished in the background on a larger file), full (SQLite's integrity_check to the end; minutes for gigabytes) or off")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sheetq serve [flags]\n\nServe the API and pages. Example:\n  sheetq serve --addr 127.0.0.1:8080 --data ./data --workers 4\n\n"+
			"Flags (each also read from SHEETQ_<NAME>, e.g. SHEETQ_STALE_AFTER=1m, and from the config file's\n"+
			"[serve] table, e.g. stale_after = \"1m\"; flags beat the environment, which beats the file):\n")
		printFlags(stderr, fs)
	}
	if err := parseWithEnv(fs, args); err != nil {
		return served{}, err
	}
	if fs.NArg() > 0 {
		return served{}, usageError{fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if cfg.DataDir == "" {
		dir, err := datadir.Default()
		if err != nil {
			return served{}, err
		}
		cfg.DataDir = dir
	}
	// The config file fills the flags neither the command line nor the environment set;
	// app.Resolve reads its other tables from the same value.
	fc, err := app.LoadConfigFile(cfg.DataDir, cfg.ConfigFile)
	if err != nil {
		return served{}, err
	}
	fromFile, err := applyFileFlags(fs, fc.Serve, fc.Path())
	if err != nil {
		return served{}, err
	}
	cfg.File = &fc
	if cfg.CheckDB, err = sqlite.ParseCheckMode(checkDB); err != nil {
		return served{}, fromFile.bad("check-db", fmt.Sprintf(": %v", err))
	}
	if cfg.TrustedProxies, err = app.ParseTrustedProxies(proxies); err != nil {
		return served{}, fromFile.bad("trusted-proxies", fmt.Sprintf(": %v", err))
	}
	// A double-click on a machine where something else holds the default port should
	// still start: only an address the user chose (--addr or SHEETQ_ADDR, which
	// parseWithEnv sets through the flag, so Visit sees both) is binding.
	cfg.AddrFallback = true
	fs.Visit(func(f *flag.Flag) { cfg.AddrFallback = cfg.AddrFallback && f.Name != "addr" })
	// --workers (or SHEETQ_WORKERS, [serve] workers) beats the file's [queues.exports].
	fs.Visit(func(f *flag.Flag) { cfg.WorkersSet = cfg.WorkersSet || f.Name == "workers" })
	switch {
	case !workersRange.holds(eng.Workers):
		return served{}, fromFile.bad("workers", workersRange.rule())
	case eng.Heartbeat <= 0:
		return served{}, fromFile.bad("heartbeat", "must be positive")
	case eng.StallAfter < 0:
		return served{}, fromFile.bad("stall-after", "cannot be negative")
	case eng.ShutdownGrace < 0:
		return served{}, fromFile.bad("shutdown-grace", "cannot be negative")
	case cfg.Retention < 0:
		return served{}, fromFile.bad("retention", "cannot be negative")
	case cfg.AuditKeep < 0:
		return served{}, fromFile.bad("audit-keep", "cannot be negative")
	case cfg.MaxAttempts < 1:
		return served{}, fromFile.bad("max-attempts", "must be at least 1")
	case !niceRange.holds(eng.Nice):
		return served{}, fromFile.bad("worker-nice", niceRange.rule())
	}
	// The engine's own rules, such as stale-after at least twice the heartbeat, are
	// checked once, by the engine, before anything starts.
	if err := eng.Validate(); err != nil {
		return served{}, fromFile.blameAny(err, "stale-after", "heartbeat")
	}
	if eng.ShutdownGrace == 0 {
		eng.ShutdownGrace = time.Nanosecond // "no grace": stop running jobs at once
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return served{}, blameEnv(fs, usageError{fmt.Errorf("--log-level: %w", err)}, "log-level")
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if logJSON {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(app.LogHandler(h))
	cfg.Engine, cfg.Logger, cfg.Version = eng, log, versionString(version)
	if open {
		cfg.Ready = func(url string) {
			if err := app.OpenBrowser(url); err != nil {
				log.Warn("could not open a browser; open the URL yourself", "url", url, "err", err)
			}
		}
	}
	cfg.Force = force
	// Resolved once, before anything is created: a bad --base-url, --store, --node...
	// exits 2 like the flags checked above, and the process is sized by the same lanes
	// that the app runs.
	settings, err := app.Resolve(cfg)
	if err != nil {
		return served{}, settingError(fs, err)
	}
	return served{settings: settings, log: log, fs: fs, cpuProf: cpuProf, open: open, dataDir: cfg.DataDir}, nil
}

// openWait bounds how long a second launch waits for the first to answer.
const openWait = 30 * time.Second

// secondSignal returns a channel closed by the second shutdown signal. The first one
// cancels ctx (main's signal.NotifyContext), and the server lets running jobs finish for
// --shutdown-grace; the second tells it to stop them at once and put them back in the
// queue. After that the signals' default action is restored, so a third one ends the
// process on the spot. unwatch stops watching.
func secondSignal() (force <-chan struct{}, unwatch func()) {
	f, done := make(chan struct{}), make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, ShutdownSignals()...)
	go func() {
		defer signal.Stop(sigs)
		// Every signal reaches this channel and main's context alike.
		for seen := 0; ; {
			select {
			case <-sigs:
				if seen++; seen == 2 {
					close(f)
					signal.Reset(ShutdownSignals()...)
					return
				}
			case <-done:
				return
			}
		}
	}()
	return f, func() { close(done) }
}

// exportSlots is how many exports the lanes run at once: every lane's workers but the
// webhooks lane's, whose deliveries hold a few KB, and the deliveries lane's, which
// stream a finished file (gcdefaults.MemoryLimit).
func exportSlots(lanes jobs.Config) int {
	n := lanes.Workers
	for q, w := range lanes.Queues {
		if q != webhook.Queue && q != deliver.Queue {
			n += w
		}
	}
	return n
}
