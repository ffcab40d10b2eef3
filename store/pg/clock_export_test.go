package pg

import (
	"context"
	"time"
)

// SetLocalClock makes s read this node's clock from f, as if the machine's clock were
// off, and measures the database's offset from it again.
func SetLocalClock(ctx context.Context, s *Store, f func() time.Time) error {
	s.local = f
	return s.readSkew(ctx)
}

// DatabaseClock reads the database's clock now.
func DatabaseClock(ctx context.Context, s *Store) (time.Time, error) {
	var db time.Time
	err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db)
	return db, err
}

// Exec runs sql on the store's pool, for tests that need a statement in flight.
func Exec(ctx context.Context, s *Store, sql string) error {
	_, err := s.pool.Exec(ctx, sql)
	return err
}
