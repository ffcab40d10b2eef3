package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr, zone string) Spec {
	t.Helper()
	s, err := Parse(expr, zone)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustZone(t *testing.T, zone string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// at is a wall-clock time in zone, written "2026-03-29 03:00"; an offset may follow to
// pick one of two equal wall times ("2026-10-25 02:30 +0200").
func at(t *testing.T, zone, s string) time.Time {
	t.Helper()
	loc := mustZone(t, zone)
	if len(s) > len("2006-01-02 15:04") {
		v, err := time.Parse("2006-01-02 15:04 -0700", s)
		if err != nil {
			t.Fatal(err)
		}
		return v.In(loc)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ expr, zone, err string }{
		{"", "UTC", "empty expression"},
		{"0 6 1 * * *", "UTC", "cron"}, // six fields
		{"61 * * * *", "UTC", "cron"},
		{"TZ=Europe/Berlin 0 6 * * *", "UTC", "TZ= prefix"},
		{"@every 1h", "UTC", "@every"},
		{"0 6 30 2 *", "UTC", "matches no date"},
		{"0 6 1 * *", "", "time zone: empty"},
		{"0 6 1 * *", "Local", "depends on the server"},
		{"0 6 1 * *", "Mars/Olympus", "unknown time zone \"Mars/Olympus\": use an IANA name"},
		{"0 6 1 * *", "right/UTC", "unknown time zone"},
	} {
		if _, err := Parse(tt.expr, tt.zone); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Parse(%q, %q) = %v, want an error with %q", tt.expr, tt.zone, err, tt.err)
		}
	}
	for _, expr := range []string{"0 6 1 * *", "@monthly", "@daily", "*/15 9-17 * * MON-FRI", "0 0 29 2 *", "30 2 * jan,jul sun"} {
		if _, err := Parse(expr, "Europe/Berlin"); err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
		}
	}
}

// The same expression fires at its wall-clock time in each zone.
func TestNextInZones(t *testing.T) {
	after := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ expr, zone, want string }{
		{"0 6 1 * *", "UTC", "2027-01-01 06:00"},
		{"0 6 1 * *", "Europe/Berlin", "2027-01-01 06:00"},
		{"0 6 1 * *", "Asia/Tokyo", "2027-01-01 06:00"},
		{"0 6 1 * *", "America/New_York", "2027-01-01 06:00"},
		{"0 6 1 * *", "Asia/Kolkata", "2027-01-01 06:00"}, // +05:30
		{"@daily", "Asia/Tokyo", "2026-12-03 00:00"},
		{"*/15 9-17 * * MON-FRI", "Europe/Berlin", "2026-12-02 13:15"},
		{"0 9 * * SAT", "America/New_York", "2026-12-05 09:00"},
		// Both day fields given: either matches (the 13th, or any Friday).
		{"0 0 13 * FRI", "UTC", "2026-12-04 00:00"},
		{"0 0 29 2 *", "UTC", "2028-02-29 00:00"},
	} {
		s := mustParse(t, tt.expr, tt.zone)
		got := s.Next(after)
		if want := at(t, tt.zone, tt.want); !got.Equal(want) {
			t.Errorf("%s in %s after %s: %s, want %s", tt.expr, tt.zone, after, got, want)
		}
		if got.Location() != s.Location() {
			t.Errorf("%s: Next in %s, want the schedule's zone", tt.expr, got.Location())
		}
	}
}

