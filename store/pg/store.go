// Package pg is the job store on PostgreSQL (pgx v5): the same operations as the SQLite
// store (jobs.Store), passing the same conformance suite, for several nodes that share
// one queue (ARCHITECTURE.md, "Ready for a second store"). It returns the store package's
// types and errors.
//
// Every time it stamps or compares is the database's (now()), never the node's: a node
// whose clock is off changes nothing. The durations the engine passes are added to or
// subtracted from now() in SQL.
package pg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"sheetq/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Options tunes Open. The zero value is the production setting.
type Options struct {
	// FollowUps and Unbatched are Open's store.Config (OpenDriver ignores them).
	FollowUps store.FollowUpFunc
	Unbatched bool
	// TestClock is for tests only: when set, the store reads its time from it instead of
	// the database's now(), so that a test can stop and move the store's clock (the
	// conformance suite compares stamps to its clock exactly). Production leaves it nil.
	TestClock func() time.Time
	// MaxConns caps the pool (0: pgxpool's default, max(4, CPUs)). PoolSize gives the
	// size a node needs for its workers and its API. A Listener's connection is not
	// taken from the pool (notify.go).
	MaxConns int32
	// PollOnly is for a connection pooler in transaction mode (PgBouncer's
	// pool_mode=transaction), where a server connection serves one transaction and then
	// another client: statements go as unnamed prepared statements in one round trip
	// (pgx.QueryExecModeExec) instead of pgx's default per-connection cache of named ones,
	// which would meet "prepared statement does not exist" on the next server connection.
	// Such a pooler cannot carry LISTEN either: start no Listener, and let the engine's
	// poll find other nodes' jobs (jobs.Config.PollInterval). Without PollOnly, Open
	// refuses such a pooler (ErrTransactionPooler, pooler.go).
	PollOnly bool
}

// PoolSize is the pool a node needs (Options.MaxConns): one connection per worker slot
// of every lane, since a slot makes at most one call at a time (its claim, a heartbeat
// or its end), plus two for the reaper and the janitor and four for the API (accepting,
// listings and pages, the event hub, metrics). A request that finds every connection
// in use waits for one (pgxpool), it does not fail. The Listener's connection is one
// more per node, outside the pool: the server's max_connections must exceed
// nodes x (PoolSize + 1).
func PoolSize(workers int) int32 { return int32(max(workers, 1) + 2 + 4) }

// Store is the job store on one PostgreSQL database (the schema the DSN's search_path
// names): a pgx pool.
type Store struct {
	pool      *pgxpool.Pool
	followUps store.FollowUpFunc
	testClock func() time.Time
	skew      atomic.Int64     // the database clock minus this node's, in ns (Now)
	local     func() time.Time // this node's clock; nil is time.Now (tests move it)
	announce  *announcer       // AnnounceEvents (announce.go)
	dsn       string           // for the Listener's own connection (Listen)
	inserts   atomic.Int64     // insert statements EnqueueBatch ran, for tests
}

