package pg

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// ListenWithHook is Listen with a hook that runs after a lost connection, before the
// listener connects again: a test holds it down there.
func ListenWithHook(ctx context.Context, dsn string, log *slog.Logger, cb Callbacks, beforeReconnect func()) (*Listener, error) {
	return listen(ctx, dsn, log, cb, listenHooks{beforeReconnect: beforeReconnect})
}

// BackendPID is the server process of the listener's connection now, for
// pg_terminate_backend.
func (l *Listener) BackendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn.PgConn().PID()
}

// PoolSettings are what Open gave the pool.
func (s *Store) PoolSettings() (maxConns int32, mode pgx.QueryExecMode) {
	c := s.pool.Config()
	return c.MaxConns, c.ConnConfig.DefaultQueryExecMode
}
