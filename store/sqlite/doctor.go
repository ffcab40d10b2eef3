package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sheetq/store"
)

// IntegrityCheck runs SQLite's integrity check and returns its findings; a healthy
// database gives none. It reads only, so it may run beside a live server.
func (s *Store) IntegrityCheck(ctx context.Context) ([]string, error) {
	problems, err := s.runCheck(ctx, s.r, `PRAGMA integrity_check`)
	if err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	return problems, nil
}

// runCheck runs a checking pragma (integrity_check, quick_check) on db and returns the
// rows other than "ok".
func (s *Store) runCheck(ctx context.Context, db *sql.DB, pragma string) ([]string, error) {
	rows, err := db.QueryContext(ctx, pragma)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return nil, err
		}
		if msg != "ok" {
			problems = append(problems, msg)
		}
	}
	return problems, rows.Err()
}

// JobFiles lists every job's status, attempt and published file record.
func (s *Store) JobFiles(ctx context.Context) ([]store.JobFile, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, status, attempt, coalesce(file_name, ''),
		coalesce(file_size, 0), coalesce(file_sha256, '') FROM jobs`)
	if err != nil {
		return nil, fmt.Errorf("job files: %w", err)
	}
	defer rows.Close()
	var out []store.JobFile
	for rows.Next() {
		var j store.JobFile
		if err := rows.Scan(&j.ID, &j.Status, &j.Attempt, &j.FileName, &j.FileSize, &j.FileSHA256); err != nil {
			return nil, fmt.Errorf("job files: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
