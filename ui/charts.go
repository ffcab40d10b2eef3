package ui

import (
	"strconv"
	"time"
)

// Bar is one rectangle of a chart, in SVG user units.
type Bar struct {
	X, Y, W, H int
	Class      string
	// Title is the bar's tooltip and accessible text.
	Title string
	// Value is the number the bar shows, for tests and scripts.
	Value string
}

// Label is a text in a chart.
type Label struct {
	X, Y   int
	Text   string
	Anchor string // start, middle or end
}

// Chart is an inline SVG chart drawn on the server: no chart library, no script.
type Chart struct {
	TestID string
	Title  string
	// Desc says in words what the chart shows, for screen readers.
	Desc   string
	W, H   int
	Bars   []Bar
	Labels []Label
	// Lines are the horizontal guide lines, by y.
	Lines []int
}

// Bucket is one time slot of the throughput chart.
type Bucket struct {
	Start                       time.Time
	Succeeded, Failed, Canceled int
}

const (
	chartW, chartH = 640, 200
	padL, padR     = 36, 8
	padT, padB     = 10, 26
)

// ThroughputChart stacks finished exports per time slot: succeeded, failed, canceled.
func ThroughputChart(buckets []Bucket, width time.Duration) Chart {
	c := Chart{TestID: "chart-throughput", Title: "Finished exports", W: chartW, H: chartH}
	peak, total := 0, 0
	for _, b := range buckets {
		n := b.Succeeded + b.Failed + b.Canceled
		peak, total = max(peak, n), total+n
	}
	c.Desc = strconv.Itoa(total) + " exports finished in " + strconv.Itoa(len(buckets)) + " slots of " + Duration(width)
	top := niceTop(peak)
	plotH := chartH - padT - padB
	c.Lines = []int{padT, padT + plotH/2, padT + plotH}
	c.Labels = append(c.Labels,
		Label{X: padL - 4, Y: padT + 4, Text: strconv.Itoa(top), Anchor: "end"},
		Label{X: padL - 4, Y: padT + plotH + 4, Text: "0", Anchor: "end"})
	if len(buckets) == 0 {
		return c
	}
	slot := (chartW - padL - padR) / len(buckets)
	layout := "15:04"
	if width >= 24*time.Hour {
		layout = "Jan 2"
	}
	for i, b := range buckets {
		x := padL + i*slot + slot/8
		w := max(1, slot-slot/4)
		y := padT + plotH
		for _, part := range []struct {
			n     int
			class string
			word  string
		}{{b.Succeeded, "bar-ok", "succeeded"}, {b.Failed, "bar-bad", "failed"}, {b.Canceled, "bar-muted", "canceled"}} {
			if part.n == 0 {
				continue
			}
			h := max(1, part.n*plotH/top)
			y -= h
			c.Bars = append(c.Bars, Bar{X: x, Y: y, W: w, H: h, Class: part.class, Value: strconv.Itoa(part.n),
				Title: b.Start.Local().Format(layout) + ": " + strconv.Itoa(part.n) + " " + part.word})
		}
		if i%max(1, len(buckets)/6) == 0 {
			c.Labels = append(c.Labels, Label{X: x + w/2, Y: chartH - 8, Text: b.Start.Local().Format(layout), Anchor: "middle"})
		}
	}
	return c
}

// PercentileChart compares the median and the 95th percentile of a duration, in seconds.
func PercentileChart(testID, title string, count int, p50, p95 *float64) Chart {
	c := Chart{TestID: testID, Title: title, W: chartW, H: 90}
	if count == 0 || p50 == nil || p95 == nil {
		c.Desc = "no exports in this period"
		c.Labels = []Label{{X: 8, Y: 48, Text: "No exports in this period.", Anchor: "start"}}
		return c
	}
	c.Desc = "median " + seconds(*p50) + ", 95th percentile " + seconds(*p95) + ", over " + strconv.Itoa(count) + " exports"
	peak := max(*p50, *p95)
	plotW := float64(chartW - 60 - 120)
	for i, row := range []struct {
		name string
		v    float64
		cls  string
	}{{"p50", *p50, "bar-accent"}, {"p95", *p95, "bar-warn"}} {
		w := 1
		if peak > 0 {
			w = max(1, int(row.v/peak*plotW))
		}
		y := 10 + i*38
		c.Bars = append(c.Bars, Bar{X: 60, Y: y, W: w, H: 28, Class: row.cls, Value: strconv.FormatFloat(row.v, 'f', 3, 64),
			Title: row.name + ": " + seconds(row.v)})
		c.Labels = append(c.Labels,
			Label{X: 52, Y: y + 19, Text: row.name, Anchor: "end"},
			Label{X: 60 + w + 6, Y: y + 19, Text: seconds(row.v), Anchor: "start"})
	}
	return c
}

func seconds(s float64) string {
	return Duration(time.Duration(s * float64(time.Second)))
}

// niceTop rounds a chart's peak up to 1, 2 or 5 times a power of ten.
func niceTop(peak int) int {
	if peak <= 1 {
		return 1
	}
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= peak {
				return m * p
			}
		}
	}
}
