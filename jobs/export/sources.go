package export

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"sheetq/internal/envref"
)

// SourceConfig is one [sources.NAME] table of the config file.
type SourceConfig struct {
	Driver string `toml:"driver"` // sqlite | postgres | mysql | csv | http
	Path   string `toml:"path"`   // sqlite: a file; csv: a folder, each file a table
	DSN    string `toml:"dsn"`    // postgres, mysql: a DSN, or "env:NAME" to read it from the environment

	// The http driver's keys (docs/reports-and-sources.md, "HTTP sources").

	// BaseURL is the API's URL, which a report's request path is relative to.
	BaseURL string `toml:"base_url"`
	// Auth is how requests authenticate; nil: they do not.
	Auth *HTTPAuth `toml:"auth"`
	// Rate is the most requests per second this node sends the API, all exports
	// together; 0: defaultHTTPRate.
	Rate float64 `toml:"rate"`
	// AllowPrivate lets requests reach loopback, private and link-local addresses.
	AllowPrivate bool `toml:"allow_private"`
	// Timeout bounds each response, body included, as a duration ("30s"); "": 30s.
	Timeout string `toml:"timeout"`
	// MaxResponse bounds each response body, as a size ("32MiB"); "": 64 MiB.
	MaxResponse string `toml:"max_response"`
	// MaxPages bounds the pages of one export; 0: 1,000,000.
	MaxPages int64 `toml:"max_pages"`
}

// HTTPAuth is an http source's auth table. Secrets (Token, Password, Value,
// ClientSecret) are env:NAME, file:PATH or the value itself.
type HTTPAuth struct {
	Type         string   `toml:"type"`          // bearer | basic | header | oauth2
	Token        string   `toml:"token"`         // bearer
	User         string   `toml:"user"`          // basic
	Password     string   `toml:"password"`      // basic
	Name         string   `toml:"name"`          // header: the header's name
	Value        string   `toml:"value"`         // header: its value
	TokenURL     string   `toml:"token_url"`     // oauth2 client credentials
	ClientID     string   `toml:"client_id"`     // oauth2
	ClientSecret string   `toml:"client_secret"` // oauth2
	Scopes       []string `toml:"scopes"`        // oauth2; none: the server's default
}

// The drivers a SourceConfig may name.
const (
	driverSQLite   = "sqlite"
	driverPostgres = "postgres"
	driverMySQL    = "mysql"
	driverCSV      = "csv"
	driverHTTP     = "http"
)

// httpKeys names the http driver's keys that sc sets, for the other drivers' refusal.
func (sc SourceConfig) httpKeys() []string {
	var keys []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"base_url", sc.BaseURL != ""}, {"auth", sc.Auth != nil}, {"rate", sc.Rate != 0},
		{"allow_private", sc.AllowPrivate}, {"timeout", sc.Timeout != ""},
		{"max_response", sc.MaxResponse != ""}, {"max_pages", sc.MaxPages != 0},
	} {
		if k.set {
			keys = append(keys, k.name)
		}
	}
	return keys
}

// connectTimeout bounds dialling a database server when the DSN sets no timeout, so
// that a server that does not answer fails the attempt (to be retried) instead of
// hanging it.
const connectTimeout = 10 * time.Second

// OpenSource validates sc and returns the source it describes, named name in messages.
// Relative paths are resolved against baseDir. Nothing is connected yet: a server that
// is down fails a query with a retryable error, not the start of sheetq. The returned
// source is an io.Closer; Close releases its connection pool.
func OpenSource(name string, sc SourceConfig, baseDir string) (Source, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("source %q: "+format, append([]any{name}, args...)...)
	}
	if keys := sc.httpKeys(); len(keys) > 0 && sc.Driver != driverHTTP && sc.Driver != "" {
		return nil, bad("driver %s does not take %s (the http driver's keys)", sc.Driver, strings.Join(keys, ", "))
	}
	switch sc.Driver {
	case driverHTTP:
		return openHTTP(name, sc, baseDir)
	case driverSQLite, driverCSV:
		if sc.Path == "" {
			return nil, bad("driver %s needs path", sc.Driver)
		}
		if sc.DSN != "" {
			return nil, bad("driver %s takes path, not dsn", sc.Driver)
		}
		path := sc.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(baseDir, path)
		}
		shown := shownPath(baseDir, path)
		if sc.Driver == driverCSV {
			return &csvSource{name: name, dir: path, shown: shown}, nil
		}
		return &sqlSource{name: name, dialect: sqliteDialect, path: path, shown: shown}, nil
	case driverPostgres, driverMySQL:
		if sc.DSN == "" {
			return nil, bad("driver %s needs dsn", sc.Driver)
		}
		if sc.Path != "" {
			return nil, bad("driver %s takes dsn, not path", sc.Driver)
		}
		dsn, err := resolveDSN(sc.DSN)
		if err != nil {
			return nil, bad("%v", err)
		}
		if sc.Driver == driverPostgres {
			return openPostgres(name, dsn)
		}
		return openMySQL(name, dsn)
	case "":
		return nil, bad("missing driver (sqlite, postgres, mysql, csv or http)")
	default:
		return nil, bad("unknown driver %q (want sqlite, postgres, mysql, csv or http)", sc.Driver)
	}
}

