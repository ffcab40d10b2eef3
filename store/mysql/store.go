// Package mysql is the job store on MySQL 8.0+ and MariaDB 10.6+ (go-sql-driver/mysql):
// the same operations as the SQLite and PostgreSQL stores, passing the same conformance
// suite, for several nodes that share one queue (ARCHITECTURE.md, "MySQL and MariaDB").
// It returns the store package's types and errors.
//
// Every time it stamps or compares is the database's (UTC_TIMESTAMP(6)), never the
// node's: a node whose clock is off changes nothing. A transaction reads the database's
// clock once, as its first statement, and stamps everything it writes with that reading.
package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

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
	// the database's UTC_TIMESTAMP(6), so that a test can stop and move the store's clock
	// (the conformance suite compares stamps to its clock exactly).
	TestClock func() time.Time
	// MaxConns caps the pool (0: PoolSize(4)). A call that finds every connection in
	// use waits for one.
	MaxConns int
	// Log, when set, receives go-sql-driver's own complaints (a connection the server
	// closed, a packet it could not read) at WARN, instead of its standard logger's
	// stderr.
	Log *slog.Logger
}

// PoolSize is the pool a node needs (Options.MaxConns), as pg.PoolSize: one connection
// per worker slot of every lane, two for the reaper and the janitor, four for the API.
func PoolSize(workers int) int { return max(workers, 1) + 2 + 4 }

// Store is the job store on one MySQL or MariaDB database (the one the DSN names).
type Store struct {
	db        *sql.DB
	followUps store.FollowUpFunc
	testClock func() time.Time
	skew      atomic.Int64 // the database clock minus this node's, in ns (Now)
	mariaDB   bool
	version   string
	// groupInserts counts the enqueue groups that went in with one INSERT (insertAll),
	// for tests.
	groupInserts atomic.Int64
}

