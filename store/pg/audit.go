package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
)

// The audit log and the people seen (issue 39, migration 0012), as the SQLite store
// keeps them: the rules are the core's (store/audit.go); this is their SQL.

const auditColumns = `seq, at, actor, action, job, report, ip, detail`

func scanAudit(row pgx.Row) (store.AuditEntry, error) {
	var e store.AuditEntry
	if err := row.Scan(&e.Seq, &e.At, &e.Actor, &e.Action, &e.Job, &e.Report, &e.IP, &e.Detail); err != nil {
		return store.AuditEntry{}, err
	}
	e.At = e.At.UTC()
	return e, nil
}

// AppendAudit stores e, stamped by the store's clock (the database's now()) when its
// At is zero.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error) {
	var at *time.Time
	if !e.At.IsZero() {
		at = &e.At
	}
	out, err := scanAudit(s.pool.QueryRow(ctx, `INSERT INTO audit_log (at, actor, action, job, report, ip, detail)
		VALUES (coalesce($2, `+nowSQL+`), $3, $4, $5, $6, $7, $8) RETURNING `+auditColumns,
		s.now(), at, e.Actor, e.Action, e.Job, e.Report, e.IP, e.Detail))
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry: %w", unstorable(err))
	}
	return out, nil
}

// AuditLog returns the entries f selects, newest first, each filter through its index
// of migration 0012 when the planner finds that cheaper than reading the newest entries.
func (s *Store) AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q, args := auditQuery(f)
	// Planned for the values each time (an unnamed statement): a generic plan guesses
	// every actor and action as common, and would read the whole log backwards by seq
	// for one that is rare, where its index holds a page's worth (pg.TestAuditLogPlans).
	rows, err := s.pool.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Actor != "" {
		where = append(where, `actor = `+arg(f.Actor))
	}
	if f.Action != "" {
		where = append(where, `action = `+arg(f.Action))
	}
	if f.Job != "" {
		// job <> '' lets the planner use the partial index audit_job.
		where = append(where, `job = `+arg(f.Job), `job <> ''`)
	}
	if f.Before > 0 {
		where = append(where, `seq < `+arg(f.Before))
	}
	q := `SELECT ` + auditColumns + ` FROM audit_log`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY seq DESC LIMIT ` + arg(f.Limit), args
}

// PruneAudit removes up to limit entries stamped before before, oldest first. The
// entries another node is removing at the same moment are skipped (SKIP LOCKED), not
// waited for: nodes that prune at once share the work and never remove one twice.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit_log WHERE seq IN (
		SELECT seq FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, limit)
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// SavePerson replaces the person name's identity, seen now by the store's clock.
func (s *Store) SavePerson(ctx context.Context, name string, who json.RawMessage) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO people (name, who, seen_at) VALUES ($2, $3, `+nowSQL+`)
		ON CONFLICT (name) DO UPDATE SET who = excluded.who, seen_at = excluded.seen_at`,
		s.now(), name, string(who))
	if err != nil {
		return fmt.Errorf("save person: %w", unstorable(err))
	}
	return nil
}

// Person returns the identity last saved under name and when, or ErrNotFound.
func (s *Store) Person(ctx context.Context, name string) (json.RawMessage, time.Time, error) {
	var (
		who  string
		seen time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT who, seen_at FROM people WHERE name = $1`, name).Scan(&who, &seen)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, store.ErrNotFound
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read person: %w", err)
	}
	return json.RawMessage(who), seen.UTC(), nil
}
