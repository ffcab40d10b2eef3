package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sheetq/store"
)

// The audit log and the people seen (issue 39), on MySQL: the tables of migration 0001.

const auditColumns = `seq, at, actor, action, job, report, ip, detail`

func scanAudit(row scanner) (store.AuditEntry, error) {
	var e store.AuditEntry
	if err := row.Scan(&e.Seq, &e.At, &e.Actor, &e.Action, &e.Job, &e.Report, &e.IP, &e.Detail); err != nil {
		return store.AuditEntry{}, err
	}
	e.At = e.At.UTC()
	return e, nil
}

// AppendAudit stores e (At zero: the database's now) and returns it with its Seq.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	var at any = e.At
	if e.At.IsZero() {
		at = nil
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO audit_log (at, actor, action, job, report, ip, detail)
		VALUES (COALESCE(?, `+nowSQL+`), ?, ?, ?, ?, ?, ?)`, at, s.now(), e.Actor, e.Action, e.Job, e.Report, e.IP, e.Detail)
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry: %w", unstorable(err))
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry: %w", err)
	}
	out, err := scanAudit(s.db.QueryRowContext(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE seq = ?`, seq))
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry: %w", err)
	}
	return out, nil
}

// AuditLog answers entries newest first, filtered, up to the filter's limit.
func (s *Store) AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q, args := auditQuery(f)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	out, err := store.Collect(rows, func() (store.AuditEntry, error) { return scanAudit(rows) })
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}

// auditQuery is AuditLog's statement for f and its arguments.
func auditQuery(f store.AuditFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	if f.Actor != "" {
		where, args = append(where, `actor = ?`), append(args, f.Actor)
	}
	if f.Action != "" {
		where, args = append(where, `action = ?`), append(args, f.Action)
	}
	if f.Job != "" {
		where, args = append(where, `job = ?`), append(args, f.Job)
	}
	if f.Before > 0 {
		where, args = append(where, `seq < ?`), append(args, f.Before)
	}
	q := `SELECT ` + auditColumns + ` FROM audit_log`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY seq DESC LIMIT ?`, append(args, f.Limit)
}

// PruneAudit removes up to limit entries stamped before before, oldest first. It reads
// their seqs without locking, then deletes them by primary key in one statement, which
// locks them in seq order: nodes that prune at once wait for each other's rows rather
// than deadlock, and each entry is removed (and counted) by one of them. A prune that
// still loses a deadlock after the retries removed nothing and says so: another node is
// pruning.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq FROM audit_log WHERE at < ? ORDER BY at, seq LIMIT ?`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	var seqs []any
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			return 0, fmt.Errorf("prune audit log: %w", err)
		}
		seqs = append(seqs, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(seqs) == 0 {
		return 0, err
	}
	for try := 0; ; try++ {
		res, err := s.db.ExecContext(ctx, `DELETE FROM audit_log WHERE seq IN (`+placeholders(len(seqs))+`) AND at < ?`,
			append(seqs, before)...)
		switch {
		case isDeadlock(err) && try < maxRetries:
			continue
		case isDeadlock(err):
			return 0, nil
		case err != nil:
			return 0, fmt.Errorf("prune audit log: %w", err)
		}
		n, err := res.RowsAffected()
		return int(n), err
	}
}

// SavePerson replaces the person name's identity, stamped seen by the database's now.
func (s *Store) SavePerson(ctx context.Context, name string, who json.RawMessage) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO people (name, who, seen_at) VALUES (?, ?, `+nowSQL+`)
		ON DUPLICATE KEY UPDATE who = VALUES(who), seen_at = VALUES(seen_at)`, name, string(who), s.now())
	if err != nil {
		return fmt.Errorf("save person: %w", unstorable(err))
	}
	return nil
}

// Person reads a person's identity and when they were last seen, or store.ErrNotFound.
func (s *Store) Person(ctx context.Context, name string) (json.RawMessage, time.Time, error) {
	var (
		who  string
		seen time.Time
	)
	err := s.db.QueryRowContext(ctx, `SELECT who, seen_at FROM people WHERE name = ?`, name).Scan(&who, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read person: %w", err)
	}
	return json.RawMessage(who), seen.UTC(), nil
}
