package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sheetq/store"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// faultOf names the lasting fault of the file or its disk that err reports, or returns
// nil: a constraint, a busy lock or a fenced update says nothing about the file.
func faultOf(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range []error{store.ErrDiskFull, store.ErrReadOnly, store.ErrCorrupt, store.ErrIO} {
		if errors.Is(err, k) {
			return k
		}
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		// The sample database and exports write through the OS, not SQLite.
		if errors.Is(err, syscall.ENOSPC) {
			return store.ErrDiskFull
		}
		return nil
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return store.ErrDiskFull
	case sqlite3.SQLITE_READONLY:
		return store.ErrReadOnly
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return store.ErrCorrupt
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return store.ErrIO
	}
	return nil
}

// withFault wraps err with the fault it reports, so that callers test it with errors.Is
// (ErrDiskFull and the others) while errors.As still finds the SQLite error.
func withFault(err error) error {
	k := faultOf(err)
	if k == nil || errors.Is(err, k) {
		return err
	}
	return fmt.Errorf("%w: %w", k, err)
}

// health is what readiness needs to know of the file: why the last write failed, until a
// probe write commits, and damage found, which only a restart on a repaired file clears.
type health struct {
	mu      sync.Mutex
	write   error     // the last failed write, wrapped with its fault; nil when writing works
	corrupt error     // damage found by a statement or a check; sticky
	probed  time.Time // the last probe write, wall clock (not the store's clock, which tests stop)
}

// note records err if it reports a fault of the file or the disk.
func (h *health) note(err error) {
	k := faultOf(err)
	if k == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if k == store.ErrCorrupt {
		if h.corrupt == nil {
			h.corrupt = withFault(err)
		}
		return
	}
	h.write = withFault(err)
}

func (h *health) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return cmp.Or(h.corrupt, h.write)
}

// NoteError records a failure a caller saw from a read, so that readiness reports a
// damaged file that a query ran into; errors that say nothing about the file are ignored.
func (s *Store) NoteError(err error) { s.health.note(err) }

// WriteHealth returns nil while the store can write as far as it knows: no write has
// failed for a reason of the file or its disk since the last probe, and no damage was
// found. Otherwise it returns that failure, which errors.Is matches with ErrDiskFull,
// ErrReadOnly, ErrCorrupt or ErrIO.
func (s *Store) WriteHealth() error { return s.health.get() }

// probeEvery bounds how often ProbeWrite writes, so that a client polling readiness
// cannot turn it into a stream of fsyncs.
const probeEvery = time.Second

// ProbeWrite tries one small write (the write_probe row) if a write has failed since the
// last probe and the last probe is at least a second old, and returns WriteHealth after
// it: a probe that commits shows that writing works again (space was freed). Damage is
// not cleared by a probe.
func (s *Store) ProbeWrite(ctx context.Context) error {
	h := &s.health
	h.mu.Lock()
	due := h.write != nil && h.corrupt == nil && time.Since(h.probed) >= probeEvery
	if due {
		h.probed = time.Now()
	}
	h.mu.Unlock()
	if !due {
		return h.get()
	}
	if err := s.probe(ctx); err == nil {
		h.mu.Lock()
		h.write = nil
		h.mu.Unlock()
	}
	return h.get()
}

// probe writes the write_probe row in a transaction of its own.
func (s *Store) probe(ctx context.Context) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO write_probe (id, at) VALUES (1, ?)
			ON CONFLICT (id) DO UPDATE SET at = excluded.at`, ms(s.now()))
		return err
	})
}

// IsDiskFull reports whether err, from any SQLite file (the sample shop database too,
// which is not the store) or the OS, says the disk is full.
func IsDiskFull(err error) bool { return errors.Is(withFault(err), store.ErrDiskFull) }
