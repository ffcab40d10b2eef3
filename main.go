// Command sheetq turns slow data pulls into spreadsheets: a durable job queue on SQLite,
// a bounded worker pool, and an HTTP API and pages to request and collect .xlsx exports.
package main

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
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"sheetq/app"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// version is set at build time with -ldflags "-X main.version=..."; build info fills in
// the rest.
var version = "dev"

// shutdownSignals end the server gracefully; SIGHUP too: closing the terminal that runs
// sheetq must shut it down gracefully.
var shutdownSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), shutdownSignals...)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ue usageError
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sheetq:", err)
		}
		var ee exitError // client commands: their own statuses (client.go)
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		// A double-click: serve on the defaults and open the browser.
		args = []string{"serve", "--open"}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "reports":
		return reportsCmd(args[1:], stdout, stderr)
	case "export":
		return exportCmd(ctx, args[1:], stdout, stderr)
	case "jobs":
		return jobsCmd(ctx, args[1:], stdout, stderr)
	case "backup":
		return backupCmd(ctx, args[1:], stdout, stderr)
	case "doctor":
		return doctorCmd(ctx, args[1:], stdout, stderr)
	case "loadtest":
		return loadtestCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return usageError{fmt.Errorf("unknown command %q (try: sheetq help)", args[0])}
	}
}

