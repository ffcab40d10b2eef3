// Package app is sheetq's composition root: the configuration of `sheetq serve` and its
// validation, the one constructor (New) that builds the store, the export and webhook
// kinds, the event hub, the metrics, the engine, the janitor and the HTTP handler, the
// start and stop order (App.Start, App.Stop, Run), the config file, and the routes that
// compose the handlers of app/api, app/web and app/events behind app/middleware
// (ARCHITECTURE.md, "Parts"). Nothing but the command line imports it.
package app

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"

	"sheetq/app/api"
	"sheetq/app/events"
	"sheetq/app/middleware"
	"sheetq/internal/datadir"
	"sheetq/internal/envref"
	"sheetq/internal/objstore"
	"sheetq/jobs"
	"sheetq/jobs/webhook"
	"sheetq/store/sqlite"
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
	// File is the config file when the caller has read it already; nil: New reads
	// ConfigFile (or <data>/sheetq.toml).
	File *FileConfig
	// Retention is how long finished exports keep their files (rows: twice as long);
	// zero keeps everything.
	Retention time.Duration
	// MaxAttempts is each new export's attempt budget (default store.DefaultMaxAttempts).
	MaxAttempts int
	// Engine tunes the worker pool; its directories, logger, hooks and gate are set by New,
	// and its lanes (Queues) are completed from the config file's [queues].
	Engine jobs.Config
	// WorkersSet says that Engine.Workers was chosen on the command line (--workers,
	// SHEETQ_WORKERS or [serve] workers): it then beats the config file's
	// [queues.exports], as flags beat the file everywhere.
	WorkersSet bool
	// Version is shown in /healthz and the page header.
	Version string
	// Logger receives all logs (default slog.Default()).
	Logger *slog.Logger
	// Ready, if set, is called with the base URL once the server accepts connections.
	Ready func(url string)
	// CheckDB is how much of the database file is checked at start (default
	// sqlite.CheckQuick); a damaged file is refused.
	CheckDB sqlite.CheckMode
	// Force, once closed while Run shuts down (a second Ctrl-C), stops the running jobs
	// at once and puts them back in the queue instead of waiting out the grace period.
	Force <-chan struct{}
	// BodyTimeout is the time a client has to send a request body (default
	// middleware.RequestBodyTimeout).
	BodyTimeout time.Duration

	// Several nodes (docs/several-nodes.md). Each falls back to the config file's
	// [store] and [files] tables; all empty is the single-node install: the data
	// directory's SQLite file and exports/ folder.

	// StoreURL is the job store: "" for the data directory's SQLite file, or a
	// postgres:// URL (or env:NAME naming a variable that holds one) that any number of
	// nodes share (--store, SHEETQ_STORE, [store] url).
	StoreURL string
	// FilesURL is where published files go: "" for the data directory's exports/, or
	// s3://BUCKET/PREFIX?endpoint=URL&region=REGION (--files, SHEETQ_FILES, [files] url).
	FilesURL string
	// FilesDownload is how a file in a bucket reaches a client: "stream" (through this
	// node, the default) or "redirect" (to a presigned URL of the bucket)
	// (--files-download, SHEETQ_FILES_DOWNLOAD, [files] download).
	FilesDownload string
	// Node names this node in the jobs it runs (their worker) and in its logs (--node,
	// SHEETQ_NODE; default host/pid).
	Node string
	// PollOnly makes a PostgreSQL node find work by polling alone, without a LISTEN
	// connection, for PgBouncer in transaction mode (--poll-only).
	PollOnly bool

	// The knobs below are for tests; the command line leaves them zero.

	// Now, if set, is the clock of the store and the engine.
	Now func() time.Time
	// BusyTimeout is the store's busy_timeout (default the store's).
	BusyTimeout time.Duration
	// Events tunes the event hub (buffers, keep-alive, progress interval).
	Events events.Config
	// Webhooks, if set, is the webhook delivery config instead of the config file's
	// [webhooks] table (New sets its Recorder and Logger).
	Webhooks *webhook.Config
	// Idle leaves the engine stopped after Start: accepted jobs stay PENDING.
	Idle bool

	tokens   []Token      // every accepted token, set by validate
	download api.Download // FilesDownload, parsed by validate
}

// Token is a named access token.
type Token = middleware.Token

// DefaultTokenName is the name of the --token / SHEETQ_TOKEN token.
const DefaultTokenName = middleware.DefaultTokenName

// LogHandler wraps h so that every record logged with a request's context carries that
// request's id as request_id (middleware.LogHandler).
func LogHandler(h slog.Handler) slog.Handler { return middleware.LogHandler(h) }

// BadValueError is a setting of the command line or the environment that Run refused
// before it created anything: the CLI exits 2 for it, as for any bad flag (docs/cli.md,
// "Command line"). A bad config file's error is not one; it names the file instead.
type BadValueError struct {
	Err error
	// Flag is the refused flag's name without dashes ("store"), for the CLI to name
	// the SHEETQ_* variable when that set it.
	Flag string
}

