package schedule

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Relative is a date that a schedule's parameter names relative to each firing, resolved
// in the schedule's time zone at the firing's instant:
//
//	today, today(-7)            the firing's date, or 7 days before it
//	week_start, week_start(-1)  Monday of the firing's week, or of the week before
//	month_start(-1)             the 1st of the month before the firing's
//	quarter_start(0)            the 1st of the firing's quarter (January, April, July, October)
//	year_start(1)               1 January of the year after the firing's
//
// "last month's orders" is from = month_start(-1) and to = month_start(0), with to
// exclusive. The offset counts the name's unit and may be left out (0).
type Relative struct {
	Unit   string // today, week_start, month_start, quarter_start or year_start
	Offset int
}

// relativeRe is a relative date: a unit and an optional signed offset in brackets.
var relativeRe = regexp.MustCompile(`^([a-z_]+)\s*(?:\(\s*([+-]?\d{1,4})\s*\))?$`)

// units are the names a relative date may use.
var units = []string{"today", "week_start", "month_start", "quarter_start", "year_start"}

// ParseRelative reads s as a relative date. ok is false when s does not have the form of
// one (a literal date, say), and err says what is wrong when it has the form but is not
// one ("month_begin(-1)": unknown name).
func ParseRelative(s string) (r Relative, ok bool, err error) {
	m := relativeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Relative{}, false, nil
	}
	known := false
	for _, u := range units {
		known = known || u == m[1]
	}
	if !known {
		return Relative{}, true, fmt.Errorf("relative date %q: unknown name %q (want one of %s, with an optional offset such as month_start(-1))",
			s, m[1], strings.Join(units, ", "))
	}
	r.Unit = m[1]
	if m[2] != "" {
		r.Offset, _ = strconv.Atoi(m[2]) // at most 4 digits: fits
	}
	return r, true, nil
}

// String is the expression in its written form: "month_start(-1)", "today".
func (r Relative) String() string {
	if r.Offset == 0 {
		return r.Unit
	}
	return r.Unit + "(" + strconv.Itoa(r.Offset) + ")"
}

// Date is the date r names at the instant at, seen in loc: a civil date (midnight, in
// UTC, standing for the date alone).
func (r Relative) Date(at time.Time, loc *time.Location) time.Time {
	at = at.In(loc)
	y, m, d := at.Date()
	switch r.Unit {
	case "week_start": // ISO weeks start on Monday
		back := (int(at.Weekday()) + 6) % 7
		return time.Date(y, m, d-back+7*r.Offset, 0, 0, 0, 0, time.UTC)
	case "month_start":
		return time.Date(y, m+time.Month(r.Offset), 1, 0, 0, 0, 0, time.UTC)
	case "quarter_start":
		first := time.Month((int(m)-1)/3*3 + 1)
		return time.Date(y, first+time.Month(3*r.Offset), 1, 0, 0, 0, 0, time.UTC)
	case "year_start":
		return time.Date(y+r.Offset, time.January, 1, 0, 0, 0, 0, time.UTC)
	default: // today
		return time.Date(y, m, d+r.Offset, 0, 0, 0, 0, time.UTC)
	}
}

// DateString is Date as a report's date parameter takes it: "2026-11-01".
func (r Relative) DateString(at time.Time, loc *time.Location) string {
	return r.Date(at, loc).Format(time.DateOnly)
}

// Midnight is the instant the date r names begins in loc, for a datetime parameter: the
// first instant of that date (01:00 where the clocks skip midnight itself).
func (r Relative) Midnight(at time.Time, loc *time.Location) time.Time {
	return instant(r.Date(at, loc), loc)
}
