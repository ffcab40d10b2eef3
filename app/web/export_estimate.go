package web

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"sheetq/app/access"
	"sheetq/app/exports"
	"sheetq/app/metrics"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// estimateRuns is how many of a report's latest successful runs an estimate reads.
const estimateRuns = 50

// estimateFragment is GET /exports/new/estimate?report=ID&PARAM=...&file-format=...: the
// form's estimate for the values given, as the HTML fragment the form's script swaps in
// when a value changes (assets/static/forms.js). Without the script the form shows the
// estimate of the values it was drawn with.
func (p *Pages) estimateFragment(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id := q.Get("report")
	rep, err := p.runnable(r.Context(), id)
	if err != nil {
		return reportUnusable(id, err)
	}
	loc, _ := viewerZone(r)
	e, err := p.estimate(r.Context(), rep, formParams(rep.Params, byParam(rep, q), loc), q.Get(formatField))
	if err != nil {
		return err
	}
	p.render(w, r, http.StatusOK, ui.EstimateBox(e))
	return nil
}

// estimate reads what the form's estimate needs: rep's latest successful runs, and its
// queue now.
func (p *Pages) estimate(ctx context.Context, rep export.Report, params map[string]any, format string) (ui.RunEstimate, error) {
	// A member's estimate is from their own runs: others' row counts are theirs.
	jobs, err := p.store.List(ctx, exports.ListFor(ctx, store.ListOptions{Kind: export.Name, Report: rep.ID, Status: store.StatusSucceeded, Limit: estimateRuns}))
	if err != nil {
		return ui.RunEstimate{}, err
	}
	jobs = p.exports.Filter(ctx, jobs)
	from, to, paired := datePair(rep)
	want := pastRun{Format: export.FormatXLSX}
	if format == export.FormatCSV {
		want.Format = export.FormatCSV
	}
	// Values the form will refuse ("To" before "From") have no estimate: a figure for
	// them would read as if they could run. Start export marks what is wrong.
	args, err := p.exports.Kind.ValidateAs(rep.ID, params, access.From(ctx).Attr)
	if err != nil {
		return p.withQueue(ctx, rep, ui.RunEstimate{Refused: true})
	}
	want.Params = paramsKey(args.Params)
	if paired {
		want.Span = span(args.Params[from], args.Params[to])
	}
	runs := make([]pastRun, 0, len(jobs))
	for _, j := range jobs {
		var a export.Args
		if json.Unmarshal(j.Args, &a) != nil || j.StartedAt.IsZero() || j.FinishedAt.IsZero() {
			continue
		}
		pr := pastRun{Params: paramsKey(a.Params), Format: a.FileFormat(), Rows: j.ProgressRows, Size: j.FileSize,
			Run: j.FinishedAt.Sub(j.StartedAt)}
		if paired {
			pr.Span = span(a.Params[from], a.Params[to])
		}
		runs = append(runs, pr)
	}
	return p.withQueue(ctx, rep, estimateFrom(runs, want))
}

// withQueue adds to e where an export of rep would stand in its queue now.
func (p *Pages) withQueue(ctx context.Context, rep export.Report, e ui.RunEstimate) (ui.RunEstimate, error) {
	queues, err := metrics.ReadQueues(ctx, p.store, p.engine)
	if err != nil {
		return ui.RunEstimate{}, err
	}
	e.Queue = cmp.Or(rep.Queue, store.DefaultQueue)
	for _, l := range queues {
		if l.Name == e.Queue {
			e.Ahead, e.Busy, e.Workers = l.Pending, l.Busy, l.Workers
		}
	}
	return e, nil
}

// pastRun is what an estimate needs of one successful run of the report.
type pastRun struct {
	// Params is the run's parameters as canonical JSON (paramsKey); "" matches none.
	Params string
	Format string
	Rows   int64
	Size   int64
	Run    time.Duration
	// Span is the length of the run's date range (datePair), 0 without one.
	Span time.Duration
}