// Open connects to dsn (a postgres:// URL or key=value string; search_path picks the
// schema), applies pending migrations under an advisory lock, and returns the job store
// over it: OpenDriver's driver under store.New.
func Open(ctx context.Context, dsn string, opts Options) (*store.Store, error) {
	d, err := OpenDriver(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	return store.New(d, store.Config{FollowUps: opts.FollowUps, Unbatched: opts.Unbatched}), nil
}

// OpenDriver connects to dsn and migrates it, as Open does; store.New makes the job
// store of it.
func OpenDriver(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.PollOnly {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !opts.PollOnly {
		// Before the first cached statement, which a pooler in transaction mode breaks.
		if err := checkPool(ctx, pool, cfg.ConnConfig); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open postgres: %w", err)
		}
	}
	s := &Store{pool: pool, testClock: opts.TestClock, dsn: dsn}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.readSkew(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.startAnnouncer()
	return s, nil
}

// Close closes the pool, waiting for connections in use to be released.
func (s *Store) Close() error {
	s.announce.close()
	s.pool.Close()
	return nil
}

// What the composition root may ask of this driver (store.Driver and its capabilities).
var (
	_ store.Driver      = (*Store)(nil)
	_ store.ClaimNexter = (*Store)(nil)
	_ store.Shared      = (*Store)(nil)
	_ store.Listener    = (*Store)(nil)
	_ store.Announcer   = (*Store)(nil)
	_ store.JobChecker  = (*Store)(nil)
)

// SetFollowUps sets the hook the ends call in their transaction (store.Driver).
func (s *Store) SetFollowUps(fn store.FollowUpFunc) { s.followUps = fn }

// Fault maps err to the core's kind of it (store.Driver): the server not answering,
// a conflict a retry resolves, or a fault of the server's disk (storeFault).
func (s *Store) Fault(err error) error {
	switch {
	case IsUnavailable(err):
		return store.ErrUnavailable
	case IsBusy(err):
		return store.ErrBusy
	}
	return faultKind(err)
}

// Shared reports that other nodes may use the database at the same time
// (store.Shared): a PROCESSING job at start may be another node's.
func (s *Store) Shared() bool { return true }

// Listen starts this node's LISTEN connection (store.Listener): other nodes' new jobs,
// cancels and events reach cb as they commit.
func (s *Store) Listen(ctx context.Context, log *slog.Logger, cb store.ListenCallbacks) (stop func(), err error) {
	l, err := Listen(ctx, s.dsn, log, Callbacks(cb))
	if err != nil {
		return nil, err
	}
	return l.Stop, nil
}

// now is the clock parameter every statement takes as $1: NULL in production, so that
// nowSQL is the database's now(); the test clock's reading otherwise.
func (s *Store) now() any {
	if s.testClock == nil {
		return nil
	}
	return s.testClock()
}

// nowSQL is the store's time in SQL: $1 is always now()'s parameter. now() is the start
// of the transaction, so every stamp of one transaction is the same.
const nowSQL = `coalesce($1::timestamptz, now())`

// micros is a duration as a count of microseconds, PostgreSQL's time resolution, for
// `$n * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// migrate applies each embedded migration not yet recorded, in order, in one transaction
// that holds a transaction-scoped advisory lock: nodes that start together on a fresh
// database wait for the first one and then find every migration applied. The lock's key
// names the schema, so that stores on other schemas of the database do not wait.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.ReadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('sheetq migrate ' || current_schema(), 0))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		for _, m := range ms {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// isUnique reports whether err is a unique or primary key violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `id, kind, args, status, priority, run_at, attempt, max_attempts, worker,
	created_at, started_at, heartbeat_at, finished_at, progress_rows, progress_total,
	cancel_requested, error_code, error_message, file_name, file_size, file_sha256,
	idempotency_key, request_hash, warnings, created_by, notify_url, parent_id, queue, attempt_base, seq`

// scanJob reads one row of jobColumns; no row is store.ErrNotFound.
func scanJob(row pgx.Row) (store.Job, error) {
	var (
		j                                       store.Job
		args                                    string
		status                                  string
		started, heartbeat, finished            *time.Time
		total, fsize                            *int64
		worker, code, msg, fname, fsha, key, rh *string
		warnings, createdBy, notify, parent     *string
	)
	err := row.Scan(&j.ID, &j.Kind, &args, &status, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts, &worker,
		&j.CreatedAt, &started, &heartbeat, &finished, &j.ProgressRows, &total,
		&j.CancelRequested, &code, &msg, &fname, &fsize, &fsha, &key, &rh, &warnings, &createdBy, &notify, &parent, &j.Queue, &j.AttemptBase, &j.Seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Job{}, store.ErrNotFound
	}
	if err != nil {
		return store.Job{}, err
	}
	j.Args = []byte(args)
	j.Status = store.Status(status)
	j.RunAt, j.CreatedAt = j.RunAt.UTC(), j.CreatedAt.UTC()
	j.StartedAt, j.HeartbeatAt, j.FinishedAt = utc(started), utc(heartbeat), utc(finished)
	j.ProgressTotal = -1
	if total != nil {
		j.ProgressTotal = *total
	}
	if fsize != nil {
		j.FileSize = *fsize
	}
	j.Worker, j.ErrorCode, j.ErrorMessage = str(worker), str(code), str(msg)
	j.FileName, j.FileSHA256 = str(fname), str(fsha)
	j.IdempotencyKey, j.RequestHash = str(key), str(rh)
	j.CreatedBy, j.NotifyURL, j.ParentID = str(createdBy), str(notify), str(parent)
	if warnings != nil {
		if err := jsonUnmarshal(*warnings, &j.Warnings); err != nil {
			return store.Job{}, fmt.Errorf("job %s warnings: %w", j.ID, err)
		}
	}
	return j, nil
}

// queryJobs runs q and scans every row as a job.
func (s *Store) queryJobs(ctx context.Context, q querier, sql string, args ...any) ([]store.Job, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullString is s, or NULL when empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// tx runs fn in one transaction and commits it.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
