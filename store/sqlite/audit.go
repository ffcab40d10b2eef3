package sqlite

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

// The audit log and the people seen (issue 39, migration 0013): the rules are the
// core's (store/audit.go); this is their SQL.

const auditColumns = `seq, at, actor, action, job, report, ip, detail`

func scanAudit(row scanner) (store.AuditEntry, error) {
	var (
		e  store.AuditEntry
		at int64
	)
	if err := row.Scan(&e.Seq, &at, &e.Actor, &e.Action, &e.Job, &e.Report, &e.IP, &e.Detail); err != nil {
		return store.AuditEntry{}, err
	}
	e.At = time.UnixMilli(at).UTC()
	return e, nil
}

// AppendAudit stores e, stamped by the store's clock when its At is zero.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	at := e.At
	if at.IsZero() {
		at = s.now()
	}
	var out store.AuditEntry
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanAudit(tx.QueryRowContext(ctx, `INSERT INTO audit_log (at, actor, action, job, report, ip, detail)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING `+auditColumns,
			ms(at), e.Actor, e.Action, e.Job, e.Report, e.IP, e.Detail))
		return err
	})
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry: %w", err)
	}
	return out, nil
}

// AuditLog returns the entries f selects, newest first. Each filter reads its index of
// migration 0013 newest first (an index ends in the rowid), so a page reads no more
// than it shows of the entries that match.
func (s *Store) AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q, args := auditQuery(f)
	rows, err := s.r.QueryContext(ctx, q, args...)
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

// auditQuery is AuditLog's statement and its arguments.
func auditQuery(f store.AuditFilter) (string, []any) {
	var where []string
	var args []any
	if f.Actor != "" {
		where = append(where, `actor = ?`)
		args = append(args, f.Actor)
	}
	if f.Action != "" {
		where = append(where, `action = ?`)
		args = append(args, f.Action)
	}
	if f.Job != "" {
		// job <> '' lets the planner use the partial index audit_job.
		where = append(where, `job = ?`, `job <> ''`)
		args = append(args, f.Job)
	}
	if f.Before > 0 {
		where = append(where, `seq < ?`)
		args = append(args, f.Before)
	}
	q := `SELECT ` + auditColumns + ` FROM audit_log`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY seq DESC LIMIT ?`, append(args, f.Limit)
}

// PruneAudit removes up to limit entries stamped before before, oldest first, in one
// transaction.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM audit_log WHERE seq IN (
			SELECT seq FROM audit_log WHERE at < ? ORDER BY at LIMIT ?)`, ms(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return int(n), nil
}

// SavePerson replaces the person name's identity, seen now by the store's clock.
func (s *Store) SavePerson(ctx context.Context, name string, who json.RawMessage) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO people (name, who, seen_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET who = excluded.who, seen_at = excluded.seen_at`,
			name, string(who), ms(s.now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("save person: %w", err)
	}
	return nil
}

// Person returns the identity last saved under name and when, or ErrNotFound.
func (s *Store) Person(ctx context.Context, name string) (json.RawMessage, time.Time, error) {
	var (
		who  string
		seen int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT who, seen_at FROM people WHERE name = ?`, name).Scan(&who, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read person: %w", err)
	}
	return json.RawMessage(who), time.UnixMilli(seen).UTC(), nil
}
