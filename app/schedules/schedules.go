// Package schedules is what the API, the pages, the CLI and the config file share about
// scheduled exports (issue 20): checking a schedule, computing its next firings with
// their parameters resolved, keeping it in the store, and firing what is due on every
// node (fire.go), once per (schedule, time) however many nodes run.
package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/exports"
	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/jobs"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/jobs/schedule"
	"sheetq/store"
)

// Store is the schedules table and the store's clock (the database's on PostgreSQL).
type Store interface {
	CreateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error)
	GetSchedule(ctx context.Context, id string) (store.Schedule, error)
	ListSchedules(ctx context.Context) ([]store.Schedule, error)
	UpdateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error)
	DeleteSchedule(ctx context.Context, id string) error
	DueSchedules(ctx context.Context, limit int) ([]store.Schedule, error)
	FireSchedule(ctx context.Context, f store.Firing) (store.Job, bool, error)
	ScheduleFirings(ctx context.Context, id string, limit int) ([]store.Job, error)
	EditSchedule(ctx context.Context, id string, edit func(store.Schedule) (store.Schedule, error)) (store.Schedule, error)
	MoveSchedule(ctx context.Context, id string, from, next time.Time) (bool, error)
	Now() time.Time
}

// Service keeps and fires schedules.
type Service struct {
	Store Store
	// Exports validates a firing's report and parameters as a request's, and gives
	// its attempt budget.
	Exports *exports.Service
	// Engine is told of each firing's job, so that its lane starts it now.
	Engine *jobs.Engine
	// CheckTarget, when set, checks a delivery target against the server's settings
	// (the folders it may write to, a mail server configured); nil accepts any target
	// whose shape is right.
	CheckTarget func(deliver.Target) error
	Log         *slog.Logger
	// Owners is the identity a schedule's owner has now (a token's from the config, a
	// person's as they last signed in, with the config's [[people]] over it), which a
	// firing runs as (access.go); nil runs every schedule as the local admin.
	Owners func(ctx context.Context, name string) (access.Who, error)
	// Audit records every change of a schedule made through the API or the pages; nil
	// records nothing.
	Audit *audit.Log
	// EmailDomains are the domains a member's schedule may mail ([deliveries]
	// email_domains); none: any.
	EmailDomains []string
	// Now is this node's clock (default time.Now, whose differences are monotonic): the
	// guard against steps of the store's clock measures elapsed time with it (clock.go).
	Now func() time.Time

	clock  clockGuard
	cancel context.CancelFunc // Start's
	done   chan struct{}
}

// Input is a schedule as a person or a script writes it.
type Input struct {
	Report string `json:"report"`
	// Params are the report's parameters: literal values, or for date and datetime
	// parameters relative dates such as "month_start(-1)" (schedule.Relative).
	Params map[string]any `json:"params"`
	Format string         `json:"format,omitempty"`
	BOM    bool           `json:"bom,omitempty"`
	// Cron is a five-field cron expression, read in TimeZone (an IANA name).
	Cron     string          `json:"cron"`
	TimeZone string          `json:"timezone"`
	Deliver  json.RawMessage `json:"deliver,omitempty"`
	Paused   bool            `json:"paused,omitempty"`
}

// InputError says which field of an Input is wrong and why: "cron", "timezone",
// "report", "format", "deliver", or "params.NAME".
type InputError struct {
	Field, Message string
	// Index is, for a "deliver" error about one target, the target's place in the list
	// (from 0); -1 when the list as a whole is wrong. Other fields leave it 0.
	Index int
	// NotFound is set when the report does not exist (or the one saving the schedule
	// may not run it).
	NotFound bool
	// Forbidden is set when the one saving the schedule may not do this (a delivery
	// target only an admin may add, a from=person.<attr> attribute they lack): 403.
	Forbidden bool
}

func (e *InputError) Error() string {
	if e.Field == "deliver" && e.Index >= 0 {
		return fmt.Sprintf("deliver[%d]: %s", e.Index, e.Message)
	}
	return e.Field + ": " + e.Message
}

