package exports

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/jobs/export"
	"sheetq/store"
)

// The access rules for exports (ARCHITECTURE.md, "People and permissions"): a report a
// person may not run does not exist for them, and an export that is not theirs (or is of
// a report they may no longer run) does not either, unless they are an admin. Both
// answer as unknown, so that nothing leaks by the status.

// MayRun reports whether ctx's identity may see and run rep.
func (s *Service) MayRun(ctx context.Context, rep export.Report) bool {
	return s.Policy.CanRun(access.From(ctx), rep.Access)
}

// MayRunEntry is MayRun for a catalog entry: a broken report file is an admin's.
func (s *Service) MayRunEntry(ctx context.Context, e export.Entry) bool {
	if e.Err != nil {
		return access.From(ctx).IsAdmin()
	}
	return s.MayRun(ctx, e.Report)
}

// Report is report id as ctx's identity may see it, or an error wrapping
// export.ErrUnknownReport when there is none or they may not run it.
func (s *Service) Report(ctx context.Context, id string) (export.Report, error) {
	rep, err := s.Kind.Report(id)
	if err == nil && !s.MayRun(ctx, rep) {
		return export.Report{}, fmt.Errorf("%w: %q", export.ErrUnknownReport, id)
	}
	return rep, err
}

// Visible reports whether ctx's identity may see, download, cancel, retry and delete
// export j: an admin may; a member only their own, and only of a report they may still
// run.
func (s *Service) Visible(ctx context.Context, j store.Job) bool {
	return s.VisibleTo(ctx, j.CreatedBy, export.ReportOf(j))
}

// VisibleTo is Visible for an export whose owner (created_by) and report these are.
func (s *Service) VisibleTo(ctx context.Context, owner, report string) bool {
	who := access.From(ctx)
	if who.IsAdmin() {
		return true
	}
	if !who.Owns(owner) {
		return false
	}
	_, err := s.Report(ctx, report)
	return err == nil
}

// ListFor narrows a listing to what ctx's identity may see: a member's own exports.
// Filter still has to drop those of reports they may no longer run.
func ListFor(ctx context.Context, o store.ListOptions) store.ListOptions {
	if who := access.From(ctx); !who.IsAdmin() {
		o.CreatedBy = who.Name
	}
	return o
}

// Filter keeps the exports of list that ctx's identity may see.
func (s *Service) Filter(ctx context.Context, list []store.Job) []store.Job {
	if access.From(ctx).IsAdmin() {
		return list
	}
	out := list[:0:0]
	for _, j := range list {
		if s.Visible(ctx, j) {
			out = append(out, j)
		}
	}
	return out
}

// Forbidden is the 403 problem for an action on something visible that ctx's identity
// may not do; what says what is missing.
func Forbidden(what string) *problem.Problem {
	return problem.New(http.StatusForbidden, "forbidden", what)
}

// AdminOnly returns the 403 problem when ctx's identity is no admin.
func AdminOnly(ctx context.Context, what string) error {
	if access.From(ctx).IsAdmin() {
		return nil
	}
	return Forbidden(what + " is for admins only")
}

// attrError turns a missing attribute into the 403 that says which.
func attrError(err error) *problem.Problem {
	var ae *export.AttrError
	if !errors.As(err, &ae) {
		return nil
	}
	p := Forbidden(ae.Error())
	p.Param = ae.Param
	return p
}

// Record writes the audit entry of action on export j by ctx's identity, before the
// action is done: when the entry cannot be written the action is refused, with the 503
// that Unaudited returns, so that nothing is done unaudited (RELIABILITY.md). A service
// without an audit log records nothing.
func (s *Service) Record(ctx context.Context, action string, j store.Job, detail string) error {
	if s.Audit == nil {
		return nil
	}
	if err := s.Audit.Record(ctx, action, audit.Entry{Job: j.ID, Report: export.ReportOf(j), Detail: detail}); err != nil {
		return Unaudited(err)
	}
	return nil
}

// Unaudited is the refusal of an action whose audit entry could not be written (err):
// a fault of the database is answered as such (a full disk is 507, a busy one 503
// store_busy, a client gone 499), anything else is 503 audit_unavailable.
func Unaudited(err error) error {
	if _, fault := problem.FaultOf(err); fault || errors.Is(err, store.ErrBusy) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return problem.New(http.StatusServiceUnavailable, "audit_unavailable",
		"nothing was done: the audit log could not record it (see the server's log); try again shortly").With("Retry-After", "5")
}
