package ui

import (
	"math"
	"strconv"
	"time"
)

// Bar is one rectangle of a chart: X and W in thousandths of the chart's width (W of
// Chart), Y and H in CSS pixels, so that the chart fills its column at any width while
// its text keeps its size.
type Bar struct {
	X, Y, W, H int
	Class      string
	// Title is the bar's tooltip and accessible text.
	Title string
	// Value is the number the bar shows, for tests and scripts.
	Value string
}

// Label is a text in a chart: X in thousandths of the width, Y in pixels, shifted by DX
// pixels.
type Label struct {
	X, Y   int
	DX     int
	Text   string
	Anchor string // start, middle or end
	Class  string
}

// Chart is an inline SVG chart drawn on the server: no chart library, no script. It has
// no viewBox: it is as wide as its column and H pixels high, its x positions are
// fractions of the width and its text is not scaled, so labels stay readable on a phone.
type Chart struct {
	TestID string
	Title  string
	// Desc says in words what the chart shows, for screen readers.
	Desc string
	// W is the unit of the x positions (a thousand: per mille of the width); H is the
	// height in pixels.
	W, H   int
	Bars   []Bar
	Labels []Label
	// Lines are the horizontal guide lines, by y.
	Lines []int
	// Top is the value at the top of the scale, as the axis says it.
	Top string
}

// Pct writes x thousandths of the width as an SVG length: "12.5%".
func Pct(x int) string { return strconv.FormatFloat(float64(x)/10, 'f', 1, 64) + "%" }

// Bucket is one time slot of the throughput chart.
type Bucket struct {
	Start                       time.Time
	Succeeded, Failed, Canceled int
}

const (
	chartW, chartH = 1000, 200
	padT, padB     = 22, 24
)

// slotPart is one segment of a stacked bar.
type slotPart struct {
	n     int
	class string
	word  string
}

// stackedChart draws one stacked bar per time slot, on a scale from 0 to a round number
// just above the highest stack; every slot's start is labelled below when there is room.
func stackedChart(c Chart, starts []time.Time, parts [][]slotPart, width time.Duration, tz Times) Chart {
	c.W, c.H = chartW, chartH
	peak := 0
	for _, ps := range parts {
		n := 0
		for _, p := range ps {
			n += p.n
		}
		peak = max(peak, n)
	}
	top := niceTop(peak)
	c.Top = strconv.Itoa(top)
	plotH := chartH - padT - padB
	c.Lines = []int{padT, padT + plotH/2, padT + plotH}
	c.Labels = append(c.Labels, Label{X: 0, Y: padT - 6, Text: Count(int64(top)), Anchor: "start", Class: "axis"})
	if len(starts) == 0 {
		return c
	}
	n := len(starts)
	slot := float64(chartW) / float64(n)
	layout := "15:04"
	if width >= 24*time.Hour {
		layout = "Jan 2"
	}
	every := (n + 5) / 6 // at most six time labels: they fit at 375 px
	for i, start := range starts {
		x := int(math.Round(float64(i)*slot + slot*0.12))
		w := max(1, int(math.Round(slot*0.76)))
		y := padT + plotH
		for _, p := range parts[i] {
			if p.n == 0 {
				continue
			}
			h := max(1, p.n*plotH/top)
			y -= h
			c.Bars = append(c.Bars, Bar{X: x, Y: y, W: w, H: h, Class: p.class, Value: strconv.Itoa(p.n),
				Title: start.In(tz.Loc()).Format(layout) + ": " + strconv.Itoa(p.n) + " " + p.word})
		}
		if i%every == 0 {
			l := Label{X: x + w/2, Y: chartH - 7, Text: start.In(tz.Loc()).Format(layout), Anchor: "middle"}
			if i == 0 {
				l.X, l.Anchor = x, "start"
			}
			c.Labels = append(c.Labels, l)
		}
	}
	return c
}

// ThroughputChart stacks finished exports per time slot: succeeded, failed, canceled;
// its axis shows the slots' times in tz's zone, which the page names once.
func ThroughputChart(buckets []Bucket, width time.Duration, tz Times) Chart {
	c := Chart{TestID: "chart-throughput", Title: "Finished exports"}
	total := 0
	starts := make([]time.Time, len(buckets))
	parts := make([][]slotPart, len(buckets))
	for i, b := range buckets {
		starts[i] = b.Start
		parts[i] = []slotPart{{b.Succeeded, "bar-ok", "succeeded"}, {b.Failed, "bar-bad", "failed"}, {b.Canceled, "bar-muted", "canceled"}}
		total += b.Succeeded + b.Failed + b.Canceled
	}
	c.Desc = strconv.Itoa(total) + " exports finished in " + strconv.Itoa(len(buckets)) + " slots of " + Duration(width)
	return stackedChart(c, starts, parts, width, tz)
}

// DepthSlot is one time slot of the queue depth chart: the most jobs seen waiting in it,
// and whether it was sampled at all.
type DepthSlot struct {
	Start   time.Time
	Waiting int
	Sampled bool
}

