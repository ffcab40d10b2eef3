package schedules

import (
	"context"
	"encoding/json"
	"fmt"

	"sheetq/app/audit"
	"slices"
	"strings"

	"sheetq/app/access"
	"sheetq/app/exports"
	"sheetq/jobs/deliver"
	"sheetq/store"
)

// The access rules for schedules (ARCHITECTURE.md, "People and permissions"): a member
// sees, changes and deletes only their own schedules of reports they may run; a
// schedule runs as its owner at each firing (their access and their from=person.<attr>
// values then, not when it was saved); a member's schedule delivers by email only to
// the allowed domains, and to folders and webhooks only when an admin made the target.

// ownerOf is the identity schedule owner name has now: the local admin for a schedule
// made without sign-in or declared in the config file.
func (s *Service) ownerOf(ctx context.Context, name string) (access.Who, error) {
	if name == "" || name == ConfigOwner || s.Owners == nil {
		return access.LocalUser, nil
	}
	return s.Owners(ctx, name)
}

// visible reports whether ctx's identity may see schedule sc.
func (s *Service) visible(ctx context.Context, sc store.Schedule) bool {
	who := access.From(ctx)
	if who.IsAdmin() {
		return true
	}
	if !who.Owns(sc.Owner) {
		return false
	}
	_, err := s.Exports.Report(ctx, sc.Report)
	return err == nil
}

// getVisible is schedule id when ctx's identity may see it; store.ErrNotFound otherwise.
func (s *Service) getVisible(ctx context.Context, id string) (store.Schedule, error) {
	sc, err := s.Store.GetSchedule(ctx, id)
	if err == nil && !s.visible(ctx, sc) {
		return store.Schedule{}, fmt.Errorf("%w: schedule %q", store.ErrNotFound, id)
	}
	return sc, err
}

// checkLimits is what a member may not deliver to among targets: an email address
// outside EmailDomains (when set), and a folder or webhook target that prev (the
// schedule's targets before this change, which an admin made) does not have. An admin
// may deliver anywhere the server allows.
func (s *Service) checkLimits(who access.Who, raw json.RawMessage, prev []deliver.Target) InputErrors {
	if who.IsAdmin() {
		return nil
	}
	targets, err := deliver.DecodeTargets(raw)
	if err != nil {
		return nil // checkTargets says what is wrong with the list
	}
	var errs InputErrors
	for i, t := range targets {
		switch t.Type {
		case deliver.TypeEmail:
			for _, to := range t.To {
				if !s.emailAllowed(to) {
					errs = append(errs, &InputError{Field: "deliver", Index: i, Forbidden: true,
						Message: fmt.Sprintf("%s: a member's schedule may mail only addresses at %s", to, strings.Join(s.EmailDomains, ", "))})
					break
				}
			}
		default:
			if !slices.ContainsFunc(prev, func(p deliver.Target) bool { return sameTarget(p, t) }) {
				errs = append(errs, &InputError{Field: "deliver", Index: i, Forbidden: true,
					Message: fmt.Sprintf("only an admin may add a %s target; ask one to add it to your schedule", t.Type)})
			}
		}
	}
	return errs
}

// emailAllowed reports whether a member's schedule may mail address to.
func (s *Service) emailAllowed(to string) bool {
	if len(s.EmailDomains) == 0 {
		return true
	}
	at := strings.LastIndexByte(to, '@')
	if at < 0 {
		return false
	}
	domain := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(to[at+1:])), ">")
	return slices.ContainsFunc(s.EmailDomains, func(d string) bool { return strings.EqualFold(strings.TrimPrefix(d, "@"), domain) })
}

// sameTarget is whether two targets deliver to the same place.
func sameTarget(a, b deliver.Target) bool {
	return a.Type == b.Type && a.URL == b.URL && a.Path == b.Path && slices.Equal(a.To, b.To)
}

// targetsOf is a stored schedule's targets (none when they cannot be read).
func targetsOf(sc store.Schedule) []deliver.Target {
	ts, _ := deliver.DecodeTargets(sc.Deliver)
	return ts
}

// record writes the audit entry of a change to schedule sc by ctx's identity before the
// change is kept: when it cannot be written the change is refused
// (exports.Unaudited), so that nothing changes unaudited.
func (s *Service) record(ctx context.Context, sc store.Schedule, what string) error {
	if s.Audit == nil {
		return nil
	}
	detail := fmt.Sprintf("schedule %s %s (%s %s)", sc.ID, what, sc.Cron, sc.TimeZone)
	if err := s.Audit.Record(ctx, audit.ScheduleChanged, audit.Entry{Report: sc.Report, Detail: detail}); err != nil {
		return exports.Unaudited(err)
	}
	return nil
}
