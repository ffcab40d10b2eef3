package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrTransactionPooler is Open's error behind a connection pooler in transaction mode
// (PgBouncer's pool_mode=transaction) without Options.PollOnly: the pool's cached
// prepared statements would meet server connections that never saw them ("prepared
// statement does not exist", or "already exists" on one that another client's saw), and
// a Listener's LISTEN, which such a pooler accepts without a word, would stay on a server
// connection that goes to another client after the statement, so no wake-up would ever
// arrive. Such a node must poll only (Options.PollOnly, and no Listener).
var ErrTransactionPooler = errors.New("a connection pooler in transaction mode (PgBouncer's pool_mode=transaction) is between this node and PostgreSQL: it keeps neither LISTEN nor prepared statements from one transaction to the next")

// checkPool runs checkSession on one of pool's connections; cfg is the pool's.
func checkPool(ctx context.Context, pool *pgxpool.Pool, cfg *pgx.ConnConfig) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return checkSession(ctx, cfg, c.Conn())
}

// checkSession returns ErrTransactionPooler if conn does not keep its server session
// between transactions. PostgreSQL itself gives a connection its backend's pid as the
// cancel key, so a key that is not pg_backend_pid() is a pooler's. Whether that pooler
// keeps the session (its session mode, where LISTEN works) is then asked: another
// client holds a transaction open, which in transaction mode takes the server
// connection conn just gave back (PgBouncer reuses the last one first), and conn's next
// statement runs on another backend. A pooler that hands out a different one to that
// client is not caught (the node then runs as without this check); one that keeps the
// session never fails it.
func checkSession(ctx context.Context, cfg *pgx.ConnConfig, conn *pgx.Conn) error {
	pid, err := backendPID(ctx, conn)
	if err != nil || pid == conn.PgConn().PID() {
		return err
	}
	other, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("check the pooler's session mode: %w", err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	tx, err := other.Begin(ctx)
	if err != nil {
		return fmt.Errorf("check the pooler's session mode: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := backendPID(ctx, tx.Conn()); err != nil {
		return fmt.Errorf("check the pooler's session mode: %w", err)
	}
	again, err := backendPID(ctx, conn)
	if err != nil {
		return fmt.Errorf("check the pooler's session mode: %w", err)
	}
	if again != pid {
		return ErrTransactionPooler
	}
	return nil
}

// backendPID asks the server which backend runs conn's statement, in the simple
// protocol, which leaves no prepared statement behind.
func backendPID(ctx context.Context, conn *pgx.Conn) (uint32, error) {
	var pid uint32
	err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&pid)
	return pid, err
}
