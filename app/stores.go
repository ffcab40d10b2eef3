package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"sheetq/app/events"
	"sheetq/app/exports"
	"sheetq/app/schedules"
	"sheetq/internal/envref"
	"sheetq/internal/objstore"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/mysql"
	"sheetq/store/pg"
	"sheetq/store/sqlite"
)

// The job store is one *store.Store whatever its driver: every consumer (exports.Store,
// events.Log, webhook.Recorder, schedules.Store, the engine's jobs.Store) asks for the
// core's operations, and the composition root asks the driver for what else it can do
// through the capability interfaces of package store (driver.go), never by its type.
var (
	_ exports.Store    = (*store.Store)(nil)
	_ events.Log       = (*store.Store)(nil)
	_ webhook.Recorder = (*store.Store)(nil)
	_ schedules.Store  = (*store.Store)(nil)
)

// StoreURL reads a job store setting (--store, SHEETQ_STORE, [store] url): a
// postgres://, mysql:// or mariadb:// URL, or env:NAME naming a variable that holds one;
// "" stays "" (SQLite). Its errors never echo the value, which may hold a password.
func StoreURL(v string) (string, error) {
	u, err := envref.Resolve(v)
	if err != nil {
		return "", err
	}
	if u == "" {
		return "", nil
	}
	pu, err := url.Parse(u)
	switch {
	case err != nil:
		return "", errors.New("not a valid URL: percent-encode special characters of the user name and password (an @ as %40, a ? as %3F)")
	case pu.Scheme != "postgres" && pu.Scheme != "postgresql" && !IsMySQL(u):
		return "", fmt.Errorf("want a postgres:// or mysql://user:password@host:port/database URL (or env:NAME naming one), not a %q URL", cmp.Or(schemeOf(u), "scheme-less"))
	case IsMySQL(u):
		// A host and a database, and parameters go-sql-driver knows; the error shows
		// the URL without its password.
		if _, err := mysql.ParseURL(u); err != nil {
			return "", err
		}
	}
	return u, nil
}

// IsMySQL reports whether a job store URL names a MySQL or MariaDB database
// (mysql://, mariadb://) rather than PostgreSQL.
func IsMySQL(u string) bool {
	s := schemeOf(u)
	return s == "mysql" || s == "mariadb"
}

func schemeOf(u string) string {
	if i := strings.Index(u, "://"); i > 0 {
		return u[:i]
	}
	return ""
}

// RedactURL is u without its password, for logs and messages.
func RedactURL(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return schemeOf(u) + "://(unparsable)"
	}
	return pu.Redacted()
}

// openStore opens the job store that cfg names: the data directory's SQLite file, or a
// PostgreSQL, MySQL or MariaDB database shared with other nodes. Only here and in the
// tool commands does sheetq name a driver.
func (a *App) openStore(ctx context.Context) (*store.Store, error) {
	cfg := a.cfg
	// A job's end and the webhook delivery that announces it commit together (rule 19),
	// and so do a successful export and the deliveries of its file (deliveries.go).
	followUps := withDeliveries(webhook.Announcer{BaseURL: cfg.BaseURL, Describe: export.JobJSON}.FollowUps)
	dsn := cfg.stores.DSN
	if dsn == "" {
		s, err := sqlite.Open(ctx, a.dir.DB(), sqlite.Options{Check: cfg.CheckDB, Now: a.test.Now, BusyTimeout: a.test.BusyTimeout, FollowUps: followUps})
		if err != nil {
			return nil, openStoreError(a.dir, err)
		}
		return s, nil
	}
	workers := cfg.Engine.Workers
	for _, n := range cfg.Engine.Queues {
		workers += n
	}
	if IsMySQL(dsn) {
		// A connection per worker slot of every lane, and a few for the API; the
		// driver's own complaints (a connection the server closed) go to this node's log.
		d, err := mysql.OpenDriver(ctx, dsn, mysql.Options{TestClock: a.test.Now, MaxConns: mysql.PoolSize(workers), Log: a.log})
		if err != nil {
			return nil, fmt.Errorf("open the job store %s: %w", RedactURL(dsn), err)
		}
		a.log.InfoContext(ctx, "job store", "store", RedactURL(dsn), "server", d.Version())
		return store.New(d, store.Config{FollowUps: followUps}), nil
	}
	opts := pg.Options{FollowUps: followUps, TestClock: a.test.Now, PollOnly: cfg.PollOnly}
	if !strings.Contains(dsn, "pool_max_conns") {
		// A connection per worker slot of every lane, and a few for the API; the DSN's
		// own pool_max_conns wins.
		opts.MaxConns = pg.PoolSize(workers)
	}
	p, err := pg.Open(ctx, dsn, opts)
	if errors.Is(err, pg.ErrTransactionPooler) {
		return nil, fmt.Errorf("open the job store %s: %w; start every node behind it with --poll-only", RedactURL(dsn), err)
	}
	if err != nil {
		return nil, fmt.Errorf("open the job store %s: %w", RedactURL(dsn), err)
	}
	a.log.InfoContext(ctx, "job store", "store", RedactURL(dsn))
	return p, nil
}

