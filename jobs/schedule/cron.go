// Package schedule is the time arithmetic of scheduled exports (issue 20): when a
// five-field cron expression fires in an IANA time zone, across daylight-saving changes,
// and what relative dates such as month_start(-1) mean at a firing. It has no state and
// touches no store: the firing loop, the schedules table and the deliveries build on it.
//
// A schedule fires once at each local wall-clock minute its expression matches, and each
// firing is one instant, so that (schedule, instant) can be a firing's idempotency key:
//   - a matching wall time that the clocks skip (spring forward: 02:30 on the day 02:00
//     becomes 03:00) fires at the first instant after the gap (03:00), once, however many
//     matching minutes the gap held; it is not skipped;
//   - a matching wall time that the clocks show twice (fall back: 01:30 on the day 02:00
//     becomes 01:00) fires once, at its first occurrence; it does not fire twice.
package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	// The zone database goes into the binary: Windows has none in Go's format, and a
	// minimal container image may have none at all, yet schedules name zones.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// starBit is set in a field's bit set when the field was written "*" (or "?"), as
// robfig/cron's parser documents it for SpecSchedule: with either day field a star, a day
// must match both day fields; with neither, either one (classic cron).
const starBit = 1 << 63

// Spec is a parsed schedule: its expression and its zone.
type Spec struct {
	expr string
	loc  *time.Location
	// Bit sets of the matching values, as robfig/cron's parser fills them.
	minute, hour, dom, month, dow uint64
}

// Parse reads a five-field cron expression ("minute hour day-of-month month day-of-week",
// with lists, ranges, steps, month and day names, or a descriptor such as @daily or
// @monthly) in zone, an IANA time zone name ("Europe/Berlin"; "UTC"). The zone is given
// apart, so a TZ= prefix is refused, and so is @every, which is not a time of day.
func Parse(expr, zone string) (Spec, error) {
	expr = strings.TrimSpace(expr)
	switch {
	case expr == "":
		return Spec{}, errors.New("cron: empty expression; want five fields: minute hour day-of-month month day-of-week")
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return Spec{}, errors.New("cron: give the time zone apart, not as a TZ= prefix")
	case strings.HasPrefix(expr, "@every"):
		return Spec{}, errors.New("cron: @every is an interval, not a time of day; write five fields, e.g. \"0 * * * *\"")
	}
	loc, err := LoadZone(zone)
	if err != nil {
		return Spec{}, err
	}
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return Spec{}, fmt.Errorf("cron %q: %w", expr, err)
	}
	ss, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return Spec{}, fmt.Errorf("cron %q: not a time of day", expr)
	}
	s := Spec{expr: expr, loc: loc, minute: ss.Minute, hour: ss.Hour, dom: ss.Dom, month: ss.Month, dow: ss.Dow}
	// An expression that can never match (30 February) would make Next search forever.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Spec{}, fmt.Errorf("cron %q: matches no date", expr)
	}
	return s, nil
}

//go:generate go run ./internal/zonesgen -o zones_gen.go

// LoadZone loads an IANA time zone by name, refusing "" and Local (the server's zone,
// which moves with the machine a schedule runs on), and every name that is not in the
// zone database embedded in the binary (zones_gen.go lists them).
//
// time.LoadLocation reads the host's zone files before the embedded database, so a name
// only some hosts have ("right/UTC", "posix/Europe/Berlin") would be accepted on one node
// and fail to load on another, which pauses the schedule there (app/schedules/fire.go).
// Checking the name against the embedded list makes every node give the same answer.
func LoadZone(zone string) (*time.Location, error) {
	switch zone {
	case "":
		return nil, errors.New("time zone: empty; give an IANA name such as Europe/Berlin, or UTC")
	case "Local":
		return nil, errors.New("time zone: Local depends on the server; give an IANA name such as Europe/Berlin, or UTC")
	}
	if _, known := slices.BinarySearch(embeddedZones, zone); !known {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin, or UTC", zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", zone, err)
	}
	return loc, nil
}

// String is the expression as given.
func (s Spec) String() string { return s.expr }

// Location is the schedule's time zone.
func (s Spec) Location() *time.Location { return s.loc }

// searchYears bounds Next's search: every valid expression matches within 8 years (29
// February on a given weekday can take 28, but such an expression matches the day
// fields by OR, so the day of month alone matches every leap year).
const searchYears = 8

