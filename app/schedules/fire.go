package schedules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
func (s *Service) FireDue(ctx context.Context) (int, error) {
	due, err := s.Store.DueSchedules(ctx, dueBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sc := range due {
		fired, err := s.fire(ctx, sc)
		if err != nil {
			return n, err
		}
		if fired {
			n++
		}
	}
	return n, nil
}

// fire makes one firing of sc, which was due when read.
func (s *Service) fire(ctx context.Context, sc store.Schedule) (bool, error) {
	log := s.Log.With("schedule_id", sc.ID, "report", sc.Report)
	now := s.Store.Now()
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil {
		// Checked when saved; a zone removed from the database since, say. The
		// schedule cannot move on by itself: pause it, so that it shows as stopped.
		log.ErrorContext(ctx, "schedule cannot be read; pausing it", "err", err)
		sc.Paused, sc.NextRunAt = true, time.Time{}
		_, err := s.Store.UpdateSchedule(ctx, sc)
		return false, err
	}
	at := sc.NextRunAt
	if latest := spec.Latest(at.Add(-time.Nanosecond), now); latest.After(at) {
		log.InfoContext(ctx, "schedule missed firings while no node ran; catching up the latest only",
			"missed_from", at, "firing_for", latest)
		at = latest
	}
	next := spec.Next(maxTime(at, now))
	args := s.firingArgs(ctx, sc, spec, at)
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
func (s *Service) firingArgs(ctx context.Context, sc store.Schedule, spec schedule.Spec, at time.Time) export.Args {
	in := InputOf(sc)
	at = at.In(spec.Location())
	args, err := s.args(checked{in: in, spec: spec}, at)
	if err != nil {
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
	return args
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