// openFiles opens the file store that cfg names: the data directory's exports/ folder, or
// a bucket shared with other nodes (--files, [files] url, with [files] access_key and
// secret_key, each may be env:NAME or file:PATH).
func (a *App) openFiles(ctx context.Context) (jobs.Files, error) {
	u, b := a.cfg.stores.FilesURL, a.cfg.stores.Bucket
	if b == nil {
		if a.shared {
			a.log.WarnContext(ctx, "the job store is shared but the files are in this node's data directory: other nodes cannot serve this node's files, nor this node theirs; give every node the same --files s3://... bucket")
		}
		return jobs.OpenFiles("", a.dir.Exports(), "", "", a.log)
	}
	f, err := jobs.OpenFiles(u, a.dir.Exports(), b.AccessKey, b.SecretKey, a.log)
	if err != nil {
		return nil, fmt.Errorf("--files: %w", err)
	}
	if err := a.checkBucket(ctx, f, u); err != nil {
		return nil, err
	}
	a.log.InfoContext(ctx, "file store", "files", RedactURL(u))
	if n := jobs.FaultS3PartSize(); n != 0 {
		// A crash test's node (faultpoints builds only): it says so, so that the test
		// knows the binary honoured SHEETQ_TEST_S3_PART_SIZE.
		a.log.WarnContext(ctx, "test-only part size for uploads to the bucket", "part_size", n)
	}
	return f, nil
}

// checkBucket refuses to start on a bucket that does not exist or refuses this node's
// writes (a wrong name, key or policy): every export would fail at its upload while the
// node looked ready. A server that does not answer now may be restarting: the node
// starts, and GET /readyz answers 503 until the bucket takes writes.
func (a *App) checkBucket(ctx context.Context, f jobs.Files, u string) error {
	w, ok := f.(interface{ CheckWritable(context.Context) error })
	if !ok {
		return nil
	}
	err := w.CheckWritable(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objstore.ErrNoBucket):
		return fmt.Errorf("file store %s: %w; create it, or name an existing one in --files or [files] url", RedactURL(u), err)
	case objstore.Transient(err):
		a.log.WarnContext(ctx, "the file store does not answer; starting, but GET /readyz answers 503 until it takes writes",
			"files", RedactURL(u), "err", err)
		return nil
	}
	return fmt.Errorf("file store %s: %w", RedactURL(u), err)
}

// listen starts the store's listener (store.Listener: PostgreSQL's LISTEN connection),
// unless --poll-only: other nodes' new jobs wake this node's lanes, their cancels reach
// the jobs running here at once, and their events wake this node's event streams and
// metrics. Before the engine and the hub start, so the listener's first re-read is
// waiting for them.
func (a *App) listen(ctx context.Context) error {
	l, ok := a.store.Driver().(store.Listener)
	if !ok || a.cfg.PollOnly {
		return nil
	}
	stop, err := l.Listen(ctx, a.log, store.ListenCallbacks{
		Ready:  a.engine.WakeQueue,
		Cancel: a.engine.CheckCancel,
		Events: func() { a.hub.Notify(); a.metrics.OnChange() },
	})
	if err != nil {
		return fmt.Errorf("listen on the job store: %w", err)
	}
	a.closers = append(a.closers, stop)
	return nil
}
