// Package sqlite is the job store's SQLite driver (store.Driver): the data directory's
// file, opening it, checking and migrating it, and every SQL statement the job table
// needs there. The rules above the SQL are package store's; this package is SQL, error
// mapping (Fault) and what only a file has: its checks at start, disk health, backup,
// and the one writer's queue, which gives enqueues, claims, heartbeats, checkpoints and
// ends one commit (writer.go, ARCHITECTURE.md rule 31).
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"sheetq/store"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Options tunes Open. The zero value is the production setting.
type Options struct {
	// Now is the clock used to stamp rows; time.Now when nil.
	Now func() time.Time
	// BusyTimeout is how long a statement waits for another connection's lock (default 10 s).
	BusyTimeout time.Duration
	// ReadConns bounds the read pool (default 4).
	ReadConns int
	// ReadOnly opens an existing file for reading only, without migrating it and without
	// ever taking the write lock, for tools that run beside a live server (sheetq backup).
	// Every write then fails.
	ReadOnly bool
	// FollowUps is Open's store.Config (OpenDriver ignores it).
	FollowUps store.FollowUpFunc
	// Unbatched gives every write a transaction of its own instead of the writer's
	// queue (writer.go), for benchmarks to compare; MaxBatch bounds how many writes one
	// commit of the queue carries (default 128). Open passes both to store.Config too.
	Unbatched bool
	MaxBatch  int
	// Check is how much of an existing file is checked before it is used (default
	// CheckQuick); a damaged file is refused with a *CorruptError.
	Check CheckMode
	// CheckBudget bounds CheckQuick's time (default 2 s): the page scan and quick_check
	// stop there, and FinishCheck does the rest after start.
	CheckBudget time.Duration
}

// Store is the app database: one writer connection and a pool of readers.
type Store struct {
	w    *sql.DB // exactly one connection; transactions start with BEGIN IMMEDIATE
	r    *sql.DB // query_only readers; WAL lets them run beside the writer
	now  func() time.Time
	path string

	checked CheckResult // what Open's check did
	health  health      // why writes fail, for readiness (store/health.go)
	// followUps is the core's checked hook (SetFollowUps).
	followUps store.FollowUpFunc

	// Statements every state change runs, prepared once: parsing SQL was a fifth of an
	// enqueue's CPU time. They must be prepared outside any transaction, because the
	// writer pool's only connection is busy inside one.
	insertJob, insertEvent *sql.Stmt
	// insertAudit writes an export request's audit entry with its job (NewJob.Audit).
	insertAudit *sql.Stmt
	stmts       stmts     // claims and ends (store/finish.go)
	reads       readStmts // the frequent reads, on the reader pool (store/reads.go)

	jobByKey *sql.Stmt // an idempotency key's job, for a refused insert (enqueueTx)

	onWrite atomic.Pointer[func(time.Duration)] // ObserveWrites (store/writestats.go)

	// wq is the queue that enqueues, claims, heartbeats, checkpoints and ends share, so
	// that each commit carries every one of them that is due (writer.go, rule 31); nil
	// with Options.Unbatched, where each is a transaction of its own.
	wq *writer
}