// Daylight-saving changes in Berlin and New York: a wall time the clocks skip fires once
// at the end of the gap, one they show twice fires once, at its first occurrence, and
// nothing else moves.
func TestNextAcrossDST(t *testing.T) {
	for _, tt := range []struct {
		name, expr, zone, from string
		want                   []string
	}{
		{"Berlin spring, daily in the gap", "30 2 * * *", "Europe/Berlin", "2026-03-27 12:00",
			[]string{"2026-03-28 02:30 +0100", "2026-03-29 03:00 +0200", "2026-03-30 02:30 +0200"}},
		{"Berlin spring, every 15 min", "*/15 * * * *", "Europe/Berlin", "2026-03-29 01:30",
			[]string{"2026-03-29 01:45 +0100", "2026-03-29 03:00 +0200", "2026-03-29 03:15 +0200"}},
		{"Berlin spring, daily before and after the gap", "0 1,3 * * *", "Europe/Berlin", "2026-03-28 12:00",
			[]string{"2026-03-29 01:00 +0100", "2026-03-29 03:00 +0200", "2026-03-30 01:00 +0200"}},
		{"Berlin autumn, daily in the repeated hour", "30 2 * * *", "Europe/Berlin", "2026-10-24 12:00",
			[]string{"2026-10-25 02:30 +0200", "2026-10-26 02:30 +0100"}},
		{"Berlin autumn, every 30 min", "*/30 * * * *", "Europe/Berlin", "2026-10-25 01:45",
			[]string{"2026-10-25 02:00 +0200", "2026-10-25 02:30 +0200", "2026-10-25 03:00 +0100"}},
		{"New York spring", "30 2 * * *", "America/New_York", "2026-03-07 12:00",
			[]string{"2026-03-08 03:00 -0400", "2026-03-09 02:30 -0400"}},
		{"New York autumn", "30 1 * * *", "America/New_York", "2026-10-31 12:00",
			[]string{"2026-11-01 01:30 -0400", "2026-11-02 01:30 -0500"}},
		{"Sydney autumn (southern)", "30 2 * * *", "Australia/Sydney", "2026-04-04 12:00",
			[]string{"2026-04-05 02:30 +1100", "2026-04-06 02:30 +1000"}},
		{"Lord Howe: a half-hour change", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00",
			[]string{"2026-10-04 02:30 +1100", "2026-10-05 02:15 +1100"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.expr, tt.zone)
			got := s.Firings(at(t, tt.zone, tt.from), len(tt.want))
			for i, w := range tt.want {
				if want := at(t, tt.zone, w); i >= len(got) || !got[i].Equal(want) {
					t.Fatalf("firings %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// A node that starts in the second pass of a repeated hour does not fire again what the
// first pass fired.
func TestNextFromTheSecondPass(t *testing.T) {
	s := mustParse(t, "15 2 * * *", "Europe/Berlin")
	second := at(t, "Europe/Berlin", "2026-10-25 02:20 +0100") // after 02:15 CEST and 02:15 CET
	if got, want := s.Next(second), at(t, "Europe/Berlin", "2026-10-26 02:15"); !got.Equal(want) {
		t.Fatalf("Next from the second pass = %s, want %s", got, want)
	}
	early := at(t, "Europe/Berlin", "2026-10-25 02:10 +0100") // after 02:15 CEST, before 02:15 CET
	if got, want := s.Next(early), at(t, "Europe/Berlin", "2026-10-26 02:15"); !got.Equal(want) {
		t.Fatalf("Next between the two passes = %s, want %s (02:15 fired in the first)", got, want)
	}
}

// Latest finds the firing to catch up after a downtime: the last one missed, none when
// none was missed, the first pass of a repeated hour seen from the second, and a
// minutely schedule down for months at once.
func TestLatest(t *testing.T) {
	berlin := "Europe/Berlin"
	monthly := mustParse(t, "0 6 1 * *", berlin)
	down, up := at(t, berlin, "2026-09-15 10:00"), at(t, berlin, "2026-12-02 12:00")
	if got, want := monthly.Latest(down, up), at(t, berlin, "2026-12-01 06:00"); !got.Equal(want) {
		t.Errorf("latest missed = %s, want %s", got, want)
	}
	if got := monthly.Latest(at(t, berlin, "2026-12-01 06:00"), up); !got.IsZero() {
		t.Errorf("nothing missed, but Latest = %s", got)
	}
	if got, want := monthly.Latest(down, at(t, berlin, "2026-12-01 06:00")), at(t, berlin, "2026-12-01 06:00"); !got.Equal(want) {
		t.Errorf("upTo is a firing: Latest = %s, want it", got)
	}
	rep := mustParse(t, "45 2 * * *", berlin)
	second := at(t, berlin, "2026-10-25 02:10 +0100")
	if got, want := rep.Latest(at(t, berlin, "2026-10-24 12:00"), second), at(t, berlin, "2026-10-25 02:45 +0200"); !got.Equal(want) {
		t.Errorf("from the second pass: Latest = %s, want the first pass's %s", got, want)
	}
	minutely := mustParse(t, "* * * * *", berlin)
	if got, want := minutely.Latest(at(t, berlin, "2026-01-01 00:00"), up), at(t, berlin, "2026-12-02 12:00"); !got.Equal(want) {
		t.Errorf("minutely: Latest = %s, want %s", got, want)
	}
}

// Over a whole year in zones with and without daylight saving: firings strictly
// increase, no wall-clock minute fires twice, every matching wall-clock minute has its
// firing (none skipped), and a firing whose wall clock does not match is the first
// instant after a gap.
func TestFiringsOverAYear(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(1, 0, 0)
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata"} {
		for _, expr := range []string{"30 2 * * *", "*/30 * * * *", "0 0,1,2,3 * * SUN", "15 1-3 1,15 * *"} {
			s := mustParse(t, expr, zone)
			loc := s.Location()
			fired := map[time.Time]bool{} // by instant
			walls := map[string]bool{}
			var prev time.Time
			for tm := s.Next(from); tm.Before(to); tm = s.Next(tm) {
				if !tm.After(prev) {
					t.Fatalf("%s %s: %s after %s", zone, expr, tm, prev)
				}
				prev = tm
				fired[tm] = true
				w := tm.In(loc).Format("2006-01-02 15:04")
				if walls[w] {
					t.Fatalf("%s %s: wall time %s fired twice", zone, expr, w)
				}
				walls[w] = true
				c := time.Date(tm.Year(), tm.Month(), tm.Day(), tm.Hour(), tm.Minute(), 0, 0, time.UTC)
				if !s.matches(c) {
					if start, _ := tm.ZoneBounds(); !start.Equal(tm) {
						t.Fatalf("%s %s: fired at %s, which neither matches nor ends a gap", zone, expr, tm)
					}
				}
			}
			// Every matching civil minute of the year fires (at its instant).
			for c := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC); c.Before(time.Date(2026, 12, 30, 0, 0, 0, 0, time.UTC)); c = c.Add(time.Minute) {
				if s.matches(c) && !fired[instant(c, loc)] {
					t.Fatalf("%s %s: wall time %s (instant %s) did not fire", zone, expr, c.Format("2006-01-02 15:04"), instant(c, loc))
				}
			}
		}
	}
}

// matches is whether the civil minute c matches s's fields.
func (s Spec) matches(c time.Time) bool {
	return s.month&(1<<uint(c.Month())) != 0 && s.dayMatches(c) &&
		s.hour&(1<<uint(c.Hour())) != 0 && s.minute&(1<<uint(c.Minute())) != 0
}