// Next is the first firing strictly after the instant after, or the zero time when there
// is none within searchYears (an expression Parse refuses).
func (s Spec) Next(after time.Time) time.Time {
	after = after.In(s.loc)
	// The search walks civil (wall-clock) minutes, in a calendar without zones (UTC),
	// from the wall-clock minute of after: a wall time that maps to after or earlier (the
	// second pass of a repeated hour, say) is passed over by the check below.
	c := time.Date(after.Year(), after.Month(), after.Day(), after.Hour(), after.Minute(), 0, 0, time.UTC)
	end := c.AddDate(searchYears, 0, 0)
	for c.Before(end) {
		switch {
		case s.month&(1<<uint(c.Month())) == 0:
			c = time.Date(c.Year(), c.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !s.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day()+1, 0, 0, 0, 0, time.UTC)
		case s.hour&(1<<uint(c.Hour())) == 0:
			c = c.Truncate(time.Hour).Add(time.Hour)
		case s.minute&(1<<uint(c.Minute())) == 0:
			c = c.Add(time.Minute)
		default:
			if t := instant(c, s.loc); t.After(after) {
				return t
			}
			c = c.Add(time.Minute)
		}
	}
	return time.Time{}
}

// Firings are the next n firings after the instant after, in order.
func (s Spec) Firings(after time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t := s.Next(after)
		if t.IsZero() {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

// Latest is the last firing in (after, upTo], or the zero time when none falls there:
// the firing to catch up after a downtime under the default policy (the latest missed
// one only). It walks back from upTo, so a minutely schedule down for months costs no
// more than one down for a minute.
func (s Spec) Latest(after, upTo time.Time) time.Time {
	upTo = upTo.In(s.loc)
	// From a few hours past upTo's wall clock: in the second pass of a repeated hour, a
	// later wall time of the first pass (01:45 when the clocks show 01:10 again) is an
	// earlier instant. The check below passes over what lies after upTo.
	c := time.Date(upTo.Year(), upTo.Month(), upTo.Day(), upTo.Hour(), upTo.Minute(), 0, 0, time.UTC).Add(3 * time.Hour)
	end := c.AddDate(-searchYears, 0, 0)
	for c.After(end) {
		switch {
		case s.month&(1<<uint(c.Month())) == 0:
			// The last minute of the month before.
			c = time.Date(c.Year(), c.Month(), 1, 0, 0, 0, 0, time.UTC).Add(-time.Minute)
		case !s.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, time.UTC).Add(-time.Minute)
		case s.hour&(1<<uint(c.Hour())) == 0:
			c = c.Truncate(time.Hour).Add(-time.Minute)
		case s.minute&(1<<uint(c.Minute())) == 0:
			c = c.Add(-time.Minute)
		default:
			t := instant(c, s.loc)
			if !t.After(after) {
				return time.Time{}
			}
			if !t.After(upTo) {
				return t
			}
			c = c.Add(-time.Minute)
		}
	}
	return time.Time{}
}

// dayMatches is cron's day rule for the civil date of c: with either day field a star,
// both must match; with neither, either.
func (s Spec) dayMatches(c time.Time) bool {
	domMatch := s.dom&(1<<uint(c.Day())) != 0
	dowMatch := s.dow&(1<<uint(c.Weekday())) != 0
	if s.dom&starBit != 0 || s.dow&starBit != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// instant is the instant at which loc's clocks show the civil time c (a time in UTC
// standing for a wall clock): the earliest such instant when the clocks show it twice,
// and the first instant after the gap when they skip it.
func instant(c time.Time, loc *time.Location) time.Time {
	// Every offset loc uses within two days of c: a wall time maps to an instant by one
	// of them, and transitions are months apart.
	var offsets []int
	for d := -2; d <= 2; d++ {
		_, off := c.Add(time.Duration(d) * 24 * time.Hour).In(loc).Zone()
		if !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	var best time.Time
	for _, off := range offsets {
		t := c.Add(-time.Duration(off) * time.Second).In(loc)
		if sameWall(t, c) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: read c with the offset before the jump. That instant lies after the
	// jump (its clock shows c plus the jump), and its zone period starts at the jump,
	// which is the first instant after the gap.
	minOff := offsets[0]
	for _, off := range offsets[1:] {
		minOff = min(minOff, off)
	}
	t := c.Add(-time.Duration(minOff) * time.Second).In(loc)
	start, _ := t.ZoneBounds()
	if start.IsZero() || !start.After(c.Add(-48*time.Hour)) {
		return t // no transition found near c: cannot happen with real zone data
	}
	return start.In(loc)
}

// sameWall is whether t's wall clock in its location is the civil minute c.
func sameWall(t, c time.Time) bool {
	return t.Year() == c.Year() && t.Month() == c.Month() && t.Day() == c.Day() &&
		t.Hour() == c.Hour() && t.Minute() == c.Minute()
}
