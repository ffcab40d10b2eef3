// Package app is sheetq's composition root: the configuration of `sheetq serve`, resolved
// once with the config file into Settings (the rules that the tool commands' stores
// share: ResolveStores), the one constructor (New) that builds the store, the export and webhook
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

	"sheetq/app/access"
	"sheetq/app/middleware"
	"sheetq/internal/envref"
	"sheetq/jobs"
	"sheetq/store/sqlite"
)

// Config is everything `sheetq serve` is given: the command line's values (flags, or
// their SHEETQ_* variables) and the process's wiring. Resolve completes it with the
// config file and the defaults into the Settings that the app runs.
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
	// File is the config file when the caller has read it already; nil: Resolve reads
	// ConfigFile (or <data>/sheetq.toml).
	File *FileConfig
	// Retention is how long finished exports keep their files (rows: twice as long);
	// zero keeps everything.
	Retention time.Duration
	// AuditKeep is how long the audit log keeps an entry (--audit-keep; the flag's
	// default is 400 days); zero keeps every entry.
	AuditKeep time.Duration
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

	// Test holds the knobs of tests; the command line never sets it.
	Test *TestHooks

	tokens []Token // every accepted token, set by validate
	stores Stores  // StoreURL, FilesURL and FilesDownload over the file's, set by validate
	signIn signIn  // [oidc] and [[people]] resolved, set by validate (configpeople.go)
}

// Token is a named access token.
type Token = middleware.Token

// DefaultTokenName is the name of the --token / SHEETQ_TOKEN token.
const DefaultTokenName = middleware.DefaultTokenName

// LogHandler wraps h so that every record logged with a request's context carries that
// request's id as request_id (middleware.LogHandler).
func LogHandler(h slog.Handler) slog.Handler { return middleware.LogHandler(h) }

// validate resolves c in place (Resolve): the defaults, the config file, the lanes, the
// stores and the tokens. Nothing but Resolve, and tests of its rules, call it.
func (c *Config) validate() error {
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8080")
	if c.DataDir == "" {
		return errors.New("no data directory: set --data")
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return &BadValueError{fmt.Errorf("bad --addr %q: %w", c.Addr, err), "addr"}
	}
	if c.File == nil {
		fc, err := LoadConfigFile(c.DataDir, c.ConfigFile)
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
	flags := StoreFlags{Store: c.StoreURL, Files: c.FilesURL, FilesDownload: c.FilesDownload}
	if c.stores, err = ResolveStores(flags, *c.File); err != nil {
		return err
	}
	if c.tokens, err = c.allTokens(); err != nil {
		return err
	}
	if c.BaseURL, err = normalizeBaseURL(c.BaseURL); err != nil {
		return &BadValueError{err, "base-url"}
	}
	if err := c.File.Access.check(*c.File); err != nil {
		return err
	}
	if c.signIn, err = resolveSignIn(*c.File, c.BaseURL); err != nil {
		return err
	}
	if !middleware.IsLoopbackHost(host) && len(c.tokens) == 0 && c.signIn.oidc == nil {
		return &BadValueError{fmt.Errorf("listening on %s exposes sheetq beyond this machine: set an access token with --token or SHEETQ_TOKEN, or [[tokens]] or [oidc] in the config file", c.Addr), "addr"}
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
		all = append(all, Token{Name: DefaultTokenName, Secret: c.Token, Role: access.Admin})
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
		role, ok := access.ParseRole(t.Role)
		if !ok {
			return nil, c.File.Errorf(`[[tokens]] %q: role %q: use "admin" or "member"`, t.Name, t.Role)
		}
		if err := checkAttrs(t.Attrs); err != nil {
			return nil, c.File.Errorf("[[tokens]] %q: attrs: %w", t.Name, err)
		}
		fromFile = append(fromFile, Token{Name: t.Name, Secret: secret, Role: role, Groups: access.NormalizeGroups(t.Groups), Attrs: t.Attrs})
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
