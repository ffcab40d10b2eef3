package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The audit log and the people seen (issue 39): who did what, when, from where, to which
// export and report; and each person's identity as last seen, so that a schedule can
// bind its owner's attributes at a firing. The rules are here, once; a driver keeps the
// rows (Driver.AppendAudit and the others).

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	// Seq is the entry's place in the log: it only grows, and AuditFilter.Before pages
	// by it.
	Seq int64
	// At is when it happened: the store's clock when Audit is given a zero time.
	At time.Time
	// Actor is who did it (a token's name or a person's email, never a secret) and
	// Action what (app/audit names the actions).
	Actor, Action string
	// Job and Report are the export and the report it concerns ("" when none), IP the
	// client's address and Detail a sentence more.
	Job, Report, IP, Detail string
}

// AuditFilter selects entries of the audit log for AuditLog.
type AuditFilter struct {
	// Actor, Action and Job keep the entries whose field equals it; "" keeps any.
	Actor, Action, Job string
	// Before is the cursor: only entries with a Seq below it; 0 starts at the newest.
	Before int64
	// Limit is the page's size: 50 when zero or less, at most 1000.
	Limit int
}

// The bounds of an audit entry's fields and of a person's identity.
const (
	// AuditDetailMax is the most runes an entry's Detail holds.
	AuditDetailMax = 2000
	// AuditFieldMax is the most runes any other text of an entry (or a person's name)
	// holds.
	AuditFieldMax = 300
	// PersonMax is the most bytes of a person's identity (SavePerson).
	PersonMax = 16 << 10
	// AuditPruneMax is the most entries one PruneAudit removes.
	AuditPruneMax = 10_000
)

// ErrAuditInvalid is returned for an audit entry the store cannot keep: one without an
// action or an actor, or with a field beyond its bound.
var ErrAuditInvalid = errors.New("audit entry: an action and an actor are required, and each field within its bound")

// ErrAuditNotWritten marks an Enqueue refused because the job's audit entry
// (NewJob.Audit) could not be written, for a reason that is no fault of the database
// (those keep their kind): the job is not written either.
var ErrAuditNotWritten = errors.New("the audit entry could not be written")

// ErrPersonInvalid is returned for a person the store cannot keep: one without a name,
// with a name beyond AuditFieldMax runes, or whose identity is not a JSON document of at
// most PersonMax bytes.
var ErrPersonInvalid = errors.New("person: a name and a JSON document of at most 16 KiB are required")

// checkText refuses text no driver may be given: bytes that are not UTF-8, a NUL
// (PostgreSQL's text cannot hold either: ErrUnstorable), or more than max runes
// (ErrAuditInvalid).
func checkText(name, s string, max int) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s %w", name, ErrUnstorable)
	}
	if utf8.RuneCountInString(s) > max {
		return fmt.Errorf("%s is longer than %d characters: %w", name, max, ErrAuditInvalid)
	}
	return nil
}

// checkAudit refuses an entry no driver may store.
func checkAudit(e AuditEntry) error {
	if mutant == "no-audit-checks" {
		return nil
	}
	if e.Action == "" || e.Actor == "" {
		return ErrAuditInvalid
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"actor", e.Actor, AuditFieldMax}, {"action", e.Action, AuditFieldMax}, {"job", e.Job, AuditFieldMax},
		{"report", e.Report, AuditFieldMax}, {"ip", e.IP, AuditFieldMax}, {"detail", e.Detail, AuditDetailMax},
	} {
		if err := checkText("audit "+f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return nil
}

// Audit appends e to the audit log and returns it as stored, with its Seq, and its At
// stamped by the store's clock when zero. An entry without an action or an actor, or
// with a field beyond its bound, is ErrAuditInvalid; text that is not UTF-8 or holds a
// NUL is ErrUnstorable.
func (s *Store) Audit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	if err := checkAudit(e); err != nil {
		return AuditEntry{}, err
	}
	e.Seq = 0
	if !e.At.IsZero() {
		// Every driver keeps at least milliseconds: the entry reads back as given.
		e.At = e.At.UTC().Truncate(time.Millisecond)
	}
	out, err := s.d.AppendAudit(ctx, e)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit: %w", s.fault(err))
	}
	return out, nil
}

// AuditLog returns the entries f selects, newest first (Seq descending). A filter whose
// text no entry can hold (not UTF-8, a NUL) matches nothing.
func (s *Store) AuditLog(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit <= 0 && mutant != "no-read-limits" {
		f.Limit = 50
	}
	f.Limit = min(f.Limit, 1000)
	for _, v := range []string{f.Actor, f.Action, f.Job} {
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return []AuditEntry{}, nil
		}
	}
	if f.Before < 0 {
		f.Before = 0
	}
	es, err := s.d.AuditLog(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", s.fault(err))
	}
	return es, nil
}

// PruneAudit removes up to limit entries stamped before before (1000 when limit is zero
// or less, at most AuditPruneMax), oldest first, and returns how many it removed. Nodes
// that prune at the same time remove each entry once between them.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	limit = min(limit, AuditPruneMax)
	n, err := s.d.PruneAudit(ctx, before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", s.fault(err))
	}
	return n, nil
}

// SavePerson records who, the JSON of a person's identity (app/access.Who), under name,
// stamped as seen now by the store's clock; a person seen before is replaced.
func (s *Store) SavePerson(ctx context.Context, name string, who json.RawMessage) error {
	if mutant != "no-audit-checks" {
		if name == "" || len(who) > PersonMax || !json.Valid(who) {
			return ErrPersonInvalid
		}
		if err := checkText("person name", name, AuditFieldMax); err != nil {
			if errors.Is(err, ErrAuditInvalid) {
				return ErrPersonInvalid
			}
			return err
		}
	}
	if err := s.d.SavePerson(ctx, name, who); err != nil {
		return fmt.Errorf("save person: %w", s.fault(err))
	}
	return nil
}

// Person returns the identity last saved under name and when; ErrNotFound when the
// person was never seen.
func (s *Store) Person(ctx context.Context, name string) (who json.RawMessage, seen time.Time, err error) {
	if name == "" || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return nil, time.Time{}, ErrNotFound
	}
	who, seen, err = s.d.Person(ctx, name)
	if err != nil {
		return nil, time.Time{}, s.fault(err)
	}
	return who, seen, nil
}

// Rows is a driver's query result as Collect reads it: database/sql's *Rows and pgx's
// Rows both are.
type Rows interface {
	Next() bool
	Err() error
}

// Collect reads every row of rows with scan, which reads the current one, into a slice
// that is empty, never nil, when there is none (a listing answers []). The caller closes
// rows.
func Collect[T any](rows Rows, scan func() (T, error)) ([]T, error) {
	out := []T{}
	for rows.Next() {
		v, err := scan()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
