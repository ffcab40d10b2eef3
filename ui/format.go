package ui

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Count writes n with thousands separators: 12,000.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Duration says d in the largest units that matter: "40 s", "3 min 5 s", "2 h 10 min".
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.Itoa(int(math.Round(d.Seconds()))) + " s"
	case d < time.Hour:
		m, s := int(d/time.Minute), int((d%time.Minute)/time.Second)
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int((d%time.Hour)/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	default:
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
}

// Size says a byte count the way a file manager does: 2.4 MB.
func Size(n int64) string {
	const unit = 1000
	if n < unit {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	f, units := float64(n)/unit, []string{"kB", "MB", "GB", "TB"}
	i := 0
	for f >= unit && i < len(units)-1 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}

// ProgressText says how far a job is: "12,000 of 50,000 rows · 24% · about 40 s left".
// total < 0 means unknown; left < 0 means no estimate.
func ProgressText(rows, total int64, left time.Duration) string {
	if total < 0 {
		if rows == 0 {
			return "no rows yet"
		}
		return Count(rows) + " rows"
	}
	s := Count(rows) + " of " + Count(total) + " rows · " + strconv.Itoa(Percent(rows, total)) + "%"
	if left >= 0 && rows < total {
		s += " · about " + Duration(left.Round(time.Second)) + " left"
	}
	return s
}

// Percent is rows out of total, 0 to 100, rounded down (100 only when done).
func Percent(rows, total int64) int {
	if total <= 0 {
		return 0
	}
	return int(min(100, max(0, rows*100/total)))
}

// Estimate guesses the time left from the rate so far; -1 when there is nothing to go on.
func Estimate(rows, total int64, ran time.Duration) time.Duration {
	if total < 0 || rows <= 0 || ran <= 0 || rows >= total {
		return -1
	}
	return time.Duration(float64(ran) / float64(rows) * float64(total-rows))
}

// Times writes the moments of one place on a page (a table, a timeline, a list, a
// sentence) in the viewer's time zone (issue 37): the place names the zone once, by its
// short name (Zone: "CET"), and its moments leave it out, except one on the other side of
// a summer-time change, which names its own ("2026-07-01 14:03 CEST" in a CET table).
// Every time a page shows goes through a Times; <time datetime> keeps RFC 3339 in UTC.
type Times struct {
	loc *time.Location
	// Zone is the short name of the viewer's zone at the place's reference moment.
	Zone string
}

// TimesIn is the Times of a place in loc (nil: UTC) whose zone is named as at ref
// (a page uses the moment it renders, so that a table and its rows agree).
func TimesIn(loc *time.Location, ref time.Time) Times {
	if loc == nil {
		loc = time.UTC
	}
	return Times{loc: loc, Zone: ZoneName(ref.In(loc))}
}

// Loc is the viewer's zone.
func (z Times) Loc() *time.Location {
	if z.loc == nil {
		return time.UTC
	}
	return z.loc
}

// Clock writes t to the second: "2026-12-02 15:03:05", naming its zone only where it is
// not the place's.
func (z Times) Clock(t time.Time) string { return z.format(t, "2006-01-02 15:04:05", false) }

// Minute writes t to the minute: "2026-12-02 15:03", as Clock.
func (z Times) Minute(t time.Time) string { return z.format(t, "2006-01-02 15:04", false) }

// Day writes t as a weekday and minute: "Mon 2026-12-07 06:00", as Clock.
func (z Times) Day(t time.Time) string { return z.format(t, "Mon 2006-01-02 15:04", false) }

// ClockNamed writes t to the second with its zone: "2026-12-02 15:03:05 CET", for a
// moment that is a place of its own (a sentence, a field).
func (z Times) ClockNamed(t time.Time) string { return z.format(t, "2006-01-02 15:04:05", true) }

// MinuteNamed writes t to the minute with its zone: "2026-12-02 15:03 CET".
func (z Times) MinuteNamed(t time.Time) string { return z.format(t, "2006-01-02 15:04", true) }

func (z Times) format(t time.Time, layout string, named bool) string {
	if t.IsZero() {
		return ""
	}
	t = t.In(z.Loc())
	s := t.Format(layout)
	if name := ZoneName(t); named || name != z.Zone {
		s += " " + name
	}
	return s
}

// ZoneName is t's zone as people know it: its short name where it has one ("CET",
// "EDT", "UTC"), else its offset ("+05:30"), never a made-up "+0530".
func ZoneName(t time.Time) string {
	name, _ := t.Zone()
	if name == "" || strings.HasPrefix(name, "+") || strings.HasPrefix(name, "-") {
		return t.Format("-07:00")
	}
	return name
}

// rfc3339InText finds RFC 3339 moments inside a sentence: a reason text written by
// the engine ("last heartbeat 2026-12-07T00:27:02Z").
var rfc3339InText = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)

// InText rewrites the RFC 3339 moments inside text as the place writes its times
// (Clock); the rest of the text stays as it is.
func (z Times) InText(text string) string {
	return rfc3339InText.ReplaceAllStringFunc(text, func(m string) string {
		t, err := time.Parse(time.RFC3339Nano, m)
		if err != nil {
			return m
		}
		return z.Clock(t)
	})
}

// ISO writes t as RFC 3339 for <time datetime> and scripts.
func ISO(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func ints(n int) string     { return strconv.Itoa(n) }
func int64s(n int64) string { return strconv.FormatInt(n, 10) }
