package export

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"sheetq/jobs"
)

// demoReport is the built-in report over the built-in demo source: synthetic rows with
// knobs for size, slowness and failing first attempts, so retries, progress and
// recovery can be seen without a database.
var demoReport = Report{
	ID:     "demo",
	Title:  "Demo rows",
	Source: "demo",
	Sheet:  "Demo",
	Params: []Param{
		{Name: "rows", Type: TypeInt, Label: "Rows", Default: int64(1000), Min: ptr(0.0), Max: ptr(10_000_000.0)},
		{Name: "seconds", Type: TypeNumber, Label: "Spread over seconds", Default: 0.0, Min: ptr(0.0), Max: ptr(86_400.0)},
		{Name: "fail_first", Type: TypeInt, Label: "Fail first attempts", Default: int64(0), Min: ptr(0.0)},
	},
}

var demoColumns = []Column{
	{Name: "id", Type: TypeInt},
	{Name: "customer", Type: TypeText},
	{Name: "amount", Type: TypeNumber},
	{Name: "paid", Type: TypeBool},
	{Name: "order_date", Type: TypeDate},
	{Name: "created_at", Type: TypeDatetime},
	{Name: "note", Type: TypeText},
}

// demoSeed fixes the synthetic data, so the same params always give the same rows.
const demoSeed = 0x5eed_0f_5eed

// demoPace is the shortest sleep the demo source takes: a slow export sleeps in
// batches instead of paying for a timer on every row.
const demoPace = 10 * time.Millisecond

var (
	demoFirst = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Ken", "Margaret", "Dennis", "Radia", "Linus"}
	demoLast  = []string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Hamilton", "Ritchie", "Perlman", "Torvalds"}
	demoNotes = []string{"rush order", "gift wrap", "call before delivery", "second attempt"}
	demoEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// demoDays is how many order dates the demo rows spread over, from demoEpoch.
const demoDays = 730

// demoBoxes holds the demo's values that repeat across rows, already in interfaces: a
// row reuses them instead of allocating a name, a note or a date per row (issue 43: an
// export's garbage per row sets how often a busy server collects). Values in an
// interface are immutable, so rows may share them, also once the pipe has copied a row.
type demoBoxes struct {
	names [100]any // demoFirst[i/10] + " " + demoLast[i%10]
	notes []any    // demoNotes
	days  [demoDays]any
}

var demoBoxed = sync.OnceValue(func() *demoBoxes {
	b := &demoBoxes{notes: make([]any, len(demoNotes))}
	for i := range b.names {
		b.names[i] = demoFirst[i/10] + " " + demoLast[i%10]
	}
	for i, n := range demoNotes {
		b.notes[i] = n
	}
	for i := range b.days {
		b.days[i] = demoEpoch.AddDate(0, 0, i)
	}
	return b
})

// demoSource is the built-in source: deterministic synthetic rows.
type demoSource struct{}

// Resumable implements Resumer: a demo row is a function of its number alone.
func (demoSource) Resumable(Report) (bool, string) { return true, "" }

// demoPlacer places the demo's rows by their count alone.
func demoPlacer(int64, []any) (json.RawMessage, error) { return nil, nil }

// Stream implements Source. Params: rows (int64), seconds (float64), fail_first (int64).
// A resumed stream (q.From) continues at row From.Rows+1, at the pace it would have
// had there.
func (demoSource) Stream(ctx context.Context, q Query, w RowWriter) error {
	rows, _ := q.Params["rows"].(int64)
	seconds, _ := q.Params["seconds"].(float64)
	failFirst, _ := q.Params["fail_first"].(int64)
	if int64(q.Attempt) <= failFirst {
		return jobs.Retryable("upstream", fmt.Errorf("demo source: simulated upstream failure on attempt %d of first %d", q.Attempt, failFirst))
	}
	if q.Place != nil {
		q.Place(demoPlacer)
	}
	if err := w.Begin(demoColumns, rows); err != nil {
		return err
	}
	var from int64
	if q.From != nil {
		from = min(max(q.From.Rows, 0), rows)
	}
	spread := time.Duration(seconds * float64(time.Second))
	start := time.Now()
	if rows > 0 {
		// As if the export had run from the start at its pace.
		start = start.Add(-time.Duration(float64(spread) * float64(from) / float64(rows)))
	}
	vals := make([]any, len(demoColumns))
	for i := from; i < rows; i++ {
		if spread > 0 {
			// Row i is due when its share of the spread has passed.
			due := start.Add(time.Duration(float64(spread) * float64(i+1) / float64(rows)))
			if d := time.Until(due); d >= demoPace {
				if err := sleep(ctx, d); err != nil {
					return jobs.Retryable("canceled", fmt.Errorf("demo source: %w", err))
				}
			}
		}
		if i%1024 == 0 && ctx.Err() != nil {
			return jobs.Retryable("canceled", fmt.Errorf("demo source: %w", ctx.Err()))
		}
		demoRow(vals, i)
		if err := w.Row(vals); err != nil {
			return err
		}
	}
	return nil
}

// demoRow fills vals with row i. Each row derives from a hash of its index alone,
// so rows do not depend on how many came before. The name, the note and the order date
// come from demoBoxed, so only the id, the amount and the time allocate.
func demoRow(vals []any, i int64) {
	b := demoBoxed()
	h := splitmix64(demoSeed + uint64(i))
	d := h >> 8 % demoDays
	vals[0] = i + 1
	vals[1] = b.names[h%10*10+h>>4%10]
	vals[2] = float64(h>>20%1_000_000) / 100
	vals[3] = h>>40%4 != 0
	vals[4] = b.days[d]
	vals[5] = b.days[d].(time.Time).Add(time.Duration(h>>44%86_400) * time.Second)
	vals[6] = nil
	if n := h >> 60; n < uint64(len(b.notes)) {
		vals[6] = b.notes[n]
	}
}

// splitmix64 is a tiny, well-mixed hash; enough for synthetic data.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// sleep waits for d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
