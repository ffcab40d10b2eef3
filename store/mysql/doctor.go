package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"sheetq/store"
)

// Health is what Diagnose found in a MySQL or MariaDB job store (store.Health).
type Health = store.Health

// Diagnose checks the job store at dsn for `sheetq doctor` without changing it: unlike
// Open it migrates nothing, so a schema that is behind (or ahead of) this build is
// reported, not repaired. The write probe is an insert into jobs that is rolled back,
// which fails as a node's writes would on a read-only server, a replica or a missing
// privilege. The error is for a server that cannot be reached at all.
func Diagnose(ctx context.Context, dsn string) (Health, error) {
	var h Health
	ms, err := store.ReadMigrations(migrationFS)
	if err != nil {
		return h, err
	}
	h.Want = ms[len(ms)-1].Version
	cfg, err := Config(dsn)
	if err != nil {
		return h, fmt.Errorf("mysql: %w", err)
	}
	db, err := connect(cfg)
	if err != nil {
		return h, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&h.Server); err != nil {
		return h, fmt.Errorf("connect to mysql: %w", err)
	}
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'schema_migrations'`).Scan(&tables); err != nil {
		return h, fmt.Errorf("mysql: %w", err)
	}
	if tables > 0 {
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&h.Schema); err != nil {
			return h, fmt.Errorf("mysql: read the schema version: %w", err)
		}
	}
	switch {
	case h.Schema == 0:
		h.Problems = append(h.Problems, "no sheetq tables in this database: a node creates them at start, and sheetq store copy fills them from a data directory")
		return h, nil
	case h.Schema < h.Want:
		h.Problems = append(h.Problems, fmt.Sprintf("schema at migration %d, this sheetq wants %d: a node of this version migrates it at start", h.Schema, h.Want))
	case h.Schema > h.Want:
		h.Problems = append(h.Problems, fmt.Sprintf("schema at migration %d, newer than this sheetq's %d: upgrade sheetq", h.Schema, h.Want))
	}
	if err := writeProbe(ctx, db); err != nil {
		h.Problems = append(h.Problems, "cannot write: "+err.Error())
	}
	if h.Schema != h.Want {
		return h, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT id, status, attempt, COALESCE(file_name, ''), COALESCE(file_size, 0), COALESCE(file_sha256, '') FROM jobs`)
	if err != nil {
		return h, fmt.Errorf("mysql: job files: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var j store.JobFile
		if err := rows.Scan(&j.ID, &j.Status, &j.Attempt, &j.FileName, &j.FileSize, &j.FileSHA256); err != nil {
			return h, fmt.Errorf("mysql: job files: %w", err)
		}
		h.Files = append(h.Files, j)
	}
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("mysql: job files: %w", err)
	}
	return h, nil
}

// writeProbe inserts a job and rolls it back: nothing stays.
func writeProbe(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO jobs (id, kind, args, status, run_at, created_at)
		VALUES ('sheetq-doctor-probe', 'doctor', '{}', 'CANCELED', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`)
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return errors.New(me.Message)
	}
	return err
}
