package web

import (
	"testing"
	"time"

	"sheetq/jobs/export"
)

func TestEstimateFrom(t *testing.T) {
	const day = 24 * time.Hour
	p1, p2 := `{"from":"2025-01-01","to":"2025-02-01"}`, `{"from":"2025-01-01","to":"2025-01-11"}`
	runs := []pastRun{
		{Params: p1, Format: "xlsx", Rows: 3100, Size: 200_000, Run: 4 * time.Second, Span: 31 * day},
		{Params: p1, Format: "xlsx", Rows: 3100, Size: 210_000, Run: 6 * time.Second, Span: 31 * day},
		{Params: p1, Format: "xlsx", Rows: 3100, Size: 900_000, Run: 60 * time.Second, Span: 31 * day},
		{Params: p2, Format: "xlsx", Rows: 1000, Size: 70_000, Run: 2 * time.Second, Span: 10 * day},
		{Params: p1, Format: "csv", Rows: 3100, Size: 150_000, Run: time.Second, Span: 31 * day},
	}
	for _, tc := range []struct {
		name                 string
		want                 pastRun
		runs                 int
		rows                 int64
		size, runTime, basis string
	}{
		{"same params: medians of those runs", pastRun{Params: p1, Format: "xlsx", Span: 31 * day},
			3, 3100, "210.0 kB", "6 s", "from 3 recent runs with these parameters"},
		{"same params, other format", pastRun{Params: p1, Format: "csv", Span: 31 * day},
			1, 3100, "150.0 kB", "1 s", "from 1 run with these parameters"},
		// Each xlsx run scaled to 62 days: 6200, 6200, 6200, 6200 rows; sizes 400k,
		// 420k, 1.8M, 434k: median of 4 = (420k+434k)/2.
		{"other dates: scaled by the span", pastRun{Params: `{"from":"2025-01-01","to":"2025-03-04"}`, Format: "xlsx", Span: 62 * day},
			4, 6200, "427.0 kB", "12 s", "from 4 recent runs of this report, scaled to 62 days"},
		{"one day", pastRun{Params: "x", Format: "xlsx", Span: day},
			4, 100, "6.9 kB", "197 ms", "from 4 recent runs of this report, scaled to 1 day"},
		{"no span: unscaled", pastRun{Params: "", Format: "xlsx"},
			4, 3100, "205.0 kB", "5 s", "from 4 recent runs of this report with other parameters"},
		{"no run in this format", pastRun{Params: p1, Format: "ods"}, 0, 0, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := estimateFrom(runs, tc.want)
			if e.Runs != tc.runs || e.RowsN != tc.rows || e.Size != tc.size || e.RunTime != tc.runTime || e.Basis != tc.basis {
				t.Errorf("got runs %d rows %d size %q time %q basis %q\nwant runs %d rows %d size %q time %q basis %q",
					e.Runs, e.RowsN, e.Size, e.RunTime, e.Basis, tc.runs, tc.rows, tc.size, tc.runTime, tc.basis)
			}
		})
	}
	if e := estimateFrom(nil, pastRun{Format: "xlsx"}); e.Runs != 0 || e.Rows != "" {
		t.Errorf("no runs: %+v", e)
	}
}

func TestEstimateHelpers(t *testing.T) {
	for n, want := range map[int64]int64{0: 0, 7: 7, 42: 42, 3147: 3100, 3150: 3200, 999_999: 1_000_000, -3147: -3100} {
		if got := roundSignificant(n, 2); got != want {
			t.Errorf("roundSignificant(%d) = %d, want %d", n, got, want)
		}
	}
	if got := median([]pastRun{{Rows: 5}, {Rows: 1}, {Rows: 3}}, func(r pastRun) float64 { return float64(r.Rows) }); got != 3 {
		t.Errorf("median of 3 = %v", got)
	}
	if got := span("2025-01-01", "2025-02-01"); got != 31*24*time.Hour {
		t.Errorf("span of January %v", got)
	}
	if got := span("2025-02-01", "2025-01-01"); got != 0 {
		t.Errorf("span of an empty range %v", got)
	}
	if got := span("2025-01-01T00:00:00Z", "2025-01-01T06:00:00Z"); got != 6*time.Hour {
		t.Errorf("datetime span %v", got)
	}
	rep := export.Report{Params: []export.Param{{Name: "n", Type: export.TypeInt}, {Name: "a", Type: export.TypeDate},
		{Name: "t", Type: export.TypeDatetime}, {Name: "b", Type: export.TypeDate}}}
	if from, to, ok := datePair(rep); !ok || from != "a" || to != "b" {
		t.Errorf("datePair %q %q %v", from, to, ok)
	}
	if _, _, ok := datePair(export.Report{Params: []export.Param{{Name: "a", Type: export.TypeDate}}}); ok {
		t.Error("one date is not a pair")
	}
	if a, b := paramsKey(map[string]any{"rows": int64(25), "b": "x"}), paramsKey(map[string]any{"b": "x", "rows": float64(25)}); a != b {
		t.Errorf("paramsKey differs for the same values: %s, %s", a, b)
	}
}
