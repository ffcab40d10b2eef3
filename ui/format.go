package ui

import (
	"fmt"
	"math"
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

// Clock writes t in UTC, to the second, saying so: "2026-12-02 14:03:05 UTC". Pages
// show it inside <time> (Stamp), which the script rewrites in the viewer's zone.
func Clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// Minute writes t in UTC, to the minute, saying so: "2026-12-02 14:03 UTC".
func Minute(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04") + " UTC"
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