// shownPath is how messages name a source's file or folder: relative to baseDir (the
// config file's folder, by default the data directory) when it lies inside it, else by
// its last element. Job errors reach API clients, who need not learn the server's layout.
func shownPath(baseDir, path string) string {
	if rel, err := filepath.Rel(baseDir, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return filepath.Base(path)
}

// replacePath is err with path replaced by shown wherever its message quotes it (an
// *fs.PathError does), still wrapping err for errors.Is and errors.As.
func replacePath(err error, path, shown string) error {
	if path == "" || !strings.Contains(err.Error(), path) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), path, shown), err: err}
}

// resolveDSN reads an env:NAME DSN from the environment, so that a password need not
// sit in the config file.
func resolveDSN(dsn string) (string, error) {
	v, err := envref.Resolve(dsn)
	if err != nil {
		return "", fmt.Errorf("dsn: %w", err)
	}
	return v, nil
}

func openPostgres(name, dsn string) (Source, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("source %q: invalid postgres dsn: %s", name, pgParseMessage(err, dsn))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	db := stdlib.OpenDB(*cfg)
	setPool(db)
	return &sqlSource{name: name, dialect: postgresDialect, db: db, secret: cfg.Password}, nil
}

// pgParseMessage is what pgx says about a DSN it cannot parse, without the DSN: pgx
// quotes it with the password masked, but only as well as it can find the password.
func pgParseMessage(err error, dsn string) string {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	return strings.ReplaceAll(msg, dsn, "…")
}

func openMySQL(name, dsn string) (Source, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's messages name parameters, never the password.
		return nil, fmt.Errorf("source %q: invalid mysql dsn: %w", name, redact(err, dsn))
	}
	cfg.ParseTime = true // DATE and DATETIME as time.Time, not text
	// DATETIME has no zone: read in UTC it keeps its wall clock. TIMESTAMP is an
	// instant, shown in the session's zone: in UTC too, it reads back as that instant.
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	cfg.InterpolateParams = false // values go to the server as bound parameters, never spliced
	cfg.MultiStatements = false   // one statement per report
	cfg.AllowAllFiles = false     // no LOAD DATA LOCAL INFILE reading our files
	if cfg.Timeout == 0 {
		cfg.Timeout = connectTimeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("source %q: invalid mysql dsn: %w", name, redact(err, cfg.Passwd))
	}
	db := sql.OpenDB(boundedConnector{Connector: conn, timeout: cfg.Timeout, addr: cfg.Addr})
	setPool(db)
	return &sqlSource{name: name, dialect: mysqlDialect, db: db, secret: cfg.Passwd}, nil
}

// boundedConnector bounds a whole connect, handshake included, by timeout. The MySQL
// driver's own timeout covers the TCP dial only, so a server (or a proxy) that accepts
// the connection and never answers held the attempt until its context ended.
type boundedConnector struct {
	driver.Connector
	timeout time.Duration
	addr    string // the server, for the message
}

// Connect implements driver.Connector.
func (c boundedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel() // the driver stops watching cctx once connected
	conn, err := c.Connector.Connect(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		// Not driver.ErrBadConn: database/sql would try twice more, tripling the wait.
		return nil, fmt.Errorf("the server at %s did not answer within %s (the dsn's timeout sets this)", c.addr, c.timeout)
	}
	return conn, err
}

// setPool keeps a few connections for the next exports and lets idle ones go, so that
// a quiet sheetq holds nothing open on the server for long.
func setPool(db *sql.DB) {
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour)
}
