package web

import (
	"testing"
	"time"

	"sheetq/jobs/export"
)

// Issue 37, item 4: an empty run is left out of an estimate unless every run is empty,
// and the basis says how many runs it used and how many it left out.
func TestEstimateLeavesOutEmptyRuns(t *testing.T) {
	empty := pastRun{Params: `{"rows":0}`, Format: "xlsx", Rows: 0, Size: 5_000, Run: time.Second}
	full := pastRun{Params: `{"rows":2000}`, Format: "xlsx", Rows: 2000, Size: 80_000, Run: 3 * time.Second}
	for _, tc := range []struct {
		name  string
		runs  []pastRun
		want  pastRun
		n     int
		rows  int64
		basis string
	}{
		{"one empty, one not", []pastRun{empty, full}, pastRun{Params: `{"rows":3000}`, Format: "xlsx"},
			1, 2000, "from 1 run of this report with other parameters (1 empty run left out)"},
		{"two empty, one not", []pastRun{empty, empty, full}, pastRun{Params: `{"rows":3000}`, Format: "xlsx"},
			1, 2000, "from 1 run of this report with other parameters (2 empty runs left out)"},
		{"all empty: kept", []pastRun{empty, empty}, pastRun{Params: `{"rows":0}`, Format: "xlsx"},
			2, 0, "from 2 recent runs with these parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := estimateFrom(tc.runs, tc.want)
			if e.Runs != tc.n || e.RowsN != tc.rows || e.Basis != tc.basis {
				t.Errorf("runs %d, rows %d, basis %q; want %d, %d, %q", e.Runs, e.RowsN, e.Basis, tc.n, tc.rows, tc.basis)
			}
		})
	}
}

// Issue 37, item 9: the list's summary leaves out a parameter at its default.
func TestParamSummaryLeavesOutDefaults(t *testing.T) {
	demo := []export.Param{
		{Name: "rows", Type: export.TypeInt, Default: int64(1000)},
		{Name: "seconds", Type: export.TypeNumber, Default: 0.0},
		{Name: "fail_first", Type: export.TypeInt, Default: int64(0)},
	}
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		// As stored: JSON numbers.
		{map[string]any{"rows": 5.0, "seconds": 0.0, "fail_first": 0.0}, "rows 5"},
		{map[string]any{"rows": 1000.0, "seconds": 0.5, "fail_first": 0.0}, "seconds 0.5"},
		{map[string]any{"rows": 1000.0, "seconds": 0.0, "fail_first": 0.0}, ""},
		{map[string]any{"rows": 7.0, "gone": "x"}, "rows 7, gone x"},
	} {
		if short, full := paramSummary(tc.values, demo); short != tc.want || full != tc.want {
			t.Errorf("paramSummary(%v) = %q, %q; want %q", tc.values, short, full, tc.want)
		}
	}
}

// Issue 37, item 6: every minute is put into words.
func TestCronWordsEveryMinute(t *testing.T) {
	if got := cronWords("* * * * *"); got != "every minute" {
		t.Errorf("cronWords(* * * * *) = %q", got)
	}
}
