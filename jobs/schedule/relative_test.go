package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseRelative(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string // String() of the result; "" when not a relative date
		err  string
	}{
		{"today", "today", ""},
		{"today(-7)", "today(-7)", ""},
		{" month_start( -1 ) ", "month_start(-1)", ""},
		{"month_start(0)", "month_start", ""},
		{"week_start(+2)", "week_start(2)", ""},
		{"quarter_start", "quarter_start", ""},
		{"year_start(1)", "year_start(1)", ""},
		{"2026-11-01", "", ""},
		{"today()", "", ""},
		{"today(12345)", "", ""},
		{"month_begin(-1)", "", `unknown name "month_begin"`},
		{"yesterday", "", `unknown name "yesterday"`},
	} {
		r, ok, err := ParseRelative(tt.in)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRelative(%q) err = %v, want %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("ParseRelative(%q): %v", tt.in, err)
		case tt.want == "" && ok:
			t.Errorf("ParseRelative(%q) = %v, want not a relative date", tt.in, r)
		case tt.want != "" && (!ok || r.String() != tt.want):
			t.Errorf("ParseRelative(%q) = %v %v, want %s", tt.in, r, ok, tt.want)
		}
	}
}

// Each name at a firing, in the schedule's zone: "last month's orders" on the 1st at
// 06:00 is from month_start(-1) to month_start(0); a firing just after midnight in Berlin
// is still the day before in UTC.
func TestRelativeDates(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	firing := time.Date(2026, 12, 1, 6, 0, 0, 0, berlin) // a Tuesday
	for expr, want := range map[string]string{
		"today":            "2026-12-01",
		"today(-7)":        "2026-11-24",
		"today(31)":        "2027-01-01",
		"week_start":       "2026-11-30",
		"week_start(-1)":   "2026-11-23",
		"month_start(-1)":  "2026-11-01",
		"month_start":      "2026-12-01",
		"month_start(1)":   "2027-01-01",
		"month_start(-12)": "2025-12-01",
		"quarter_start":    "2026-10-01",
		"quarter_start(1)": "2027-01-01",
		"year_start(-1)":   "2025-01-01",
	} {
		r, ok, err := ParseRelative(expr)
		if !ok || err != nil {
			t.Fatalf("ParseRelative(%q): %v %v", expr, ok, err)
		}
		if got := r.DateString(firing, berlin); got != want {
			t.Errorf("%s at %s = %s, want %s", expr, firing, got, want)
		}
	}
	// A Sunday belongs to the week that began on the Monday before.
	sunday := time.Date(2026, 12, 6, 23, 0, 0, 0, berlin)
	if got := (Relative{Unit: "week_start"}).DateString(sunday, berlin); got != "2026-11-30" {
		t.Errorf("week_start on a Sunday = %s", got)
	}
	// 00:30 on 1 January in Berlin is 23:30 on 31 December in UTC: the zone decides.
	newYear := time.Date(2027, 1, 1, 0, 30, 0, 0, berlin)
	if got := (Relative{Unit: "month_start", Offset: -1}).DateString(newYear, berlin); got != "2026-12-01" {
		t.Errorf("month_start(-1) at 00:30 on 1 January in Berlin = %s, want 2026-12-01", got)
	}
	if got := (Relative{Unit: "month_start", Offset: -1}).DateString(newYear, time.UTC); got != "2026-11-01" {
		t.Errorf("the same instant in UTC = %s, want 2026-11-01", got)
	}
}

// Midnight is the first instant of the date in the zone, even where the clocks skip
// midnight (São Paulo, 4 November 2018).
func TestRelativeMidnight(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	got := (Relative{Unit: "month_start", Offset: -1}).Midnight(time.Date(2026, 12, 1, 6, 0, 0, 0, berlin), berlin)
	if want := time.Date(2026, 11, 1, 0, 0, 0, 0, berlin); !got.Equal(want) {
		t.Errorf("midnight = %s, want %s", got, want)
	}
	sp := mustZone(t, "America/Sao_Paulo")
	got = (Relative{Unit: "today"}).Midnight(time.Date(2018, 11, 4, 12, 0, 0, 0, sp), sp)
	if want := time.Date(2018, 11, 4, 3, 0, 0, 0, time.UTC); !got.Equal(want) || got.In(sp).Hour() != 1 {
		t.Errorf("midnight of a day without one = %s (%s), want %s, 01:00 local", got, got.In(sp), want)
	}
}