// InputErrors is every wrong field of an Input that checking it found, in the order
// checked: the time zone, the cron expression, each delivery target, the format, the
// report and its parameters. errors.As finds its first *InputError.
type InputErrors []*InputError

// Error is every error on one line, separated by "; ".
func (es InputErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap is the errors, for errors.As and errors.Is.
func (es InputErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Fields returns every wrong field err names: an InputErrors' list, or a lone
// *InputError; none when err is about no field (a store error).
func Fields(err error) []*InputError {
	var es InputErrors
	if errors.As(err, &es) {
		return es
	}
	var ie *InputError
	if errors.As(err, &ie) {
		return []*InputError{ie}
	}
	return nil
}

// Firing is one coming firing of a schedule: its time and the parameters it will run
// with, as API v1 shows it.
type Firing = apiv1.ScheduledRun

// Previews is how many coming firings Preview shows.
const Previews = 5

// checked is an Input that passed Check, with what checking it computed.
type checked struct {
	in   Input
	spec schedule.Spec
	// who is the identity the schedule runs as: its owner.
	who access.Who
}

// check checks in as a whole (the zone and cron expression, every delivery target, the
// format, the report and every parameter resolved at the first firing) and returns it
// ready to keep, or InputErrors naming every wrong field it found. A check that an
// earlier error makes meaningless is skipped: without the report no parameter can be
// checked, and without a zone and cron expression there is no first firing to resolve
// relative dates at (only whether each names a unit is checked then).
//
// who is the identity the schedule runs as (its owner); limits, when set, is the one
// saving it, whose delivery limits apply (access.go), with prev the targets the
// schedule had before.
func (s *Service) check(who access.Who, in Input, limits *access.Who, prev []deliver.Target) (checked, error) {
	var errs InputErrors
	zone, firing := in.TimeZone, true
	if _, err := schedule.LoadZone(zone); err != nil {
		errs = append(errs, &InputError{Field: "timezone", Message: err.Error()})
		zone, firing = "UTC", false // the expression's own mistakes still show
	}
	spec, err := schedule.Parse(in.Cron, zone)
	if err != nil {
		errs = append(errs, &InputError{Field: "cron", Message: err.Error()})
		firing = false
	}
	errs = append(errs, s.checkTargets(in.Deliver)...)
	if limits != nil {
		errs = append(errs, s.checkLimits(*limits, in.Deliver, prev)...)
	}
	if _, err := (export.Args{}).WithFile(export.FileOptions{Format: in.Format, BOM: in.BOM}); err != nil {
		errs = append(errs, &InputError{Field: "format", Message: err.Error()})
	}
	in.Params = s.typedParams(in.Report, in.Params)
	c := checked{in: in, spec: spec, who: who}
	rep, _ := s.Exports.Kind.Report(in.Report)
	errs = append(errs, encryptionErrors(rep, in)...)
	switch _, prob := s.Exports.ValidateAs(who, in.Report, nil, export.FileOptions{}); {
	case prob != nil && prob.Param == "":
		errs = append(errs, problemError(prob)) // no report: its parameters cannot be checked
	case !firing:
		if _, err := s.resolve(in, s.now(), time.UTC); err != nil {
			errs = append(errs, Fields(err)...)
		}
	default:
		// The parameters as the first firing would run them: a relative date that
		// names no unit, a literal of the wrong type or a broken after= rule shows now,
		// not at 06:00 on the 1st. Every unknown name is named, then the report's first
		// refusal of the others.
		known := c
		known.in.Params = maps.Clone(in.Params)
		known.in.Format, known.in.BOM = "", false // the format is checked above
		for _, name := range slices.Sorted(maps.Keys(in.Params)) {
			if !slices.ContainsFunc(rep.Params, func(p export.Param) bool { return p.Name == name }) {
				errs = append(errs, &InputError{Field: "params." + name,
					Message: (&export.ParamError{Param: name, Message: "unknown parameter"}).Error()})
				delete(known.in.Params, name)
			}
		}
		if _, err := s.args(known, spec.Next(s.now())); err != nil {
			errs = append(errs, Fields(err)...)
		}
	}
	if len(errs) > 0 {
		return checked{}, errs
	}
	return c, nil
}

// encryptionErrors is what is wrong with a schedule's file and targets for the
// encryption its report requires ("-- encrypt: required") or its targets ask for: a
// report that requires it needs a password on every target that carries the file, and
// a csv file cannot be encrypted.
func encryptionErrors(rep export.Report, in Input) InputErrors {
	targets, err := deliver.DecodeTargets(in.Deliver)
	if err != nil {
		return nil // checkTargets says what is wrong with the list
	}
	var errs InputErrors
	if rep.Encrypt && in.Format == export.FormatCSV {
		errs = append(errs, &InputError{Field: "format", Message: "report " + strconv.Quote(rep.ID) +
			" hands out its files only encrypted with a password, which a csv file cannot be: choose xlsx"})
	}
	for i, t := range targets {
		switch {
		case t.Type == deliver.TypeWebhook:
		case rep.Encrypt && t.Password == "":
			errs = append(errs, &InputError{Field: "deliver", Index: i, Message: "report " + strconv.Quote(rep.ID) +
				` hands out its files only encrypted: give this target a "password" (env:SHEETQ_PASSWORD_<NAME> or file:PATH)`})
		case t.Password != "" && in.Format == export.FormatCSV:
			errs = append(errs, &InputError{Field: "deliver", Index: i, Message: `a csv file cannot be encrypted: choose xlsx, or leave out "password"`})
		}
	}
	return errs
}

// checkTargets is what is wrong with a list of delivery targets: the list, or each
// target that this server cannot deliver to (CheckTarget), by its place.
func (s *Service) checkTargets(raw json.RawMessage) InputErrors {
	targets, err := deliver.DecodeTargets(raw)
	if err != nil {
		return InputErrors{{Field: "deliver", Index: -1, Message: err.Error()}}
	}
	checkTarget := s.CheckTarget
	if checkTarget == nil {
		checkTarget = deliver.Target.Check
	}
	var errs InputErrors
	for i, t := range targets {
		if err := checkTarget(t); err != nil {
			errs = append(errs, &InputError{Field: "deliver", Index: i, Message: err.Error()})
		}
	}
	return errs
}

// typedParams is params with each value given as text for an int or number parameter
// of report written as the number it reads as ("3" becomes 3), as the form, the
// command line and a JSON client alike mean it, so that the stored schedule and its
// firings say 3, and without a parameter of report given as null (its default, as in an
// export request). Other values are returned as given; params is not changed.
func (s *Service) typedParams(report string, params map[string]any) map[string]any {
	out := maps.Clone(params)
	if out == nil {
		out = map[string]any{}
	}
	rep, err := s.Exports.Kind.Report(report)
	if err != nil {
		return out
	}
	for _, p := range rep.Params {
		if v, given := out[p.Name]; given && v == nil {
			// A null is the parameter not given, as in an export request: the report's
			// default, not a null kept in the schedule and shown in its next runs.
			delete(out, p.Name)
			continue
		}
		str, ok := out[p.Name].(string)
		if !ok || (p.Type != export.TypeInt && p.Type != export.TypeNumber) {
			continue
		}
		var n json.Number
		if json.Unmarshal([]byte(strings.TrimSpace(str)), &n) == nil {
			out[p.Name] = n
		}
	}
	return out
}

// args is the export args of c's firing at t, validated as a request's. Its error is
// InputErrors: every parameter's relative date that names no unit, or else the
// report's first refusal.
func (s *Service) args(c checked, t time.Time) (export.Args, error) {
	params, err := s.resolve(c.in, t, c.spec.Location())
	if err != nil {
		return export.Args{}, err
	}
	args, prob := s.Exports.ValidateAs(c.who, c.in.Report, params, export.FileOptions{Format: c.in.Format, BOM: c.in.BOM})
	if prob != nil {
		return export.Args{}, InputErrors{problemError(prob)}
	}
	return args, nil
}

// problemError is the export service's refusal of a schedule's report, parameters or
// format as the field it is about.
func problemError(prob *problem.Problem) *InputError {
	ie := &InputError{Field: "report", Message: prob.Detail}
	switch {
	case prob.Param != "":
		ie.Field = "params." + prob.Param
	case prob.Code == "unknown_report":
		ie.NotFound = true
	}
	switch {
	case prob.Status == http.StatusForbidden:
		ie.Forbidden = true
	case prob.Code == "invalid_format":
		ie.Field = "format"
	}
	return ie
}

// resolve is in's parameters at the firing t in loc: each relative date becomes the date
// it names then (a date parameter takes 2026-11-01; a datetime one the first instant of
// that date in the schedule's zone). Other values pass as given.
func (s *Service) resolve(in Input, t time.Time, loc *time.Location) (map[string]any, error) {
	// Without the report (removed since the schedule was saved), a value that reads as
	// a relative date is taken as a date, so that the failed export shows the dates
	// it was for.
	types := map[string]export.Type{}
	rep, repErr := s.Exports.Kind.Report(in.Report)
	for _, p := range rep.Params {
		types[p.Name] = p.Type
	}
	out := make(map[string]any, len(in.Params))
	var errs InputErrors
	for _, name := range slices.Sorted(maps.Keys(in.Params)) {
		v := in.Params[name]
		str, isStr := v.(string)
		typ := types[name]
		if repErr != nil && typ == "" {
			typ = export.TypeDate
		}
		if !isStr || (typ != export.TypeDate && typ != export.TypeDatetime) {
			out[name] = v
			continue
		}
		r, ok, err := schedule.ParseRelative(str)
		switch {
		case err != nil:
			errs = append(errs, &InputError{Field: "params." + name, Message: err.Error()})
		case !ok:
			out[name] = v // a literal date: the report's check decides
		case typ == export.TypeDate:
			out[name] = r.DateString(t, loc)
		default:
			out[name] = r.Midnight(t, loc).UTC().Format(time.RFC3339)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// Preview is the next Previews firings of in after now, with the parameters each will
// run with, or an *InputError when in is wrong, for ctx's identity. Delivery limits are
// checked when a schedule is saved, not here.
func (s *Service) Preview(ctx context.Context, in Input) ([]Firing, error) {
	return s.previewAs(access.From(ctx), in)
}

func (s *Service) previewAs(who access.Who, in Input) ([]Firing, error) {
	c, err := s.check(who, in, nil, nil)
	if err != nil {
		return nil, err
	}
	return s.preview(c)
}

func (s *Service) preview(c checked) ([]Firing, error) {
	var out []Firing
	for _, t := range c.spec.Firings(s.now(), Previews) {
		params, err := s.resolve(c.in, t, c.spec.Location())
		if err != nil {
			return nil, err
		}
		out = append(out, Firing{At: t, Params: params})
	}
	return out, nil
}

// PreviewOf is Preview for a stored schedule, as its owner.
func (s *Service) PreviewOf(ctx context.Context, sc store.Schedule) ([]Firing, error) {
	who, err := s.ownerOf(ctx, sc.Owner)
	if err != nil {
		return nil, err
	}
	return s.previewAs(who, InputOf(sc))
}

// InputOf is a stored schedule as an Input, to edit or preview.
func InputOf(sc store.Schedule) Input {
	in := Input{Report: sc.Report, Format: sc.Format, BOM: sc.BOM, Cron: sc.Cron, TimeZone: sc.TimeZone,
		Deliver: sc.Deliver, Paused: sc.Paused}
	_ = json.Unmarshal(sc.Params, &in.Params)
	if in.Format == export.FormatXLSX {
		in.Format = ""
	}
	return in
}

// row is the store row of c, its next firing after now unless paused.
func (s *Service) row(id, owner string, c checked) (store.Schedule, error) {
	params, err := json.Marshal(c.in.Params)
	if err != nil {
		return store.Schedule{}, &InputError{Field: "params", Message: err.Error()}
	}
	// The targets as read, not the client's bytes: a JSON escape Go reads as U+FFFD (half
	// a surrogate pair) is stored as that, not as an escape PostgreSQL cannot read back.
	deliverJSON := c.in.Deliver
	if targets, err := deliver.DecodeTargets(c.in.Deliver); err == nil && targets != nil {
		if deliverJSON, err = json.Marshal(targets); err != nil {
			return store.Schedule{}, &InputError{Field: "deliver", Index: -1, Message: err.Error()}
		}
	}
	sc := store.Schedule{ID: id, Report: c.in.Report, Params: params, Format: c.in.Format, BOM: c.in.BOM,
		Cron: c.in.Cron, TimeZone: c.in.TimeZone, Deliver: deliverJSON, Owner: owner, Paused: c.in.Paused}
	if sc.Format == "" {
		sc.Format = export.FormatXLSX
	}
	if !sc.Paused {
		sc.NextRunAt = c.spec.Next(s.now())
	}
	return sc, nil
}

// Create checks in and keeps it as a new schedule of owner (the token's or person's
// name, or ""), ctx's identity.
func (s *Service) Create(ctx context.Context, in Input, owner string) (store.Schedule, error) {
	who := access.From(ctx)
	c, err := s.check(who, in, &who, nil)
	if err != nil {
		return store.Schedule{}, err
	}
	sc, err := s.row(store.NewID(), owner, c)
	if err != nil {
		return store.Schedule{}, err
	}
	if err := s.record(ctx, sc, "created"); err != nil {
		return store.Schedule{}, err
	}
	return s.Store.CreateSchedule(ctx, sc)
}

// Edit changes schedule id by change, applied to the schedule as it is stored, checks
// the result and keeps it only if the row is still the one change was applied to
// (compare-and-set in one store transaction, store EditSchedule): a field that change
// leaves alone keeps the value that a concurrent edit or pause wrote, instead of the
// value read before the request's body arrived (issue 36). When the row changed in
// between, the change is applied again to the new row. The check (which may resolve a
// webhook's host) runs outside the transaction, so no lock waits on it. The next firing
// is computed again from now when the cron expression, the zone or the pause changes (a
// changed expression counts from the edit, not from the old time); otherwise it stays,
// so that a time already due still fires.
func (s *Service) Edit(ctx context.Context, id string, change func(*Input)) (store.Schedule, error) {
	for tries := 0; ; tries++ {
		cur, err := s.getVisible(ctx, id)
		if err != nil {
			return store.Schedule{}, err
		}
		if cur.Owner == ConfigOwner {
			return cur, ErrDeclared
		}
		owner, err := s.ownerOf(ctx, cur.Owner)
		if errors.Is(err, store.ErrNotFound) {
			// The schedule runs as its owner, who is no longer known: its reports and
			// attributes cannot be checked as theirs, so it cannot be changed (it can
			// still be paused or deleted, and fires exports refused with the reason).
			return store.Schedule{}, InputErrors{{Field: "owner", Forbidden: true, Index: -1,
				Message: fmt.Sprintf("the schedule's owner %q is no longer known here (a token removed from the config, or a person who has not signed in since); delete it and make it again", cur.Owner)}}
		}
		if err != nil {
			return store.Schedule{}, err
		}
		in := InputOf(cur)
		change(&in)
		editor := access.From(ctx)
		c, err := s.check(owner, in, &editor, targetsOf(cur))
		if err != nil {
			return store.Schedule{}, err
		}
		want, err := s.row(id, cur.Owner, c)
		if err != nil {
			return store.Schedule{}, err
		}
		if want.Cron == cur.Cron && want.TimeZone == cur.TimeZone && want.Paused == cur.Paused && !cur.NextRunAt.IsZero() {
			want.NextRunAt = cur.NextRunAt
		}
		if tries == 0 {
			if err := s.record(ctx, want, "edited"); err != nil {
				return store.Schedule{}, err
			}
		}
		sc, err := s.Store.EditSchedule(ctx, id, func(now store.Schedule) (store.Schedule, error) {
			if !sameRow(now, cur) {
				return now, errMovedOn
			}
			return want, nil
		})
		if errors.Is(err, errMovedOn) && tries < editTries {
			continue // changed since it was read: apply the change to what is there now
		}
		if errors.Is(err, errMovedOn) {
			return store.Schedule{}, ErrBusy
		}
		return sc, err
	}
}

// sameRow is whether two reads of a schedule found it unchanged.
func sameRow(a, b store.Schedule) bool {
	return sameDefinition(a, b) && a.Owner == b.Owner && a.NextRunAt.Equal(b.NextRunAt) &&
		a.LastFiredFor.Equal(b.LastFiredFor) && a.UpdatedAt.Equal(b.UpdatedAt)
}

// editTries bounds Edit's compare-and-set: a schedule changed this often while one edit
// is checked is refused (ErrBusy) rather than tried forever.
const editTries = 20

// ErrBusy refuses an edit of a schedule that other edits kept changing meanwhile.
var ErrBusy = errors.New("the schedule kept changing while this edit was checked; try again")

// SetPaused pauses schedule id, or resumes it from now: the firings it missed while
// paused are not caught up. Only the pause changes, on the row as stored, in one store
// transaction: an edit of other fields at the same moment is kept. A schedule that no
// longer checks (its report gone, say) can still be paused and resumed: resumed, it
// fires, and its export fails with the reason where people look.
func (s *Service) SetPaused(ctx context.Context, id string, paused bool) (store.Schedule, error) {
	cur, err := s.getVisible(ctx, id)
	if err != nil {
		return cur, err
	}
	if cur.Owner == ConfigOwner {
		return cur, ErrDeclared
	}
	if err := s.record(ctx, cur, map[bool]string{true: "paused", false: "resumed"}[paused]); err != nil {
		return store.Schedule{}, err
	}
	return s.Store.EditSchedule(ctx, id, func(cur store.Schedule) (store.Schedule, error) {
		switch {
		case !s.visible(ctx, cur):
			return cur, fmt.Errorf("%w: schedule %q", store.ErrNotFound, id)
		case cur.Owner == ConfigOwner:
			return cur, ErrDeclared
		case cur.Paused == paused:
			return cur, nil
		case paused:
			cur.Paused, cur.NextRunAt = true, time.Time{}
			return cur, nil
		}
		spec, err := schedule.Parse(cur.Cron, cur.TimeZone)
		if err != nil {
			return cur, InputErrors{{Field: "cron", Message: err.Error()}}
		}
		cur.Paused, cur.NextRunAt = false, spec.Next(s.now())
		return cur, nil
	})
}

// Get returns schedule id (store.ErrNotFound when there is none, or ctx's identity may
// not see it).
func (s *Service) Get(ctx context.Context, id string) (store.Schedule, error) {
	return s.getVisible(ctx, id)
}

// List returns every schedule ctx's identity may see, oldest first.
func (s *Service) List(ctx context.Context) ([]store.Schedule, error) {
	all, err := s.Store.ListSchedules(ctx)
	if err != nil || access.From(ctx).IsAdmin() {
		return all, err
	}
	return slices.DeleteFunc(all, func(sc store.Schedule) bool { return !s.visible(ctx, sc) }), nil
}

// Delete removes schedule id; its past firings stay as exports.
func (s *Service) Delete(ctx context.Context, id string) error {
	cur, err := s.getVisible(ctx, id)
	if err != nil {
		return err
	}
	if cur.Owner == ConfigOwner {
		return ErrDeclared
	}
	if err := s.record(ctx, cur, "deleted"); err != nil {
		return err
	}
	return s.Store.DeleteSchedule(ctx, id)
}

// ErrDeclared refuses to change or delete a schedule that the config file declares: the
// next start would make it as the file says again.
var ErrDeclared = errors.New("this schedule is declared in the config file (sheetq.toml): change it there and restart")

// ConfigOwner is the owner of the schedules the config file declares ([[schedules]]):
// the file is their source, so each start makes the table match it.
const ConfigOwner = "sheetq.toml"

// Declared is a schedule the config file declares, under an id of the file's choosing.
type Declared struct {
	ID string
	Input
}

// Declare makes the schedules the config file declares exist as written: a new one is
// created, a changed one updated (its next run computed again from now), an unchanged
// one left alone (so that a time missed while the server was down is still caught up),
// and one the file no longer declares deleted, if mine says this node declared it
// before: with several nodes on one store, a node whose file lacks a schedule that
// another node's file declares leaves it alone (issue 36). Schedules made through the
// API or the pages are not touched. Every declared schedule is checked before any is
// written, so that a wrong one refuses the start without the ones before it already
// changed. It returns what it changed, for the log.
func (s *Service) Declare(ctx context.Context, decl []Declared, mine func(id string) bool) (created, updated, deleted int, err error) {
	seen := map[string]bool{}
	type change struct {
		want   store.Schedule
		exists bool
	}
	var changes []change
	for _, d := range decl {
		if !validDeclaredID(d.ID) {
			return 0, 0, 0, &InputError{Field: "id", Message: fmt.Sprintf("schedule id %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", d.ID)}
		}
		if seen[d.ID] {
			return 0, 0, 0, &InputError{Field: "id", Message: fmt.Sprintf("schedule id %q is declared twice", d.ID)}
		}
		seen[d.ID] = true
		c, err := s.check(access.LocalUser, d.Input, nil, nil)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("schedule %q: %w", d.ID, err)
		}
		want, err := s.row(d.ID, ConfigOwner, c)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("schedule %q: %w", d.ID, err)
		}
		cur, err := s.Store.GetSchedule(ctx, d.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			changes = append(changes, change{want: want})
		case err != nil:
			return 0, 0, 0, err
		case cur.Owner != ConfigOwner:
			return 0, 0, 0, &InputError{Field: "id",
				Message: fmt.Sprintf("schedule id %q is taken by a schedule made through the API or the pages", d.ID)}
		case sameDefinition(cur, want):
			// Unchanged: its next run stays, caught up if it was missed.
		default:
			changes = append(changes, change{want: want, exists: true})
		}
	}
	for _, c := range changes {
		if !c.exists {
			_, err := s.Store.CreateSchedule(ctx, c.want)
			if errors.Is(err, store.ErrConflict) {
				continue // another node starting with the same file created it just now
			}
			if err != nil {
				return created, updated, deleted, err
			}
			created++
			continue
		}
		if _, err := s.Store.UpdateSchedule(ctx, c.want); err != nil {
			return created, updated, deleted, err
		}
		updated++
	}
	all, err := s.Store.ListSchedules(ctx)
	if err != nil {
		return created, updated, deleted, err
	}
	for _, sc := range all {
		if sc.Owner == ConfigOwner && !seen[sc.ID] && mine(sc.ID) {
			if err := s.Store.DeleteSchedule(ctx, sc.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return created, updated, deleted, err
			}
			deleted++
		}
	}
	return created, updated, deleted, nil
}

// validDeclaredID is whether a config file's schedule id can be one: it is a path
// segment of the API and the pages (/api/v1/schedules/{id}), so letters, digits, '.',
// '_' and '-', at most 64, starting with a letter or digit.
func validDeclaredID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// sameDefinition is whether two rows say the same schedule (their times aside).
func sameDefinition(a, b store.Schedule) bool {
	return a.Report == b.Report && jsonEqual(a.Params, b.Params) && a.Format == b.Format && a.BOM == b.BOM &&
		a.Cron == b.Cron && a.TimeZone == b.TimeZone && jsonEqual(a.Deliver, b.Deliver) && a.Paused == b.Paused
}

// jsonEqual compares two JSON documents by value (nil and empty are equal).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil {
		return false
	}
	if len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// Firings are the exports sc's firings made, the latest 1,000 scheduled times first,
// read by their idempotency keys (store.FiringKey): however many other exports its
// report has, none is read. Only those ctx's identity may see are returned.
func (s *Service) Firings(ctx context.Context, sc store.Schedule) ([]store.Job, error) {
	list, err := s.Store.ScheduleFirings(ctx, sc.ID, 1000)
	if err != nil {
		return nil, err
	}
	return s.Exports.Filter(ctx, list), nil
}
