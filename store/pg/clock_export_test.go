package pg

import (
	"context"
	"sheetq/store"
	"time"
)

// SetLocalClock makes s read this node's clock from f, as if the machine's clock were
// off, and measures the database's offset from it again.
func SetLocalClock(ctx context.Context, st *store.Store, f func() time.Time) error {
	s := st.Driver().(*Store)
	s.local = f
	return s.readSkew(ctx)
}

// DatabaseClock reads the database's clock now.
func DatabaseClock(ctx context.Context, st *store.Store) (time.Time, error) {
	s := st.Driver().(*Store)
	var db time.Time
	err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db)
	return db, err
}

// Exec runs sql on the store's pool, for tests that need a statement in flight.
func Exec(ctx context.Context, st *store.Store, sql string) error {
	s := st.Driver().(*Store)
	_, err := s.pool.Exec(ctx, sql)
	return err
}

// InsertStatements counts the insert statements st's driver ran for groups of Enqueues.
func InsertStatements(st *store.Store) int64 { return st.Driver().(*Store).inserts.Load() }