// Open connects to dsn (a go-sql-driver DSN, user:pass@tcp(host:port)/db, or a
// mysql:// URL, ParseURL), applies pending migrations under GET_LOCK, and returns the
// job store over it: OpenDriver's driver under store.New.
func Open(ctx context.Context, dsn string, opts Options) (*store.Store, error) {
	d, err := OpenDriver(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	return store.New(d, store.Config{FollowUps: opts.FollowUps, Unbatched: opts.Unbatched}), nil
}

// Config reads dsn and sets what the store relies on: times in UTC parsed into
// time.Time, parameters interpolated by the client (one round trip a statement, where
// server-side prepared statements take two), RowsAffected counting the rows a WHERE
// matched rather than those it changed (a fenced UPDATE that writes the values a row
// already has still matched it), and each session in UTC and strict mode.
func Config(dsn string) (*mysql.Config, error) {
	if strings.HasPrefix(dsn, "mysql://") || strings.HasPrefix(dsn, "mariadb://") {
		var err error
		if dsn, err = ParseURL(dsn); err != nil {
			return nil, err
		}
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.ClientFoundRows = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// SQLite's busy_timeout: a statement waits this long for a row another transaction
	// holds, then fails busy (503 store_busy), rather than InnoDB's 50 s.
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		cfg.Params["innodb_lock_wait_timeout"] = "10"
	}
	// A connection that says nothing for this long is closed by the server, which rolls
	// its transaction back and frees its locks: a node paused (SIGSTOP, a frozen VM) in
	// the middle of a transaction would otherwise hold the event clock's row lock, and
	// with it every other node's writes, for as long as it is paused. None of the
	// store's transactions waits between its statements, so only a stopped process
	// stays idle in one. Below innodb_lock_wait_timeout, so that a write that waits on
	// a paused node's lock gets it rather than failing busy. The pool closes its idle
	// connections sooner (OpenDriver), so it never hands out one the server closed.
	if _, ok := cfg.Params["wait_timeout"]; !ok {
		cfg.Params["wait_timeout"] = strconv.Itoa(int(idleTimeout / time.Second))
	}
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO'"
	if cfg.Collation == "" {
		cfg.Collation = "utf8mb4_bin"
	}
	return cfg, nil
}

// OpenDriver connects to dsn and migrates it, as Open does; store.New makes the job
// store of it.
func OpenDriver(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	if opts.Log != nil {
		cfg.Logger = driverLog{opts.Log}
	}
	// Which server answers decides the isolation variable's name: MySQL 8 knows only
	// transaction_isolation, MariaDB before 11.1 only tx_isolation.
	probe, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	var version string
	err = probe.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version)
	probe.Close()
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	maria := strings.Contains(strings.ToLower(version), "mariadb")
	// READ COMMITTED: a statement sees what committed before it, and InnoDB takes no
	// gap locks, so claims that skip locked rows and inserts of new jobs do not wait on
	// each other's ranges.
	if maria {
		cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	} else {
		cfg.Params["transaction_isolation"] = "'READ-COMMITTED'"
	}
	db, err := connect(cfg)
	if err != nil {
		return nil, err
	}
	n := opts.MaxConns
	if n <= 0 {
		n = PoolSize(4)
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(poolIdleTime(cfg))
	s := &Store{db: db, testClock: opts.TestClock, mariaDB: maria, version: version}
	if err := s.checkVersion(); err != nil {
		db.Close()
		return nil, err
	}
	// Migrations are files of several statements: they go through a connection of their
	// own that takes them, so that no other statement of the store ever can.
	mcfg := cfg.Clone()
	mcfg.MultiStatements = true
	mdb, err := connect(mcfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	err = migrate(ctx, mdb)
	mdb.Close()
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := s.readSkew(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	return s, nil
}

// idleTimeout is the server's wait_timeout on every connection of the store (Config),
// unless the DSN sets one.
const idleTimeout = 5 * time.Second

// poolIdleTime is how long the pool keeps an idle connection: half the server's
// wait_timeout, so that it drops a connection before the server does.
func poolIdleTime(cfg *mysql.Config) time.Duration {
	secs, err := strconv.Atoi(strings.Trim(cfg.Params["wait_timeout"], "'"))
	if err != nil || secs <= 0 {
		return idleTimeout / 2
	}
	return time.Duration(secs) * time.Second / 2
}

// connect opens a pool on cfg.
func connect(cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	return sql.OpenDB(conn), nil
}

// checkVersion refuses a server without SELECT ... FOR UPDATE SKIP LOCKED, which every
// claim uses: MySQL before 8.0.1, MariaDB before 10.6.
func (s *Store) checkVersion() error {
	var major, minor, patch int
	fmt.Sscanf(s.version, "%d.%d.%d", &major, &minor, &patch)
	old := major < 8 || major == 8 && minor == 0 && patch < 1
	if s.mariaDB {
		old = major < 10 || major == 10 && minor < 6
	}
	if old {
		return fmt.Errorf("open mysql: server %s has no SKIP LOCKED: sheetq needs MySQL 8.0.1+ or MariaDB 10.6+", s.version)
	}
	return nil
}

// driverLog is go-sql-driver's Logger over slog.
type driverLog struct{ log *slog.Logger }

func (l driverLog) Print(v ...any) {
	l.log.Warn("mysql driver", "msg", strings.TrimSpace(fmt.Sprint(v...)))
}

// Version is the server's version string (SELECT VERSION()).
func (s *Store) Version() string { return s.version }

// DB is the store's pool, for tests and store copy.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pool.
func (s *Store) Close() error { return s.db.Close() }

// What the composition root may ask of this driver (store.Driver and its capabilities).
var (
	_ store.Driver      = (*Store)(nil)
	_ store.Shared      = (*Store)(nil)
	_ store.ClaimNexter = (*Store)(nil)
)

// SetFollowUps sets the hook the ends call in their transaction (store.Driver).
func (s *Store) SetFollowUps(fn store.FollowUpFunc) { s.followUps = fn }

// Shared reports that other nodes may use the database at the same time
// (store.Shared): a PROCESSING job at start may be another node's.
func (s *Store) Shared() bool { return true }

// now is the clock parameter of nowSQL: NULL in production, the test clock's reading
// otherwise.
func (s *Store) now() any {
	if s.testClock == nil {
		return nil
	}
	return s.testClock()
}

// nowSQL is the store's time in a statement outside a transaction of several: one
// parameter, s.now().
const nowSQL = `COALESCE(CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6))`

// micros is a duration in microseconds, for `INTERVAL ? MICROSECOND`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// migrateLock is the name of the GET_LOCK that migrations run under, per database: the
// database's name hashed, since MySQL refuses a lock name over 64 characters and a
// database's name may have 64 of its own.
const migrateLock = `CONCAT('sheetq migrate ', SHA1(DATABASE()))`

// migrate applies each embedded migration not yet recorded, in order, while holding a
// named lock (GET_LOCK, per database): nodes that start together on a fresh database
// wait for the first one and then find every migration applied. MySQL commits DDL
// statements one by one, so a migration is not atomic; each is recorded once all its
// statements ran, and a migration interrupted midway must be finished by hand (the
// error names it).
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := store.ReadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(`+migrateLock+`, 60)`).Scan(&got); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return errors.New("migrate: another node held the migration lock for 60 s")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(`+migrateLock+`)`)
	// Only when missing: a server that refuses writes (a replica, read_only=ON) then
	// opens when its schema is current, and readiness names the refusal (ProbeWrite).
	var tables int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'schema_migrations'`).Scan(&tables); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if tables == 0 {
		if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL,
			applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE = InnoDB`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	for _, m := range ms {
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if n > 0 {
			continue
		}
		if err := execScript(ctx, conn, m.SQL); err != nil {
			return fmt.Errorf("migrate: %s: %w", m.Name, err)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate: %s: %w", m.Name, err)
		}
	}
	return nil
}

// execScript runs the statements of a migration file, which multiStatements lets go in
// one call; every result is read so that an error of a later statement is seen.
func execScript(ctx context.Context, conn *sql.Conn, script string) error {
	rows, err := conn.QueryContext(ctx, script)
	if err != nil {
		return err
	}
	for {
		for rows.Next() {
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// Migrations is how many migrations the package embeds and how many the database has
// applied, for doctor.
func (s *Store) Migrations(ctx context.Context) (embedded, applied int, err error) {
	ms, err := store.ReadMigrations(migrationFS)
	if err != nil {
		return 0, 0, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied)
	return len(ms), applied, err
}

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `id, kind, args, status, priority, run_at, attempt, max_attempts, worker,
	created_at, started_at, heartbeat_at, finished_at, progress_rows, progress_total,
	cancel_requested, error_code, error_message, file_name, file_size, file_sha256,
	idempotency_key, request_hash, warnings, created_by, notify_url, parent_id, queue, attempt_base, seq`

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanJob reads one row of jobColumns; no row is store.ErrNotFound.
func scanJob(row scanner) (store.Job, error) {
	var (
		j                                       store.Job
		status                                  string
		started, heartbeat, finished            sql.NullTime
		total, fsize                            sql.NullInt64
		worker, code, msg, fname, fsha, key, rh sql.NullString
		warnings, createdBy, notify, parent     sql.NullString
		args                                    []byte
	)
	err := row.Scan(&j.ID, &j.Kind, &args, &status, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts, &worker,
		&j.CreatedAt, &started, &heartbeat, &finished, &j.ProgressRows, &total,
		&j.CancelRequested, &code, &msg, &fname, &fsize, &fsha, &key, &rh, &warnings, &createdBy, &notify, &parent, &j.Queue, &j.AttemptBase, &j.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Job{}, store.ErrNotFound
	}
	if err != nil {
		return store.Job{}, err
	}
	j.Args = args
	j.Status = store.Status(status)
	j.RunAt, j.CreatedAt = j.RunAt.UTC(), j.CreatedAt.UTC()
	j.StartedAt, j.HeartbeatAt, j.FinishedAt = utc(started), utc(heartbeat), utc(finished)
	j.ProgressTotal = -1
	if total.Valid {
		j.ProgressTotal = total.Int64
	}
	j.FileSize = fsize.Int64
	j.Worker, j.ErrorCode, j.ErrorMessage = worker.String, code.String, msg.String
	j.FileName, j.FileSHA256 = fname.String, fsha.String
	j.IdempotencyKey, j.RequestHash = key.String, rh.String
	j.CreatedBy, j.NotifyURL, j.ParentID = createdBy.String, notify.String, parent.String
	if warnings.Valid {
		if err := jsonUnmarshal(warnings.String, &j.Warnings); err != nil {
			return store.Job{}, fmt.Errorf("job %s warnings: %w", j.ID, err)
		}
	}
	return j, nil
}

// querier is the pool, a connection or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// queryJobs runs q and scans every row as a job.
func queryJobs(ctx context.Context, q querier, query string, args ...any) ([]store.Job, error) {
	rows, err := q.QueryContext(ctx, query, args...)
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

func utc(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// nullString is s, or NULL when empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// placeholders is "?, ?, ..." n times.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
