package ui

import (
	"testing"
	"time"
)

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12000: "12,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0 ms"},
		{250 * time.Millisecond, "250 ms"},
		{40 * time.Second, "40 s"},
		{3 * time.Minute, "3 min"},
		{3*time.Minute + 5*time.Second, "3 min 5 s"},
		{2*time.Hour + 10*time.Minute, "2 h 10 min"},
		{72 * time.Hour, "3 days"},
	} {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestProgressText(t *testing.T) {
	for _, tc := range []struct {
		rows, total int64
		left        time.Duration
		want        string
	}{
		{0, -1, -1, "no rows yet"},
		{12000, -1, -1, "12,000 rows"},
		{12000, 50000, 40 * time.Second, "12,000 of 50,000 rows · 24% · about 40 s left"},
		{12000, 50000, -1, "12,000 of 50,000 rows · 24%"},
		{50000, 50000, 0, "50,000 of 50,000 rows · 100%"},
	} {
		if got := ProgressText(tc.rows, tc.total, tc.left); got != tc.want {
			t.Errorf("ProgressText(%d, %d, %s) = %q, want %q", tc.rows, tc.total, tc.left, got, tc.want)
		}
	}
}

func TestEstimate(t *testing.T) {
	if got := Estimate(100, 400, 10*time.Second); got != 30*time.Second {
		t.Errorf("Estimate = %s, want 30s", got)
	}
	for _, tc := range [][3]int64{{0, 400, 10}, {100, -1, 10}, {400, 400, 10}, {100, 400, 0}} {
		if got := Estimate(tc[0], tc[1], time.Duration(tc[2])*time.Second); got != -1 {
			t.Errorf("Estimate%v = %s, want -1 (no estimate)", tc, got)
		}
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{512: "512 bytes", 2400: "2.4 kB", 2_400_000: "2.4 MB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestThroughputChartStacksEachBucket(t *testing.T) {
	start := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	buckets := []Bucket{
		{Start: start, Succeeded: 3, Failed: 1},
		{Start: start.Add(5 * time.Minute)},
		{Start: start.Add(10 * time.Minute), Succeeded: 7, Canceled: 2},
	}
	c := ThroughputChart(buckets, 5*time.Minute, TimesIn(time.UTC, start))
	sums := map[string]int{}
	for _, b := range c.Bars {
		if b.H < 1 || b.Y < padT || b.Y+b.H > chartH-padB {
			t.Errorf("bar %+v outside the plot", b)
		}
		var n int
		for _, r := range b.Value {
			n = n*10 + int(r-'0')
		}
		sums[b.Class] += n
	}
	if sums["bar-ok"] != 10 || sums["bar-bad"] != 1 || sums["bar-muted"] != 2 {
		t.Errorf("bar sums %v", sums)
	}
	// The tallest stack (9) fits under the top of the scale (10).
	if top := niceTop(9); top != 10 {
		t.Errorf("niceTop(9) = %d", top)
	}
	if got := ThroughputChart(nil, time.Hour, Times{}); len(got.Bars) != 0 {
		t.Errorf("no buckets drew %d bars", len(got.Bars))
	}
}

func TestPercentileChart(t *testing.T) {
	p50, p95 := 2.0, 8.0
	c := PercentileChart("chart-run", "Run", 5, &p50, &p95)
	if len(c.Bars) != 2 || c.Bars[1].W <= c.Bars[0].W {
		t.Errorf("bars %+v: want p95 longer than p50", c.Bars)
	}
	if empty := PercentileChart("chart-run", "Run", 0, nil, nil); len(empty.Bars) != 0 || empty.Desc == "" {
		t.Errorf("empty chart %+v", empty)
	}
}

func TestTimesInTheViewersZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	winter := time.Date(2026, 12, 7, 0, 19, 53, 0, time.UTC)
	summer := time.Date(2026, 7, 1, 12, 3, 0, 0, time.UTC)
	tz := TimesIn(berlin, winter)
	for _, tc := range []struct{ got, want string }{
		{tz.Zone, "CET"},
		{tz.Clock(winter), "2026-12-07 01:19:53"},
		{tz.Minute(winter), "2026-12-07 01:19"},
		{tz.Day(winter), "Mon 2026-12-07 01:19"},
		{tz.ClockNamed(winter), "2026-12-07 01:19:53 CET"},
		{tz.MinuteNamed(winter), "2026-12-07 01:19 CET"},
		// The other side of a summer-time change names its own zone.
		{tz.Minute(summer), "2026-07-01 14:03 CEST"},
		{tz.Clock(time.Time{}), ""},
		{Times{}.ClockNamed(winter), "2026-12-07 00:19:53 UTC"},
		// A zone without a short name says its offset.
		{ZoneName(winter.In(time.FixedZone("", 5*3600+1800))), "+05:30"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestTimesInText(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tz := TimesIn(ny, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	for in, want := range map[string]string{
		"heartbeat lost (worker w1, last heartbeat 2026-12-07T00:27:02Z)":   "heartbeat lost (worker w1, last heartbeat 2026-12-06 19:27:02)",
		"from 2026-12-07T01:27:02+01:00 to 2026-12-07T00:28:02.5Z, then ok": "from 2026-12-06 19:27:02 to 2026-12-06 19:28:02, then ok",
		"last heartbeat never":            "last heartbeat never",
		"a date 2026-12-07 stays":         "a date 2026-12-07 stays",
		"not a time 2026-13-45T99:99:99Z": "not a time 2026-13-45T99:99:99Z",
	} {
		if got := tz.InText(in); got != want {
			t.Errorf("InText(%q) = %q, want %q", in, got, want)
		}
	}
}
