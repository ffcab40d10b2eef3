package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"sheetq/store"
)

// Now returns a reading of the store's clock: the test clock when one is set, else the
// database's clock as this node estimates it (its own clock plus the offset measured at
// Open and at every Ping). Every stamp and comparison the store makes is in SQL with the
// database's now(), so Now is only for the caller's display and arithmetic ("runs in
// 5 s", ages, the stats' and metrics' windows); the offset keeps those right on a node
// whose own clock is off.
func (s *Store) Now() time.Time {
	if s.testClock != nil {
		return s.testClock()
	}
	return s.localNow().Add(time.Duration(s.skew.Load()))
}

// Ping checks that the database answers a query, within ctx, for liveness probes, and
// measures the database clock's offset from this node's again (Now).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.readSkew(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// readSkew reads the database's clock and keeps its offset from this node's clock,
// taking the middle of the round trip as the moment it was read.
func (s *Store) readSkew(ctx context.Context) error {
	var db time.Time
	before := s.localNow()
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		return err
	}
	after := s.localNow()
	s.skew.Store(int64(db.Sub(before.Add(after.Sub(before) / 2))))
	return nil
}

// probeEvery is how long a probe write that committed vouches for the database: a client
// polling readiness cannot turn it into a stream of writes, whatever the number of nodes.
const probeEvery = time.Second

// ProbeWrite returns nil when the database takes writes: it rewrites the write_probe row
// (migration 0004) unless a probe, from any node, committed less than a second ago by
// the database's clock (then the update matches no row and writes nothing). A refused
// write returns its error, matched by errors.Is with store.ErrReadOnly (a standby after
// a failover, default_transaction_read_only), store.ErrDiskFull, store.ErrIO or
// store.ErrCorrupt when the server names such a fault; the next call probes again. A
// full disk on the server shows in the writes that need new pages (an enqueue) before it
// shows here: the probe rewrites its row in place.
func (s *Store) ProbeWrite(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `UPDATE write_probe SET at = `+nowSQL+`
		WHERE id = 1 AND at <= `+nowSQL+` - $2 * interval '1 microsecond'`, s.now(), micros(probeEvery))
	if err != nil {
		return fmt.Errorf("probe write: %w", storeFault(err))
	}
	return nil
}

// storeFault wraps err with the store's name for a lasting fault of the server that it
// reports, so that callers (app/problem) test it with errors.Is as they do the SQLite
// store's, while errors.As still finds the *pgconn.PgError. Other errors come back as
// they are.
func storeFault(err error) error {
	if k := faultKind(err); k != nil {
		return fmt.Errorf("%w: %w", k, err)
	}
	return err
}

// faultKind is the core's kind of a lasting fault of the server that err reports, or nil.
func faultKind(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil
	}
	switch pe.Code {
	case "25006": // read_only_sql_transaction: a standby, or a read-only default
		return store.ErrReadOnly
	case "53100": // disk_full
		return store.ErrDiskFull
	case "58030": // io_error
		return store.ErrIO
	case "XX001", "XX002": // data_corrupted, index_corrupted
		return store.ErrCorrupt
	}
	return nil
}

// localNow is this node's clock; tests set Store.local to a clock that is off.
func (s *Store) localNow() time.Time {
	if s.local != nil {
		return s.local()
	}
	return time.Now()
}