// DepthChart draws the most jobs waiting in each time slot; slots that were not sampled
// (before the server started) have no bar. Its axis is in tz's zone, as ThroughputChart's.
func DepthChart(slots []DepthSlot, width time.Duration, tz Times) Chart {
	c := Chart{TestID: "chart-depth", Title: "Jobs waiting"}
	peak, sampled := 0, 0
	starts := make([]time.Time, len(slots))
	parts := make([][]slotPart, len(slots))
	for i, s := range slots {
		starts[i] = s.Start
		if s.Sampled {
			sampled++
			peak = max(peak, s.Waiting)
			parts[i] = []slotPart{{s.Waiting, "bar-depth", "waiting at most"}}
		}
	}
	c.Desc = "at most " + strconv.Itoa(peak) + " jobs waiting, in " + strconv.Itoa(sampled) + " sampled slots of " + Duration(width)
	return stackedChart(c, starts, parts, width, tz)
}

// P95Tail and P95Wait are when a 95th percentile is drawn amber: the slowest twentieth
// took more than P95Tail times the median (and at least a second: below that, a few
// milliseconds more are noise), or, for the wait before start, longer than P95Wait
// (exports waited a minute for a worker: the queue needs more of them).
const (
	P95Tail = 3.0
	P95Wait = 60.0
)

// PercentileChart compares the median and the 95th percentile of a duration, in
// seconds, on a scale of its own.
func PercentileChart(testID, title string, count int, p50, p95 *float64) Chart {
	top := 0.0
	if p50 != nil && p95 != nil {
		top = max(*p50, *p95)
	}
	return percentileChart(testID, title, count, p50, p95, niceTopSeconds(top), false)
}

// PercentileCharts draws the wait before start and the run time on one scale, from 0 to
// a round duration just above the largest of the four figures, so that their bars can be
// compared with each other and across the two charts.
func PercentileCharts(waitCount int, waitP50, waitP95 *float64, runCount int, runP50, runP95 *float64) (wait, run Chart) {
	top := 0.0
	for _, v := range []*float64{waitP50, waitP95, runP50, runP95} {
		if v != nil {
			top = max(top, *v)
		}
	}
	top = niceTopSeconds(top)
	return percentileChart("chart-wait", "Wait before start", waitCount, waitP50, waitP95, top, true),
		percentileChart("chart-run", "Run time", runCount, runP50, runP95, top, false)
}

func percentileChart(testID, title string, count int, p50, p95 *float64, top float64, isWait bool) Chart {
	c := Chart{TestID: testID, Title: title, W: chartW, H: 96}
	if count == 0 || p50 == nil || p95 == nil || top <= 0 {
		c.Desc = "no exports in this period"
		c.Labels = []Label{{X: 0, Y: 40, Text: "No exports in this period.", Anchor: "start"}}
		return c
	}
	c.Top = seconds(top)
	c.Desc = "median " + seconds(*p50) + ", 95th percentile " + seconds(*p95) + ", over " + strconv.Itoa(count) +
		" exports; the scale runs to " + c.Top
	warn := (*p95 > P95Tail**p50 && *p95 >= 1) || (isWait && *p95 > P95Wait)
	p95Class := "bar-p95"
	if warn {
		p95Class = "bar-warn"
	}
	for i, row := range []struct {
		name string
		v    float64
		cls  string
	}{{"p50", *p50, "bar-accent"}, {"p95", *p95, p95Class}} {
		w := max(2, int(math.Round(row.v/top*chartW)))
		y := 20 + i*40
		c.Bars = append(c.Bars, Bar{X: 0, Y: y, W: w, H: 16, Class: row.cls, Value: strconv.FormatFloat(row.v, 'f', 3, 64),
			Title: row.name + ": " + seconds(row.v)})
		c.Labels = append(c.Labels, Label{X: 0, Y: y - 5, Text: row.name + " · " + seconds(row.v), Anchor: "start"})
	}
	c.Labels = append(c.Labels, Label{X: chartW, Y: 15, Text: "scale " + c.Top, Anchor: "end", Class: "axis"})
	return c
}

func seconds(s float64) string {
	return Duration(time.Duration(s * float64(time.Second)))
}

// niceSteps are the round numbers a scale may end at, times a power of ten: fine enough
// that the highest bar fills most of the height (49 gives 50, 51 gives 60, not 100).
var niceSteps = []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10}

// niceTop rounds a chart's peak up to the next round number (niceSteps).
func niceTop(peak int) int {
	if peak <= 1 {
		return 1
	}
	return int(math.Round(niceTopFloat(float64(peak), 1)))
}

// niceTopSeconds rounds a duration in seconds up to a round one (a millisecond at least).
func niceTopSeconds(s float64) float64 {
	if s <= 0 {
		return 0
	}
	return niceTopFloat(s, 0.001)
}

// niceTopFloat rounds v up to a niceSteps number times a power of ten, not below least.
func niceTopFloat(v, least float64) float64 {
	if v <= least {
		return least
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range niceSteps {
		// The small tolerance keeps an exact round peak (50) from going to the next step.
		if m*p >= v*(1-1e-9) {
			if m*p < least {
				return least
			}
			return m * p
		}
	}
	return 10 * p
}
