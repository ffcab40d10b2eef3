package schedules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/schedule"
	"sheetq/store"
)

// Every is how often a node looks for due schedules: a firing starts within a second
// of its time. The read is one index lookup.
const Every = time.Second

// dueBatch bounds one look: more due schedules wait for the next.
const dueBatch = 100

// Start runs Run on a goroutine of its own until Stop.
func (s *Service) Start(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		s.Run(ctx)
	}()
	return nil
}

// Stop ends what Start started and waits for it; a firing under way finishes its
// transaction first. It may be called more than once.
func (s *Service) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

// Run fires due schedules every Every until ctx ends. Every node runs it; the store
// decides which node fires each time (FireSchedule), so no leader is needed.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(Every)
	defer t.Stop()
	// Next runs that a clock step parked ahead (under a version without the guard, or
	// a step that held and then went back while this node was down) are moved back
	// once at start.
	if _, err := s.repark(ctx, s.now()); err != nil && ctx.Err() == nil {
		s.Log.WarnContext(ctx, "schedules: cannot check next runs against the clock", "err", err)
	}
	for {
		if _, err := s.FireDue(ctx); err != nil && ctx.Err() == nil {
			s.Log.WarnContext(ctx, "schedules: firing failed; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// FireDue fires every schedule that is due by the store's clock and returns how many
// firings this node made. A schedule whose times were missed while every node was down
// fires once, for the latest missed time (the catch-up policy), and moves on to its
// first time after now.
//
// What is due is decided by the store's clock read through the step guard (clock.go):
// a schedule the store says is due but the trusted time says is not waits, and when the
// guard follows the store's clock again after a step, next runs parked ahead are moved
// back first.
func (s *Service) FireDue(ctx context.Context) (int, error) {
	now := s.now()
	if s.clock.takeRepark() {
		if _, err := s.repark(ctx, now); err != nil {
			return 0, err
		}
	}
	due, err := s.Store.DueSchedules(ctx, dueBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, sc := range due {
		if sc.NextRunAt.After(now) {
			break // due by a clock that stepped ahead, not by the trusted time; sorted by time
		}
		fired, err := s.fire(ctx, sc, now)
		if err != nil {
			if ctx.Err() != nil {
				return n, err
			}
			// One schedule whose firing the store refuses does not hold back the
			// schedules due after it (issue 36); it is tried again at the next look.
			errs = append(errs, err)
			continue
		}
		if fired {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// fire makes one firing of sc, which was due at now when read.
func (s *Service) fire(ctx context.Context, sc store.Schedule, now time.Time) (bool, error) {
	log := s.Log.With("schedule_id", sc.ID, "report", sc.Report)
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil {
		// Checked when saved; a zone removed from the database since, say. The
		// schedule cannot move on by itself: pause it, so that it shows as stopped.
		log.ErrorContext(ctx, "schedule cannot be read; pausing it", "err", err)
		_, err := s.Store.EditSchedule(ctx, sc.ID, func(cur store.Schedule) (store.Schedule, error) {
			if !cur.NextRunAt.Equal(sc.NextRunAt) {
				return cur, errMovedOn // edited or fired since it was read: leave it
			}
			cur.Paused, cur.NextRunAt = true, time.Time{}
			return cur, nil
		})
		if errors.Is(err, errMovedOn) || errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return false, err
	}
	at := sc.NextRunAt
	if latest := spec.Latest(at.Add(-time.Nanosecond), now); latest.After(at) {
		log.InfoContext(ctx, "schedule missed firings while no node ran; catching up the latest only",
			"missed_from", at, "firing_for", latest)
		at = latest
	}
	next := spec.Next(maxTime(at, now))
	args, err := s.firingArgs(ctx, sc, spec, at)
	if err != nil {
		return false, err
	}
	body, err := json.Marshal(args)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(body)
	nj := store.NewJob{ID: jobs.NewID(), Kind: export.Name, Args: body, MaxAttempts: s.Exports.MaxAttempts,
		CreatedBy: sc.Owner, Queue: args.Queue(),
		IdempotencyKey: store.FiringKey(sc.ID, at),
		RequestHash:    hex.EncodeToString(sum[:])}
	jobs.FaultPoint("before-fire") // the firing is built, not stored: a crash fires it again
	job, fired, err := s.Store.FireSchedule(ctx, store.Firing{ScheduleID: sc.ID, Due: sc.NextRunAt, ScheduledFor: at, Next: next, Job: nj})
	if err != nil {
		return false, err
	}
	if fired {
		jobs.FaultPoint("after-fire") // the move and the export are committed, the lane not woken
		s.Engine.Stored(job.Queue)
		log.InfoContext(ctx, "schedule fired", "job_id", job.ID, "scheduled_for", at, "next", next)
	}
	return fired, nil
}

// firingArgs is the export of sc's firing at at: the parameters resolved then and
// validated as a request's. A schedule that no longer validates (its report was
// removed, or changed its parameters) still fires, with its parameters as resolved, so
// that the export fails with the reason where people look, instead of the firing
// vanishing.
//
// The firing runs as the schedule's owner now: an owner who may no longer run the
// report, who lacks an attribute it takes, or who is no longer known, fires an export
// that is refused (export.Args.Refused), never one that runs with someone else's access.
func (s *Service) firingArgs(ctx context.Context, sc store.Schedule, spec schedule.Spec, at time.Time) (export.Args, error) {
	in := InputOf(sc)
	at = at.In(spec.Location())
	owner, err := s.ownerOf(ctx, sc.Owner)
	var args export.Args
	switch {
	case err == nil:
		args, err = s.args(checked{in: in, spec: spec, who: owner}, at)
	case errors.Is(err, store.ErrNotFound):
		err = fmt.Errorf("the schedule's owner %q is no longer known here (a token removed from the config, or a person who has not signed in since): %w", sc.Owner, err)
	default:
		return export.Args{}, err // the store: tried again at the next look
	}
	_, known := s.Exports.Kind.Report(sc.Report)
	if refused := refusal(err, known == nil); refused != "" {
		s.Log.WarnContext(ctx, "schedule fires an export its owner may not run", "schedule_id", sc.ID, "owner", sc.Owner, "err", err)
		args = export.Args{Report: sc.Report, Params: map[string]any{}, Refused: refused}
	} else if err != nil {
		s.Log.WarnContext(ctx, "schedule fires an export that will fail", "schedule_id", sc.ID, "err", err)
		params, rerr := s.resolve(in, at, spec.Location())
		if rerr != nil {
			params = in.Params
		}
		args = export.Args{Report: sc.Report, Params: params}
		if sc.Format != export.FormatXLSX {
			args.Format, args.BOM = sc.Format, sc.BOM
		}
	}
	utc := at.UTC()
	args.ScheduleID, args.ScheduledFor, args.TimeZone, args.Deliver = sc.ID, &utc, sc.TimeZone, sc.Deliver
	return args, nil
}

// refusal is why an owner may not fire their schedule's export, from the error checking
// it as them gave, or "" when the error is no refusal: a parameter gone wrong, or a
// report that no longer exists for anyone, fires an export that fails on it.
func refusal(err error, reportExists bool) string {
	if err == nil {
		return ""
	}
	fields := Fields(err)
	if len(fields) == 0 {
		return err.Error() // the owner is not known
	}
	for _, ie := range fields {
		if ie.Forbidden || (ie.NotFound && reportExists) {
			return "the schedule's owner may not run this report now: " + ie.Message
		}
	}
	return ""
}

// errMovedOn ends an edit of a schedule that changed since the firing loop read it.
var errMovedOn = errors.New("the schedule changed since it was read")

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
