package ui

import (
	"testing"
	"time"
)

func TestNiceTopEndsJustAboveThePeak(t *testing.T) {
	for peak, want := range map[int]int{0: 1, 1: 1, 2: 2, 7: 8, 9: 10, 11: 12, 49: 50, 50: 50, 51: 60, 99: 100, 130: 150, 1001: 1200} {
		if got := niceTop(peak); got != want {
			t.Errorf("niceTop(%d) = %d, want %d", peak, got, want)
		}
	}
	for s, want := range map[float64]float64{0: 0, 0.0004: 0.001, 0.013: 0.015, 7.3: 8, 49: 50, 61: 80} {
		if got := niceTopSeconds(s); got < want*0.999999 || got > want*1.000001 {
			t.Errorf("niceTopSeconds(%v) = %v, want %v", s, got, want)
		}
	}
}

// Bars of about 49 fill most of the height: the axis ends at 50, not 100.
func TestThroughputChartScalesToItsData(t *testing.T) {
	start := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	c := ThroughputChart([]Bucket{{Start: start, Succeeded: 49}, {Start: start.Add(5 * time.Minute), Succeeded: 20}}, 5*time.Minute, TimesIn(time.UTC, start))
	if c.Top != "50" {
		t.Errorf("top %q, want 50", c.Top)
	}
	plotH := chartH - padT - padB
	if h := c.Bars[0].H; h < plotH*9/10 {
		t.Errorf("the highest bar is %d of %d px high", h, plotH)
	}
	// Bars are placed in thousandths of the width, side by side, inside it.
	for i, b := range c.Bars {
		if b.X < 0 || b.X+b.W > chartW {
			t.Errorf("bar %d %+v outside the width", i, b)
		}
	}
	if c.Bars[1].X <= c.Bars[0].X+c.Bars[0].W {
		t.Errorf("bars overlap: %+v", c.Bars)
	}
	if got := Pct(125); got != "12.5%" {
		t.Errorf("Pct(125) = %q", got)
	}
}

func TestPercentileChartsShareOneScale(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	wait, run := PercentileCharts(10, f(0.5), f(1), 10, f(2), f(7.3))
	// One scale to 8 s: run's p95 is 7.3/8 of the width, wait's bars a fraction of it.
	if wait.Top != "8 s" || run.Top != "8 s" {
		t.Errorf("tops %q %q, want 8 s", wait.Top, run.Top)
	}
	if w := run.Bars[1].W; w != 913 {
		t.Errorf("run p95 width %d/1000, want 913", w)
	}
	if w := wait.Bars[1].W; w != 125 {
		t.Errorf("wait p95 width %d/1000, want 125", w)
	}
	for _, c := range []Chart{wait, run} {
		if c.Bars[0].W >= c.Bars[1].W {
			t.Errorf("%s: p50 %d not shorter than p95 %d", c.TestID, c.Bars[0].W, c.Bars[1].W)
		}
	}
	// Amber only past the threshold: run's p95 is 3.65 times its median.
	if run.Bars[1].Class != "bar-warn" || wait.Bars[1].Class != "bar-p95" {
		t.Errorf("p95 classes: wait %q, run %q", wait.Bars[1].Class, run.Bars[1].Class)
	}
	_, calm := PercentileCharts(10, f(0.1), f(0.2), 10, f(2), f(5))
	if calm.Bars[1].Class != "bar-p95" {
		t.Errorf("a p95 of 2.5 times the median is amber")
	}
	slowWait, _ := PercentileCharts(10, f(50), f(90), 10, f(2), f(3))
	if slowWait.Bars[1].Class != "bar-warn" {
		t.Errorf("a 90 s wait is not amber")
	}
	tiny, _ := PercentileCharts(10, f(0.001), f(0.01), 0, nil, nil)
	if tiny.Bars[1].Class != "bar-p95" {
		t.Errorf("10 ms is amber: under a second is noise")
	}
	if empty, _ := PercentileCharts(0, nil, nil, 0, nil, nil); len(empty.Bars) != 0 || empty.Desc == "" {
		t.Errorf("empty chart %+v", empty)
	}
}

func TestDepthChartDrawsSampledSlotsOnly(t *testing.T) {
	start := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	c := DepthChart([]DepthSlot{{Start: start}, {Start: start.Add(time.Hour), Waiting: 7, Sampled: true},
		{Start: start.Add(2 * time.Hour), Sampled: true}}, time.Hour, TimesIn(time.UTC, start))
	if len(c.Bars) != 1 || c.Bars[0].Value != "7" || c.Top != "8" {
		t.Errorf("bars %+v top %q", c.Bars, c.Top)
	}
}