const usage = `sheetq turns slow data pulls into spreadsheets.

Usage:
  sheetq                 serve on 127.0.0.1:8080 and open the browser
  sheetq serve [flags]   serve the API and pages (sheetq serve --help lists the flags)
  sheetq reports check [DIR]
                         check report files (default: the data directory's reports folder)
  sheetq backup FILE [--data DIR]
                         copy the database to FILE, safe while the server runs
  sheetq doctor [--data DIR] [--json] [--fix]
                         check the data directory: database, stray files, missing files, disk space
  sheetq export REPORT [-p name=value]... [--wait] [-o FILE] [--server URL]
                         ask a running server for an export; --wait follows it and downloads the file
  sheetq jobs list|show|cancel|retry
                         look at and manage a running server's exports
  sheetq loadtest [--profile burst|overload|steady] [--server URL]
                         measure a running server under load and check every request
  sheetq version         print the version

Every flag can also be set with SHEETQ_<NAME>, for example SHEETQ_WORKERS=4.
`

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
	)
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address (`host:port`; port 0 picks a free port)")
	fs.StringVar(&cfg.DataDir, "data", "", "data `directory` (default: the user's data folder)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "config `file` naming the data sources (default <data>/sheetq.toml)")
	fs.StringVar(&cfg.ReportsDir, "reports", "", "reports `folder`, watched for changes (default <data>/reports)")
	fs.StringVar(&cfg.Token, "token", "", "access `token` required as Authorization: Bearer, named \"default\" (some token is mandatory off loopback; more in the config file's [[tokens]])")
	fs.StringVar(&cfg.BaseURL, "base-url", "", "public `URL` when published behind a reverse proxy, e.g. https://sheetq.example.com/")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For/-Proto/-Host are believed")
	fs.IntVar(&eng.Workers, "workers", 2, "how many exports run at once")
	fs.IntVar(&eng.Nice, "worker-nice", 19, "CPU priority of running exports as a nice value, 0 to 19 (Linux): 19 lets accepting requests, pages and the rest of the machine go first; 0 runs exports at the server's priority")
	fs.DurationVar(&eng.Heartbeat, "heartbeat", 5*time.Second, "how often a running export records it is alive")
	fs.DurationVar(&eng.StaleAfter, "stale-after", 30*time.Second, "heartbeat age after which a running export is recovered")
	fs.DurationVar(&eng.StallAfter, "stall-after", 30*time.Minute, "fail an attempt that reports no progress for this long (0 = off)")
	fs.DurationVar(&eng.ShutdownGrace, "shutdown-grace", 30*time.Second, "on SIGINT/SIGTERM, how long running exports may finish")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 3, "attempts per export before it fails")
	fs.DurationVar(&cfg.Retention, "retention", 7*24*time.Hour, "remove finished exports' files after this long, and the exports after twice as long (0 = keep)")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&logJSON, "log-json", false, "log JSON lines instead of text")
	fs.BoolVar(&open, "open", false, "open the browser once the server is up")
	fs.StringVar(&checkDB, "check-db", "quick", "check the database file at start, refusing a damaged one: quick (the header, pages of zeros, and SQLite's quick_check for up to 2 s, finished in the background on a larger file), full (SQLite's integrity_check to the end; minutes for gigabytes) or off")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sheetq serve [flags]\n\nServe the API and pages. Example:\n  sheetq serve --addr 127.0.0.1:8080 --data ./data --workers 4\n\n"+
			"Flags (each also read from SHEETQ_<NAME>, e.g. SHEETQ_STALE_AFTER=1m, and from the config file's\n"+
			"[serve] table, e.g. stale_after = \"1m\"; flags beat the environment, which beats the file):\n")
		fs.PrintDefaults()
	}
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if cfg.DataDir == "" {
		dir, err := app.DefaultDataDir()
		if err != nil {
			return err
		}
		cfg.DataDir = dir
	}
	// The config file fills the flags neither the command line nor the environment set.
	configPath := cfg.ConfigFile
	if configPath == "" {
		configPath = app.DataDir{Root: cfg.DataDir}.Config()
	}
	fc, err := app.LoadFileConfig(configPath, cfg.ConfigFile == "")
	if err != nil {
		return err
	}
	if err := applyFileFlags(fs, fc.Serve, configPath); err != nil {
		return err
	}
	cfg.File = &fc
	if cfg.CheckDB, err = store.ParseCheckMode(checkDB); err != nil {
		return usageError{fmt.Errorf("--check-db: %w", err)}
	}
	if cfg.TrustedProxies, err = app.ParseTrustedProxies(proxies); err != nil {
		return usageError{fmt.Errorf("--trusted-proxies: %w", err)}
	}
	// A double-click on a machine where something else holds the default port should
	// still start: only an address the user chose (--addr or SHEETQ_ADDR, which
	// parseWithEnv sets through the flag, so Visit sees both) is binding.
	cfg.AddrFallback = true
	fs.Visit(func(f *flag.Flag) { cfg.AddrFallback = cfg.AddrFallback && f.Name != "addr" })
	switch {
	case eng.Workers < 1 || eng.Workers > 256:
		return usageError{errors.New("--workers must be from 1 to 256")}
	case eng.Heartbeat <= 0:
		return usageError{errors.New("--heartbeat must be positive")}
	case eng.StaleAfter < 2*eng.Heartbeat:
		return usageError{fmt.Errorf("--stale-after (%s) must be at least twice --heartbeat (%s)", eng.StaleAfter, eng.Heartbeat)}
	case eng.StallAfter < 0 || eng.ShutdownGrace < 0:
		return usageError{errors.New("--stall-after and --shutdown-grace cannot be negative")}
	case cfg.Retention < 0:
		return usageError{errors.New("--retention cannot be negative")}
	case cfg.MaxAttempts < 1:
		return usageError{errors.New("--max-attempts must be at least 1")}
	case eng.Nice < 0 || eng.Nice > 19:
		return usageError{errors.New("--worker-nice must be from 0 to 19")}
	}
	if eng.Nice > 0 && jobs.LowerPrioritySupported {
		// Each running export holds a P on its low-priority thread even while the OS
		// runs something else in its place; a P per worker on top of the default keeps
		// one free for every core, so requests never queue behind an export's thread.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + eng.Workers)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	if eng.ShutdownGrace == 0 {
		eng.ShutdownGrace = time.Nanosecond // "no grace": stop running jobs at once
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if logJSON {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(app.LogHandler(h))
	cfg.Engine, cfg.Logger, cfg.Version = eng, log, versionString()
	if open {
		cfg.Ready = func(url string) {
			if err := app.OpenBrowser(url); err != nil {
				log.Warn("could not open a browser; open the URL yourself", "url", url, "err", err)
			}
		}
	}
	force, unwatch := secondSignal()
	defer unwatch()
	cfg.Force = force
	err = app.Run(ctx, cfg)
	if open && errors.Is(err, app.ErrDirInUse) {
		// A second double-click: show the running instance instead of an error, also
		// when the first is still starting.
		waiting := func() {
			fmt.Fprintf(stderr, "sheetq is starting in another process; waiting for it (up to %s)\n", openWait)
		}
		url, oerr := app.OpenRunning(ctx, app.DataDir{Root: cfg.DataDir}, openWait, waiting)
		if oerr == nil {
			fmt.Fprintf(stderr, "sheetq is already running at %s; opened it in the browser\n", url)
			return nil
		}
		return fmt.Errorf("%w; %v", err, oerr)
	}
	return err
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
	signal.Notify(sigs, shutdownSignals...)
	go func() {
		defer signal.Stop(sigs)
		// Every signal reaches this channel and main's context alike.
		for seen := 0; ; {
			select {
			case <-sigs:
				if seen++; seen == 2 {
					close(f)
					signal.Reset(shutdownSignals...)
					return
				}
			case <-done:
				return
			}
		}
	}()
	return f, func() { close(done) }
}

// notInFile are the serve flags the config file cannot set: where it is, and the data
// directory it defaults into, are known before it is read; tokens go in [[tokens]].
var notInFile = map[string]string{
	"config": "it is the config file's own location",
	"data":   "the config file's default location depends on it",
	"token":  "use [[tokens]] name = \"...\" token = \"...\" instead",
}

// applyFileFlags sets, from the config file's [serve] table, every flag that neither the
// command line nor SHEETQ_* set (parseWithEnv has run, so Visit sees both). Keys are
// flag names with '_' for '-'; an unknown key is an error, like elsewhere in the file.
func applyFileFlags(fs *flag.FlagSet, values map[string]any, path string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := strings.ReplaceAll(key, "_", "-")
		if why, ok := notInFile[name]; ok {
			return fmt.Errorf("config %s: [serve] %s cannot be set in the config file: %s", path, key, why)
		}
		if fs.Lookup(name) == nil || strings.Contains(key, "-") {
			return fmt.Errorf("config %s: unknown key serve.%s", path, key)
		}
		if set[name] {
			continue
		}
		var v string
		switch x := values[key].(type) {
		case string:
			v = x
		case int64, float64, bool:
			v = fmt.Sprint(x)
		case []any: // a list, such as trusted_proxies = ["10.0.0.0/8", "192.168.0.0/16"]
			parts := make([]string, 0, len(x))
			for _, e := range x {
				parts = append(parts, fmt.Sprint(e))
			}
			v = strings.Join(parts, ",")
		default:
			return fmt.Errorf("config %s: serve.%s: want a string, number, boolean or list", path, key)
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("config %s: serve.%s = %q: %w", path, key, v, err)
		}
	}
	return nil
}