func (e *BadValueError) Error() string { return e.Err.Error() }
func (e *BadValueError) Unwrap() error { return e.Err }

// setting names a refused setting by where it came from: a *BadValueError naming the
// flag when the command line or the environment set it, else the config file and its
// key.
func setting(fromFlag bool, flag string, fc *FileConfig, key string, err error) error {
	if fromFlag {
		return &BadValueError{fmt.Errorf("%s: %w", flag, err), strings.TrimPrefix(flag, "--")}
	}
	return fc.Errorf("%s: %w", key, err)
}

func (c *Config) validate() error {
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8080")
	if c.DataDir == "" {
		return errors.New("no data directory: set --data")
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return &BadValueError{fmt.Errorf("bad --addr %q: %w", c.Addr, err), "addr"}
	}
	path := cmp.Or(c.ConfigFile, datadir.Dir{Root: c.DataDir}.Config())
	if c.File == nil {
		fc, err := LoadFileConfig(path, c.ConfigFile == "")
		if err != nil {
			return err
		}
		c.File = &fc
	}
	if err := c.File.lanes(&c.Engine, c.WorkersSet); err != nil {
		return err
	}
	// The stores' URLs are checked before anything is created, so that a typo refuses
	// the start with one line and leaves no data directory behind.
	if _, err := PostgresURL(cmp.Or(c.StoreURL, c.File.Store.URL)); err != nil {
		return setting(c.StoreURL != "", "--store", c.File, "[store] url", err)
	}
	if u := cmp.Or(c.FilesURL, c.File.Files.URL); u != "" {
		if _, err := objstore.ParseURL(u); err != nil {
			return setting(c.FilesURL != "", "--files", c.File, "[files] url", err)
		}
	}
	if err := c.File.CheckBucketKeys(c.FilesURL); err != nil {
		return err
	}
	if c.download, err = api.ParseDownload(cmp.Or(c.FilesDownload, c.File.Files.Download)); err != nil {
		return setting(c.FilesDownload != "", "--files-download", c.File, "[files] download", err)
	}
	if c.tokens, err = c.allTokens(); err != nil {
		return err
	}
	if c.BaseURL, err = normalizeBaseURL(c.BaseURL); err != nil {
		return &BadValueError{err, "base-url"}
	}
	if !middleware.IsLoopbackHost(host) && len(c.tokens) == 0 {
		return &BadValueError{fmt.Errorf("listening on %s exposes sheetq beyond this machine: set an access token with --token or SHEETQ_TOKEN, or [[tokens]] in the config file", c.Addr), "addr"}
	}
	if len(c.Node) > 64 || strings.IndexFunc(c.Node, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return &BadValueError{fmt.Errorf("--node: a node name is up to 64 printable characters without spaces, not %q", c.Node), "node"}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = slog.New(LogHandler(c.Logger.Handler()))
	if c.Node != "" {
		// Several nodes' logs end up side by side: each line says whose it is.
		c.Logger = c.Logger.With("node", c.Node)
	}
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
	var fromFile []Token
	for i, t := range c.File.Tokens {
		secret, err := ResolveSecret(t.Token)
		if err != nil {
			return nil, c.File.Errorf("[[tokens]] %q: token: %w", t.Name, err)
		}
		if t.Name == "" {
			return nil, c.File.Errorf("[[tokens]] number %d has no name", i+1)
		}
		fromFile = append(fromFile, Token{Name: t.Name, Secret: secret})
	}
	// The file's own tokens first, so that what is wrong with one of them (too short,
	// a name twice) names the file; then all, for a clash with --token.
	if err := middleware.CheckTokens(fromFile); err != nil {
		return nil, c.File.Errorf("[[tokens]]: %w", err)
	}
	all = append(all, fromFile...)
	if err := middleware.CheckTokens(all); err != nil {
		return nil, err
	}
	return all, nil
}

// ResolveSecret reads a secret of the config file (a token, a bucket key): env:NAME reads
// the environment, file:PATH reads a file (systemd's LoadCredential), anything else is
// the secret itself.
func ResolveSecret(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "env:"):
		return envref.Resolve(v)
	case strings.HasPrefix(v, "file:"):
		path := strings.TrimPrefix(v, "file:")
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", path)
		}
		return s, nil
	}
	return v, nil
}

// ParseTrustedProxies parses a comma-separated list of CIDRs or single addresses.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: want a CIDR such as 10.0.0.0/8 or an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want a CIDR such as 10.0.0.0/8 or an address", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// normalizeBaseURL checks a public base URL and returns it as scheme://host[:port]. A
// path is refused: sheetq's links are absolute paths, so it must be served at the root
// of its host.
func normalizeBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--base-url %q: want an absolute http:// or https:// URL such as https://sheetq.example.com/", raw)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--base-url %q: sheetq must be served at the root of its host (no path, query or user)", raw)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}
