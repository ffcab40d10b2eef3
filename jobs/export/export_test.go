package export

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sheetq/jobs"
)

// The handler's early exits happen before it asks the run for its output, so they can
// be tested without an engine; a full run is the engine's tests' job.
func TestRunRejects(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		attempt int
		code    string
		perm    bool
		msg     string
	}{
		{"bad JSON", `{"report":`, 1, "bad_args", true, "decode export args"},
		{"unknown report", `{"report":"nope","params":{}}`, 1, "unknown_report", true, `unknown report "nope"`},
		{"bad param", `{"report":"demo","params":{"rows":"lots"}}`, 1, "bad_params", true, `param "rows": must be an integer`},
		{"unknown param", `{"report":"demo","params":{"colour":"red"}}`, 1, "bad_params", true, `param "colour": unknown parameter`},
		{"fail first attempt", `{"report":"demo","params":{"rows":10,"fail_first":2}}`, 1, "upstream", false,
			"demo source: simulated upstream failure on attempt 1 of first 2"},
		{"fail second attempt", `{"report":"demo","params":{"rows":10,"fail_first":2}}`, 2, "upstream", false,
			"demo source: simulated upstream failure on attempt 2 of first 2"},
	}
	k := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &jobs.Run{JobID: "j1", Kind: Name, Args: []byte(tt.args), Attempt: tt.attempt, MaxAttempts: 3}
			err := k.Run(t.Context(), run)
			var je *jobs.Error
			if !errors.As(err, &je) || je.Code != tt.code || je.Permanent != tt.perm {
				t.Fatalf("err = %#v, want code %s permanent %v", err, tt.code, tt.perm)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("message %q does not say %q", err, tt.msg)
			}
		})
	}
	var pe *ParamError
	err := k.Run(t.Context(), &jobs.Run{Args: []byte(`{"report":"demo","params":{"rows":-1}}`), Attempt: 1})
	if !errors.As(err, &pe) || pe.Param != "rows" {
		t.Fatalf("err = %v, want a ParamError for rows inside the job error", err)
	}
}

// rowCounter is a RowWriter that counts rows and can signal the first Begin.
type rowCounter struct {
	cols  []Column
	total int64
	rows  int
	began chan struct{}
}

func (c *rowCounter) Begin(cols []Column, total int64) error {
	c.cols, c.total = cols, total
	if c.began != nil {
		close(c.began)
	}
	return nil
}

func (c *rowCounter) Row(values []any) error {
	if len(values) != len(c.cols) {
		return errors.New("wrong width")
	}
	c.rows++
	return nil
}

func demoParams(rows int64, seconds float64, failFirst int64) map[string]any {
	return map[string]any{"rows": rows, "seconds": seconds, "fail_first": failFirst}
}

func TestDemoSourceSucceedsAfterFailFirst(t *testing.T) {
	var c rowCounter
	q := Query{Report: demoReport, Params: demoParams(42, 0, 2), Attempt: 3}
	if err := (demoSource{}).Stream(t.Context(), q, &c); err != nil {
		t.Fatal(err)
	}
	if c.rows != 42 || c.total != 42 || len(c.cols) != len(demoColumns) {
		t.Fatalf("got %d rows of %d (total %d), want 42 of %d", c.rows, len(c.cols), c.total, len(demoColumns))
	}
}

// TestDemoRowsUnchanged holds demoRow, with its shared boxes, to the rows it made when
// each row built its own values: files and tests depend on the demo's values, and a
// row depends on its number alone.
func TestDemoRowsUnchanged(t *testing.T) {
	t.Parallel()
	want := func(vals []any, i int64) { // demoRow before its values were shared
		h := splitmix64(demoSeed + uint64(i))
		day := demoEpoch.AddDate(0, 0, int(h>>8%730))
		vals[0] = i + 1
		vals[1] = demoFirst[h%10] + " " + demoLast[h>>4%10]
		vals[2] = float64(h>>20%1_000_000) / 100
		vals[3] = h>>40%4 != 0
		vals[4] = day
		vals[5] = day.Add(time.Duration(h>>44%86_400) * time.Second)
		vals[6] = nil
		if n := h >> 60; n < uint64(len(demoNotes)) {
			vals[6] = demoNotes[n]
		}
	}
	a, b := make([]any, len(demoColumns)), make([]any, len(demoColumns))
	for i := range int64(200_000) {
		demoRow(a, i)
		want(b, i)
		for j := range a {
			// == on interfaces compares the dynamic types and the values; for a
			// time.Time that includes its location pointer.
			if a[j] != b[j] {
				t.Fatalf("row %d column %s: %#v, want %#v", i, demoColumns[j].Name, a[j], b[j])
			}
		}
	}
}

// A demo row allocates only its id, amount and time; the rest is shared.
func TestDemoRowAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	vals := make([]any, len(demoColumns))
	i := int64(1000)
	demoRow(vals, i) // the shared boxes
	if n := testing.AllocsPerRun(1000, func() { demoRow(vals, i); i++ }); n > 3 {
		t.Errorf("demoRow allocates %.1f times a row, want at most 3", n)
	}
}

func TestDemoSourceCancel(t *testing.T) {
	// A day-long spread: every row waits, so only a cancel can end the stream.
	q := Query{Report: demoReport, Params: demoParams(10, 86_400, 0), Attempt: 1}
	ctx, cancel := context.WithCancel(t.Context())
	c := &rowCounter{began: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- (demoSource{}).Stream(ctx, q, c) }()
	<-c.began
	cancel()
	err := <-done
	var je *jobs.Error
	if !errors.As(err, &je) || je.Permanent || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %#v, want a retryable error wrapping context.Canceled", err)
	}
	if c.rows != 0 {
		t.Fatalf("%d rows before the first was due", c.rows)
	}
}