// Open opens (creating if needed) the SQLite file at path, applies pending migrations,
// and returns the job store over it: OpenDriver's driver under store.New.
func Open(ctx context.Context, path string, opts Options) (*store.Store, error) {
	d, err := OpenDriver(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	return store.New(d, store.Config{FollowUps: opts.FollowUps, Unbatched: opts.Unbatched, MaxBatch: opts.MaxBatch}), nil
}

// OpenDriver opens (creating if needed) the SQLite file at path and applies pending
// migrations; store.New makes the job store of it.
func OpenDriver(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	opts.Check = cmp.Or(opts.Check, CheckQuick)
	if opts.CheckBudget <= 0 {
		opts.CheckBudget = 2 * time.Second
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, path, opts)
	}
	pragmas := writerPragmas(opts.BusyTimeout)
	w, err := sql.Open("sqlite", dsn(path, pragmas, "_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// SQLite takes one writer at a time; one connection turns lock contention inside
	// this process into a Go-side queue instead of busy retries.
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	s := &Store{w: w, now: opts.Now, path: path}
	// The check comes before migrations, so that nothing is written into a damaged file.
	if s.checked, err = s.checkOpen(ctx, path, opts.Check, opts.CheckBudget); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, withFault(err)
	}
	if err := s.prepare(ctx); err != nil {
		w.Close()
		return nil, withFault(err)
	}
	// One small write now: a file that cannot be written (read-only, on a read-only
	// mount) is refused at start instead of failing every request. A full disk is not
	// refused: reads and downloads still work, readiness reports it, and writes answer
	// disk_full until space is freed.
	if err := s.probe(ctx); err != nil && !errors.Is(err, store.ErrDiskFull) {
		w.Close()
		return nil, fmt.Errorf("write to %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, append(pragmas[:1:1], "query_only(1)", "foreign_keys(1)"), ""))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	s.r = r
	if err := s.reads.prepare(ctx, r); err != nil {
		r.Close()
		w.Close()
		return nil, withFault(err)
	}
	if !opts.Unbatched {
		s.startWriter(opts.MaxBatch)
	}
	return s, nil
}

// uriPath escapes the characters that end or encode the path part of an SQLite "file:"
// URI, so that a data directory named like "reports #2" or "100%" opens the file it names
// (the driver also splits the DSN at the first '?').
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// writerPragmas are the writer connection's settings; BenchmarkRawCommit measures the
// disk with the same ones.
func writerPragmas(busyTimeout time.Duration) []string {
	// synchronous=FULL: in WAL mode every commit fsyncs the WAL, so a 202 means the row is
	// on disk (rule 1). foreign_keys is per connection, hence in the DSN.
	return []string{
		"busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")",
		"journal_mode(WAL)",
		"synchronous(FULL)",
		"foreign_keys(1)",
	}
}

func dsn(path string, pragmas []string, extra string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	s := "file:" + uriPath.Replace(path) + "?" + q.Encode()
	if extra != "" {
		s += "&" + extra
	}
	return s
}

func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.insertJob, err = s.w.PrepareContext(ctx, insertJobSQL); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if s.insertEvent, err = s.w.PrepareContext(ctx, insertEventSQL); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if s.insertAudit, err = s.w.PrepareContext(ctx, insertAuditSQL); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := s.stmts.prepare(ctx, s.w); err != nil {
		return err
	}
	if s.jobByKey, err = s.w.PrepareContext(ctx, jobByKeySQL); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	return nil
}

// Close answers the writes the queue has taken (none is taken after this: ErrClosed),
// then closes both pools.
func (s *Store) Close() error {
	if s.w == s.r { // read-only: one pool
		return s.r.Close()
	}
	if s.wq != nil {
		s.wq.q.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// What the composition root may ask of this driver (store.Driver and its capabilities).
var (
	_ store.Driver        = (*Store)(nil)
	_ store.WriteHealth   = (*Store)(nil)
	_ store.WriteObserver = (*Store)(nil)
	_ store.StartChecker  = (*Store)(nil)
	_ store.Backuper      = (*Store)(nil)
)

// SetFollowUps sets the hook the ends call in their transaction (store.Driver).
func (s *Store) SetFollowUps(fn store.FollowUpFunc) { s.followUps = fn }

// Fault maps err to the core's kind of it (store.Driver): busy, or a fault of the file
// or its disk (health.go).
func (s *Store) Fault(err error) error {
	if isBusy(err) {
		return store.ErrBusy
	}
	return faultOf(err)
}

// CheckedAtStart says what Open's check of the file did (store.StartChecker).
func (s *Store) CheckedAtStart() (complete bool, logAttrs []any) {
	res := s.checked
	if res.Mode == CheckOff || res.Pages == 0 {
		return res.Complete, nil
	}
	return res.Complete, []any{"mode", res.Mode, "pages", res.Pages, "took", res.Took.Round(time.Millisecond)}
}

// OpenCheck reports what Open's check of the file did.
func (s *Store) OpenCheck() CheckResult { return s.checked }

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now() }

// Check runs PRAGMA integrity_check (IntegrityCheck) and returns an error naming its
// findings unless it says ok.
func (s *Store) Check(ctx context.Context) error {
	problems, err := s.IntegrityCheck(ctx)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Ping checks that the database answers a read, for liveness probes.
func (s *Store) Ping(ctx context.Context) error {
	return s.r.PingContext(ctx)
}

// migrate applies each embedded migration not yet recorded, one transaction each.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	ms, err := store.ReadMigrations(migrationFS)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		version, base, body := m.Version, m.Name, m.SQL
		if err := s.tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, body); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				version, base, s.now().UnixMilli())
			return err
		}); err != nil {
			return fmt.Errorf("migrate %s: %w", base, err)
		}
	}
	return nil
}

// tx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it. Every write goes
// through here, so a failure of the file or its disk is noted for readiness and named
// (ErrDiskFull and the others) for the HTTP layer.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	err := s.runTx(ctx, fn)
	s.health.note(err)
	return withFault(err)
}

func (s *Store) runTx(ctx context.Context, fn func(*sql.Tx) error) error {
	if observe := s.onWrite.Load(); observe != nil {
		start := time.Now()
		defer func() { (*observe)(time.Since(start)) }()
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY constraint violation (the
// driver turns on extended result codes, so the two are told apart).
func isUnique(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// isBusy reports whether err is SQLite giving up on a lock another connection held for
// longer than busy_timeout (SQLITE_BUSY or SQLITE_LOCKED, with any extended code): the
// database is fine and the same request can succeed a moment later.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
