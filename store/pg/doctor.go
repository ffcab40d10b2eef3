package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"sheetq/store"
)

// Health is what Diagnose found in a PostgreSQL job store (store.Health).
type Health = store.Health

// Diagnose checks the PostgreSQL job store at dsn for `sheetq doctor` without changing
// it: unlike Open it migrates nothing, so a schema that is behind (or ahead of) this
// build is reported, not repaired. The write probe is an insert into jobs that is rolled
// back, which fails as a node's writes would on a read-only server, a standby or a
// missing privilege. The error is for a server that cannot be reached at all.
func Diagnose(ctx context.Context, dsn string) (Health, error) {
	var h Health
	ms, err := store.ReadMigrations(migrationFS)
	if err != nil {
		return h, err
	}
	h.Want = ms[len(ms)-1].Version
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return h, fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, `SELECT version()`).Scan(&h.Server); err != nil {
		return h, fmt.Errorf("postgres: %w", err)
	}
	var found bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&found); err != nil {
		return h, fmt.Errorf("postgres: %w", err)
	}
	if found {
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&h.Schema); err != nil {
			return h, fmt.Errorf("postgres: read the schema version: %w", err)
		}
	}
	switch {
	case h.Schema == 0:
		h.Problems = append(h.Problems, "no sheetq schema in this database (or in its search_path): a node creates it at start, and sheetq store copy fills it from a data directory")
		return h, nil
	case h.Schema < h.Want:
		h.Problems = append(h.Problems, fmt.Sprintf("schema at migration %d, this sheetq wants %d: a node of this version migrates it at start", h.Schema, h.Want))
	case h.Schema > h.Want:
		h.Problems = append(h.Problems, fmt.Sprintf("schema at migration %d, newer than this sheetq's %d: upgrade sheetq", h.Schema, h.Want))
	}
	if err := writeProbe(ctx, conn); err != nil {
		h.Problems = append(h.Problems, "cannot write: "+err.Error())
	}
	if h.Schema != h.Want {
		return h, nil
	}
	rows, err := conn.Query(ctx, `SELECT id, status, attempt, coalesce(file_name, ''), coalesce(file_size, 0), coalesce(file_sha256, '') FROM jobs`)
	if err != nil {
		return h, fmt.Errorf("postgres: job files: %w", err)
	}
	h.Files, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.JobFile, error) {
		var j store.JobFile
		err := r.Scan(&j.ID, &j.Status, &j.Attempt, &j.FileName, &j.FileSize, &j.FileSHA256)
		return j, err
	})
	if err != nil {
		return h, fmt.Errorf("postgres: job files: %w", err)
	}
	return h, nil
}

// writeProbe inserts a job and rolls it back: nothing stays, and no notification is
// sent (NOTIFY is delivered at commit only).
func writeProbe(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	_, err = tx.Exec(ctx, `INSERT INTO jobs (id, kind, args, status, run_at, created_at)
		VALUES ('sheetq-doctor-probe', 'doctor', '{}', 'CANCELED', now(), now())`)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return errors.New(pe.Message)
	}
	return err
}
