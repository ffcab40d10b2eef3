package schedules

import (
	"context"
	"sync"
	"time"

	"sheetq/jobs/schedule"
)

// The clock that decides what is due (issue 36, ARCHITECTURE.md "Schedules"). The store's
// clock is the database's on PostgreSQL, and a database's clock can step: moved a day
// ahead, the store says every hourly schedule is due, and moved back, it leaves their
// next runs parked a day ahead. The firing loop therefore reads the store's clock
// through a guard that follows it only while it moves as this node's monotonic clock
// does. A step (more than ClockTolerance away from where the last reading plus the
// elapsed monotonic time puts it) is followed only once it has held for ClockSettle;
// until then what is due is decided by the last trusted reading plus the elapsed time.
// When the guard follows a step, or a step goes away, the schedules whose next run is
// parked further ahead than their expression's next time are moved back (repark).

// ClockTolerance is how far the store's clock may drift from the elapsed monotonic time
// between two readings before the move counts as a step: wide enough for the measured
// offset of a database's clock to wander, narrow enough that no hourly schedule fires
// early by more than it.
const ClockTolerance = 30 * time.Second

// ClockSettle is how long a step must hold before the firing loop follows it: a clock
// set wrong and put right within it fires nothing early and parks nothing.
const ClockSettle = 5 * time.Minute

// clockGuard is the firing loop's view of the store's clock.
type clockGuard struct {
	mu sync.Mutex
	// have is false until the first reading.
	have bool
	// base is the last trusted reading of the store's clock, and baseLocal this node's
	// clock then; the trusted time now is base plus the monotonic time since baseLocal.
	base, baseLocal time.Time
	// stepping is set while the store's clock is off the trusted time; stepDrift is how
	// far it was when first seen, and stepSince this node's clock then.
	stepping  bool
	stepDrift time.Duration
	stepSince time.Time
	// repark is set when the guard begins to follow the store's clock again, until the
	// firing loop has moved parked next runs back (takeRepark).
	repark bool
}

// clockReading is what the guard makes of one reading of the store's clock.
type clockReading struct {
	// Now is the time that decides what is due.
	Now time.Time
	// Settled is set when a step held and the guard follows the store's clock again.
	Settled bool
	// Step is set at the first reading of a new step, of Drift.
	Step  bool
	Drift time.Duration
}

// read reads the store's clock storeNow through the guard, at local on this node's clock
// (whose differences are monotonic in production).
func (g *clockGuard) read(storeNow, local time.Time) clockReading {
	g.mu.Lock()
	defer g.mu.Unlock()
	storeNow = storeNow.Round(0) // its wall reading: the store's clock may carry ours
	if !g.have {
		g.have, g.base, g.baseLocal = true, storeNow, local
		return clockReading{Now: storeNow}
	}
	expected := g.base.Add(local.Sub(g.baseLocal))
	drift := storeNow.Sub(expected)
	switch {
	case drift.Abs() <= ClockTolerance:
		// In step (a slew, or the measured offset wandering): follow it.
		was := g.stepping
		g.stepping, g.base, g.baseLocal = false, storeNow, local
		g.repark = g.repark || was
		return clockReading{Now: storeNow, Drift: drift}
	case !g.stepping || (drift-g.stepDrift).Abs() > ClockTolerance:
		// A new step, or the clock stepped again: it has to hold from now on.
		g.stepping, g.stepDrift, g.stepSince = true, drift, local
		return clockReading{Now: expected, Step: true, Drift: drift}
	case local.Sub(g.stepSince) >= ClockSettle:
		// The step held: it is the clock now.
		g.stepping, g.base, g.baseLocal, g.repark = false, storeNow, local, true
		return clockReading{Now: storeNow, Settled: true, Drift: drift}
	}
	return clockReading{Now: expected, Drift: drift}
}

// takeRepark says whether parked next runs are to be moved back, once per time the
// guard began to follow the store's clock again.
func (g *clockGuard) takeRepark() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.repark
	g.repark = false
	return r
}

// now is the time that decides what is due and when a schedule runs next: the store's
// clock, read through the guard.
func (s *Service) now() time.Time { return s.readClock().Now }

// readClock reads the store's clock through the guard, and logs a step when it is
// first seen and when it held.
func (s *Service) readClock() clockReading {
	local := time.Now
	if s.Now != nil {
		local = s.Now
	}
	r := s.clock.read(s.Store.Now(), local())
	switch {
	case r.Step:
		s.Log.Warn("the store's clock stepped; schedules fire by the last trusted time until the step holds",
			"step", r.Drift.Round(time.Second).String(), "trusted_now", r.Now, "settle", ClockSettle.String())
	case r.Settled:
		s.Log.Warn("the store's clock step held; schedules fire by it from now on",
			"step", r.Drift.Round(time.Second).String(), "now", r.Now)
	}
	return r
}

// repark moves back the next run of every schedule whose next run lies beyond its
// expression's next time after now: parked there by a clock that has since stepped
// back. Each move compares and sets (store MoveSchedule), so an edit or a firing in
// between wins. It returns how many it moved.
func (s *Service) repark(ctx context.Context, now time.Time) (int, error) {
	all, err := s.Store.ListSchedules(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sc := range all {
		if sc.Paused || sc.NextRunAt.IsZero() {
			continue
		}
		spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
		if err != nil {
			continue // the firing loop pauses it when it is due
		}
		// Past the next time after now plus the tolerance: two nodes whose readings of
		// one clock differ by a little do not move each other's fresh next runs.
		if !sc.NextRunAt.After(spec.Next(now.Add(ClockTolerance))) {
			continue
		}
		want := spec.Next(now)
		moved, err := s.Store.MoveSchedule(ctx, sc.ID, sc.NextRunAt, want)
		if err != nil {
			return n, err
		}
		if moved {
			n++
			s.Log.WarnContext(ctx, "schedule's next run was parked ahead by a clock that stepped back; moved back",
				"schedule_id", sc.ID, "from", sc.NextRunAt, "to", want)
		}
	}
	return n, nil
}
