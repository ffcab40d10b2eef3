// Package audit owns the audit log's writes and its retention (issue 39): who did what,
// when, from which address, to which export and report, written to the job store
// (store.Store.Audit) on every driver. Record takes the actor from the request's
// identity (app/access) and the address from the middleware; a caller whose entry
// could not be written refuses its action (503), so nothing is done unaudited
// (RELIABILITY.md). It never decides who may do what: that is app/access's, and the
// handlers'.
package audit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sheetq/app/access"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/store"
)

// The actions the log records (docs/api.md, "Audit log").
const (
	SignIn          = "signin"
	SignInFailed    = "signin_failed"
	ExportRequested = "export_requested"
	FileDownloaded  = "file_downloaded"
	ExportDeleted   = "export_deleted"
	ExportCanceled  = "export_canceled"
	ExportRetried   = "export_retried"
	ScheduleChanged = "schedule_changed"
	Forbidden       = "forbidden"
)

// Actions lists every action, in the order the Audit page offers them.
var Actions = []string{SignIn, SignInFailed, ExportRequested, FileDownloaded, ExportDeleted,
	ExportCanceled, ExportRetried, ScheduleChanged, Forbidden}

// IsAction reports whether a is one of Actions.
func IsAction(a string) bool { return slices.Contains(Actions, a) }

// Entry is what a caller says of its action beyond who, when and from where.
type Entry struct {
	// Job and Report are the export and the report the action concerns ("" for none).
	Job, Report string
	// Detail is a sentence more: what was refused and why, a schedule's change.
	Detail string
}

// LocalActor is the actor of the local admin: the one user of a loopback server with
// no tokens and no OpenID provider, who has no name.
const LocalActor = "local"

// AnonymousActor is the actor of RecordAs when the caller knows no name (a sign-in
// that failed before anyone was named).
const AnonymousActor = "anonymous"

// Log writes the audit log and prunes it. It is safe for concurrent use.
type Log struct {
	st  *store.Store
	log *slog.Logger
}

// New returns the audit log kept in st; log receives the entries that could not be
// written and the pruning's figures.
func New(st *store.Store, log *slog.Logger) *Log {
	return &Log{st: st, log: log}
}

// Record writes one entry. The actor is access.From(ctx).Name (or "local" for the local
// admin, never empty), the IP is middleware.Client(ctx).IP. It returns an error when the
// entry could not be written: callers then refuse the action (503), so nothing is done
// unaudited.
func (l *Log) Record(ctx context.Context, action string, e Entry) error {
	actor := access.From(ctx).Name
	if actor == "" {
		actor = LocalActor
	}
	return l.RecordAs(ctx, actor, action, e)
}

// RecordAs is Record with the actor given, for sign-in events, where ctx carries no
// identity yet; "" is AnonymousActor.
func (l *Log) RecordAs(ctx context.Context, actor, action string, e Entry) error {
	entry := entryOf(ctx, actor, action, e)
	if _, err := l.st.Audit(ctx, entry); err != nil {
		// A fault of the database (a full disk) is expected and answered as such, so it
		// is a WARN, as the database fault itself is; anything else an ERROR.
		level := slog.LevelError
		if _, fault := problem.FaultOf(err); fault || errors.Is(err, store.ErrBusy) {
			level = slog.LevelWarn
		}
		l.log.Log(ctx, level, "audit entry not written: the action is refused", "action", action, "actor", entry.Actor,
			"job", entry.Job, "err", err)
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// Refused records a 403 answered to r (problem.Reporter.Refused): the audit log's
// "forbidden", with what the answer said is missing. The refusal stands whether or not
// its entry could be written; a failure is logged by RecordAs.
func (l *Log) Refused(r *http.Request, detail string) {
	_ = l.Record(r.Context(), Forbidden, Entry{Detail: r.Method + " " + r.URL.Path + ": " + detail})
}

// EntryOf is the entry Record would write, for a write that carries it in its own
// transaction (store.NewJob.Audit: an export request is recorded with its job).
func EntryOf(ctx context.Context, action string, e Entry) *store.AuditEntry {
	actor := access.From(ctx).Name
	if actor == "" {
		actor = LocalActor
	}
	entry := entryOf(ctx, actor, action, e)
	return &entry
}

// entryOf is the entry of action by actor: what a caller passes is made storable rather
// than refused, since an entry must not fail, and with it the action, for a long error
// message or a stray byte in a name.
func entryOf(ctx context.Context, actor, action string, e Entry) store.AuditEntry {
	if actor == "" {
		actor = AnonymousActor
	}
	return store.AuditEntry{
		Actor:  clean(actor, store.AuditFieldMax),
		Action: clean(action, store.AuditFieldMax),
		Job:    clean(e.Job, store.AuditFieldMax),
		Report: clean(e.Report, store.AuditFieldMax),
		IP:     clean(middleware.Client(ctx).IP, store.AuditFieldMax),
		Detail: clean(e.Detail, store.AuditDetailMax),
	}
}

// clean is s as the store keeps it: valid UTF-8 without NULs (each replaced by U+FFFD),
// cut to max runes.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// Entries returns the entries f selects, newest first (store.Store.AuditLog).
func (l *Log) Entries(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	return l.st.AuditLog(ctx, f)
}

// EncodeCursor is the cursor of the page after an entry: its Seq, encoded so that
// clients treat it as opaque (as the exports' cursors).
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(seq, 10)))
}

// ParseCursor reads a cursor into store.AuditFilter.Before; ok is false for one this
// server did not give out.
func ParseCursor(c string) (seq int64, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// The pruning's pace: a pass an hour, each removing its entries in batches, so that no
// transaction holds the database for long.
const (
	pruneEvery = time.Hour
	pruneBatch = 1000
)

// Prune removes the entries older than keep (by the store's clock) now, then once an
// hour, until ctx ends; keep zero or less keeps every entry. Nodes of a cluster that
// prune at once share the work (store.Store.PruneAudit); a failed pass is logged and
// tried again at the next.
func (l *Log) Prune(ctx context.Context, keep time.Duration) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if n, err := l.PruneOnce(ctx, keep); err != nil && ctx.Err() == nil {
			l.log.WarnContext(ctx, "prune the audit log", "removed", n, "err", err)
		} else if n > 0 {
			l.log.InfoContext(ctx, "pruned the audit log", "removed", n, "keep", keep)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PruneOnce is one pass of Prune: it removes every entry older than keep, a batch at a
// time, and returns how many it removed.
func (l *Log) PruneOnce(ctx context.Context, keep time.Duration) (int, error) {
	before := l.st.Now().Add(-keep)
	total := 0
	for {
		n, err := l.st.PruneAudit(ctx, before, pruneBatch)
		total += n
		if err != nil {
			return total, err
		}
		if n < pruneBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