// parseWithEnv parses args, then fills every flag not given on the command line from
// SHEETQ_<NAME> (dashes become underscores), so flags beat the environment.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := "SHEETQ_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = usageError{fmt.Errorf("%s=%q: %w", env, v, e)}
			}
		}
	})
	return err
}

// versionString is the version plus the commit and build date from build info.
func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, at, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += " (" + rev + dirty + ", " + at + ")"
		}
	}
	return v
}

// reportsCmd runs `sheetq reports check [DIR]`: CI for report authors.
func reportsCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usageError{errors.New("usage: sheetq reports check [DIR]")}
	}
	fs := flag.NewFlagSet("reports check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` whose reports folder to check (default: the user's data folder)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sheetq reports check [DIR]\n\nParse every report file in DIR and print its errors with file and line.\nExits 1 if any file is broken. Example:\n  sheetq reports check ./reports\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseWithEnv(fs, args[1:]); err != nil {
		return err
	}
	var dir string
	switch fs.NArg() {
	case 0:
		root, err := dataRoot(*data)
		if err != nil {
			return err
		}
		dir = app.DataDir{Root: root}.Reports()
	case 1:
		dir = fs.Arg(0)
	default:
		return usageError{errors.New("reports check takes at most one folder")}
	}
	entries, err := export.CheckDir(dir)
	if err != nil {
		return err
	}
	broken := 0
	for _, e := range entries {
		if e.Err != nil {
			broken++
			fmt.Fprintf(stdout, "FAIL %s\n", e.Err)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s  %s (source %s, %d params)\n", e.Report.ID, e.Report.Title, e.Report.Source, len(e.Report.Params))
	}
	if broken > 0 {
		return fmt.Errorf("%d of %d report files in %s are broken", broken, len(entries), dir)
	}
	fmt.Fprintf(stdout, "%d report files in %s are valid\n", len(entries), dir)
	return nil
}

// dataRoot is the data directory a command works on: the --data value, or the user's
// data folder.
func dataRoot(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return app.DefaultDataDir()
}

// serveGCPercent is the server's garbage-collection target (GOGC) unless the GOGC
// variable sets one. Accepting a request allocates about 35 KB (decoding, the insert, the
// answer, the event stream), and the live heap is a few MB, so with Go's default of 100 a
// burst of 1,200 requests a second ran about 30 collections a second; each one's mark
// phase takes a whole P, half of a 2-core machine, and the group commit that every
// request waits for queued behind it. At 400 the heap may grow to five times the live
// data (tens of MB here) and collections are a quarter as frequent (BENCHMARKS.md).
const serveGCPercent = 400
