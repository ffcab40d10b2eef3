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
// node's time.Now. The clock that stamps rows in production is the database's now(), not
// this one (every stamp and comparison the store makes is in SQL), so Now is for the
// caller's display and arithmetic ("runs in 5 s", ages, the metrics' windows); on a node
// whose clock is off, those are off by as much, and no job's state is.
func (s *Store) Now() time.Time {
	if s.testClock != nil {
		return s.testClock()
	}
	return time.Now()
}

// Ping checks that the database answers a query, within ctx, for liveness probes.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
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
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	var k error
	switch pe.Code {
	case "25006": // read_only_sql_transaction: a standby, or a read-only default
		k = store.ErrReadOnly
	case "53100": // disk_full
		k = store.ErrDiskFull
	case "58030": // io_error
		k = store.ErrIO
	case "XX001", "XX002": // data_corrupted, index_corrupted
		k = store.ErrCorrupt
	default:
		return err
	}
	return fmt.Errorf("%w: %w", k, err)
}