// estimateFrom estimates the rows, file size and run time of want from runs (newest
// first): the medians of the runs with the same parameters and format; without one,
// of the runs in the same format, each scaled by want's date span over its own when
// both have one; without any, nothing.
func estimateFrom(runs []pastRun, want pastRun) ui.RunEstimate {
	var same, format, scaled []pastRun
	for _, r := range runs {
		if r.Format != want.Format {
			continue
		}
		format = append(format, r)
		if want.Params != "" && r.Params == want.Params {
			same = append(same, r)
		}
		if want.Span > 0 && r.Span > 0 {
			f := float64(want.Span) / float64(r.Span)
			scaled = append(scaled, pastRun{Rows: int64(math.Round(float64(r.Rows) * f)),
				Size: int64(math.Round(float64(r.Size) * f)), Run: time.Duration(float64(r.Run) * f)})
		}
	}
	var (
		e       ui.RunEstimate
		which   string
		leftOut int
	)
	use := same
	switch {
	case len(same) > 0:
		which = " with these parameters"
	case len(scaled) > 0:
		use = scaled
		which = " of this report, scaled to " + spanText(want.Span)
	case len(format) > 0:
		use = format
		which = " of this report with other parameters"
	default:
		return ui.RunEstimate{}
	}
	// An empty run (a day without orders) says nothing of how big the others are: it is
	// left out unless every run is empty, and the basis says so.
	if full := slices.DeleteFunc(slices.Clone(use), func(r pastRun) bool { return r.Rows == 0 }); len(full) > 0 && len(full) < len(use) {
		leftOut, use = len(use)-len(full), full
	}
	e.Basis = "from " + runs1(len(use)) + which
	if leftOut > 0 {
		e.Basis += " (" + emptyRuns(leftOut) + " left out)"
	}
	e.Runs = len(use)
	rows := median(use, func(r pastRun) float64 { return float64(r.Rows) })
	size := median(use, func(r pastRun) float64 { return float64(r.Size) })
	run := median(use, func(r pastRun) float64 { return float64(r.Run) })
	exact := len(same) > 0
	e.RowsN = int64(math.Round(rows))
	if !exact {
		// A guess from other parameters claims no more than two significant digits.
		e.RowsN = roundSignificant(e.RowsN, 2)
	}
	e.Rows = ui.Count(e.RowsN)
	e.Size = ui.Size(int64(math.Round(size)))
	e.RunTime = ui.Duration(time.Duration(run).Round(time.Millisecond))
	return e
}

// runs1 says "1 run" or "12 recent runs".
func runs1(n int) string {
	if n == 1 {
		return "1 run"
	}
	return strconv.Itoa(n) + " recent runs"
}

// emptyRuns says "1 empty run" or "3 empty runs".
func emptyRuns(n int) string {
	if n == 1 {
		return "1 empty run"
	}
	return strconv.Itoa(n) + " empty runs"
}

// median is the median of f over runs (not empty): the middle one, or the mean of the
// two middle ones.
func median(runs []pastRun, f func(pastRun) float64) float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// roundSignificant rounds n to digits significant digits: 3,147 → 3,100.
func roundSignificant(n int64, digits int) int64 {
	if n == 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(math.Abs(float64(n))))-float64(digits-1))
	if p < 1 {
		return n
	}
	return int64(math.Round(float64(n)/p) * p)
}

// paramsKey is params as canonical JSON (map keys sorted, numbers as JSON writes them),
// so that a run's stored params and the form's validated ones compare equal.
func paramsKey(params map[string]any) string {
	if params == nil {
		params = map[string]any{}
	}
	b, err := json.Marshal(params)
	if err != nil {
		return ""
	}
	return string(b)
}

// datePair names the report's date range: its first two parameters of one date type
// (date or datetime), in declaration order ("from", "to").
func datePair(rep export.Report) (from, to string, ok bool) {
	for i, a := range rep.Params {
		if a.Type != export.TypeDate && a.Type != export.TypeDatetime {
			continue
		}
		for _, b := range rep.Params[i+1:] {
			if b.Type == a.Type {
				return a.Name, b.Name, true
			}
		}
	}
	return "", "", false
}

// span is to - from of two canonical date or datetime values, 0 when either is missing
// or the range is empty.
func span(from, to any) time.Duration {
	parse := func(v any) (time.Time, bool) {
		s, _ := v.(string)
		for _, layout := range []string{time.DateOnly, time.RFC3339Nano} {
			if t, err := time.Parse(layout, s); err == nil {
				return t, true
			}
		}
		return time.Time{}, false
	}
	a, ok1 := parse(from)
	b, ok2 := parse(to)
	if !ok1 || !ok2 || !b.After(a) {
		return 0
	}
	return b.Sub(a)
}

// spanText says a date span: "31 days", "1 day", or "6 h" for a part of a day.
func spanText(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "1 day"
	case d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + " days"
	}
	return ui.Duration(d)
}
