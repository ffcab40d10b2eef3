package export

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
)

// sliceSource is a Source over rows held in memory, for feeding the writer exact values.
type sliceSource struct {
	cols  []Column
	rows  [][]any
	total int64
	err   error // returned instead of streaming, when set
}

func (s sliceSource) Stream(_ context.Context, _ Query, w RowWriter) error {
	if s.err != nil {
		return s.err
	}
	if err := w.Begin(s.cols, s.total); err != nil {
		return err
	}
	for _, r := range s.rows {
		if err := w.Row(r); err != nil {
			return err
		}
	}
	return nil
}

func demoQuery(rows int64) Query {
	return Query{
		Report:  demoReport,
		Params:  map[string]any{"rows": rows, "seconds": 0.0, "fail_first": int64(0)},
		Attempt: 1,
	}
}

// export runs writeXLSX into memory and opens the result.
func export(t *testing.T, src Source, q Query, progress func(rows, total int64)) (*excelize.File, []byte) {
	t.Helper()
	return exportWith(t, src, q, xlsxOptions{progress: progress})
}

// exportWith is export with options (opt.tmpDir is set here).
func exportWith(t *testing.T, src Source, q Query, opt xlsxOptions) (*excelize.File, []byte) {
	t.Helper()
	var buf bytes.Buffer
	opt.tmpDir = t.TempDir()
	if err := writeXLSX(t.Context(), &buf, src, q, opt); err != nil {
		t.Fatalf("writeXLSX: %v", err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("open result: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f, buf.Bytes()
}

// sheetXML returns the raw XML of the n-th worksheet, for what excelize cannot read back,
// with "$" removed: excelize writes the autofilter's range as $A$1:$G$9.
func sheetXML(t *testing.T, data []byte, n int) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open(fmt.Sprintf("xl/worksheets/sheet%d.xml", n))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "$", "")
}

func cellStyle(t *testing.T, f *excelize.File, sheet, cell string) *excelize.Style {
	t.Helper()
	id, err := f.GetCellStyle(sheet, cell)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.GetStyle(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestWriteXLSXDemo(t *testing.T) {
	t.Parallel()
	const rows = 250 // more than widthSample, so rows are both held back and streamed
	f, data := export(t, demoSource{}, demoQuery(rows), nil)

	if got := f.GetSheetList(); len(got) != 1 || got[0] != "Demo" {
		t.Fatalf("sheets = %v, want [Demo]", got)
	}
	all, err := f.GetRows("Demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != rows+1 {
		t.Fatalf("%d rows, want %d with the header", len(all), rows+1)
	}
	if got := strings.Join(all[0], ","); got != "id,customer,amount,paid,order_date,created_at,note" {
		t.Fatalf("header = %s", got)
	}

	// Header: bold, frozen, filtered.
	if st := cellStyle(t, f, "Demo", "C1"); st.Font == nil || !st.Font.Bold {
		t.Errorf("header style %+v is not bold", st)
	}
	panes, err := f.GetPanes("Demo")
	if err != nil {
		t.Fatal(err)
	}
	if !panes.Freeze || panes.YSplit != 1 || panes.XSplit != 0 || panes.TopLeftCell != "A2" {
		t.Errorf("panes = %+v, want the first row frozen", panes)
	}
	x := sheetXML(t, data, 1)
	if !strings.Contains(x, `<autoFilter ref="A1:G251"`) {
		t.Errorf("no autofilter over A1:G251 in sheet XML")
	}
	if !strings.Contains(x, `<cols><col min="1" max="1"`) {
		t.Errorf("column widths do not start at column A: Excel wants them in order")
	}

	// Every row matches the demo source, typed.
	vals := make([]any, len(demoColumns))
	nulls := 0
	for i := range int64(rows) {
		demoRow(vals, i)
		r := int(i) + 2
		cell := func(col string) string { return col + strconv.Itoa(r) }
		raw := func(col string) string {
			v, err := f.GetCellValue("Demo", cell(col), excelize.Options{RawCellValue: true})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		typ := func(col string) excelize.CellType {
			ct, err := f.GetCellType("Demo", cell(col))
			if err != nil {
				t.Fatal(err)
			}
			return ct
		}
		// Numbers and dates carry no t attribute: OOXML's default cell type is number.
		for _, col := range []string{"A", "C", "E", "F"} {
			if ct := typ(col); ct != excelize.CellTypeUnset {
				t.Fatalf("%s has type %v, want a number", cell(col), ct)
			}
		}
		if got, want := raw("A"), strconv.FormatInt(vals[0].(int64), 10); got != want {
			t.Fatalf("%s = %s, want %s", cell("A"), got, want)
		}
		if ct := typ("B"); ct != excelize.CellTypeInlineString || raw("B") != vals[1] {
			t.Fatalf("%s = %q (%v), want text %q", cell("B"), raw("B"), ct, vals[1])
		}
		if got, err := strconv.ParseFloat(raw("C"), 64); err != nil || got != vals[2].(float64) {
			t.Fatalf("%s = %s, want %v", cell("C"), raw("C"), vals[2])
		}
		if ct := typ("D"); ct != excelize.CellTypeBool || raw("D") != map[bool]string{true: "1", false: "0"}[vals[3].(bool)] {
			t.Fatalf("%s = %s (%v), want bool %v", cell("D"), raw("D"), ct, vals[3])
		}
		// Dates read back through their number format show the source's wall clock.
		if got, _ := f.GetCellValue("Demo", cell("E")); got != vals[4].(time.Time).Format("2006-01-02") {
			t.Fatalf("%s shows %s, want %v", cell("E"), got, vals[4])
		}
		if got, _ := f.GetCellValue("Demo", cell("F")); got != vals[5].(time.Time).Format("2006-01-02 15:04:05") {
			t.Fatalf("%s shows %s, want %v", cell("F"), got, vals[5])
		}
		if vals[6] == nil {
			nulls++
			if raw("G") != "" {
				t.Fatalf("%s = %q, want empty for NULL", cell("G"), raw("G"))
			}
		} else if raw("G") != vals[6] {
			t.Fatalf("%s = %q, want %q", cell("G"), raw("G"), vals[6])
		}
	}
	if nulls == 0 || nulls == rows {
		t.Errorf("%d NULL notes in %d rows; the demo should mix both", nulls, rows)
	}
	for col, format := range map[string]string{"E2": "yyyy-mm-dd", "F2": "yyyy-mm-dd hh:mm:ss", "E200": "yyyy-mm-dd"} {
		if st := cellStyle(t, f, "Demo", col); st.CustomNumFmt == nil || *st.CustomNumFmt != format {
			t.Errorf("%s number format = %v, want %s", col, st.CustomNumFmt, format)
		}
	}

	// Widths come from the header and the first rows, within bounds.
	for col, want := range map[string]float64{"E": 14, "F": 21} {
		if got, _ := f.GetColWidth("Demo", col); got != want {
			t.Errorf("column %s width %v, want %v", col, got, want)
		}
	}
	for c := 1; c <= len(demoColumns); c++ {
		if got, _ := f.GetColWidth("Demo", colName(c)); got < minColWidth || got > maxColWidth {
			t.Errorf("column %s width %v out of bounds", colName(c), got)
		}
	}
}

func TestWriteXLSXSplitsSheets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rows, limit int
		want        []int // rows per sheet, header included
	}{
		{rows: 0, limit: 10, want: []int{1}},
		{rows: 9, limit: 10, want: []int{10}},
		{rows: 18, limit: 10, want: []int{10, 10}}, // exactly full: no empty third sheet
		{rows: 20, limit: 10, want: []int{10, 10, 3}},
		{rows: 250, limit: 100, want: []int{100, 100, 53}}, // split while streaming, after the held-back rows
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d rows by %d", tt.rows, tt.limit), func(t *testing.T) {
			f, data := exportWith(t, demoSource{}, demoQuery(int64(tt.rows)), xlsxOptions{maxSheetRows: tt.limit})
			sheets := f.GetSheetList()
			if len(sheets) != len(tt.want) {
				t.Fatalf("sheets = %v, want %d", sheets, len(tt.want))
			}
			id := 0
			for n, name := range sheets {
				if want := sheetName("Demo", n+1); name != want {
					t.Errorf("sheet %d is %q, want %q", n+1, name, want)
				}
				got, err := f.GetRows(name)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tt.want[n] {
					t.Fatalf("%s has %d rows, want %d", name, len(got), tt.want[n])
				}
				if got[0][0] != "id" || !cellStyle(t, f, name, "A1").Font.Bold {
					t.Errorf("%s does not start with the bold header: %v", name, got[0])
				}
				if p, _ := f.GetPanes(name); !p.Freeze || p.YSplit != 1 {
					t.Errorf("%s header is not frozen: %+v", name, p)
				}
				ref := fmt.Sprintf(`<autoFilter ref="A1:G%d"`, tt.want[n])
				if !strings.Contains(sheetXML(t, data, n+1), ref) {
					t.Errorf("%s has no %s", name, ref)
				}
				// Ids run on across sheets without a gap.
				for _, r := range got[1:] {
					id++
					if r[0] != strconv.Itoa(id) {
						t.Fatalf("%s: id %s, want %d", name, r[0], id)
					}
				}
			}
			if id != tt.rows {
				t.Fatalf("%d rows in all, want %d", id, tt.rows)
			}
		})
	}
}

func TestWriteXLSXValues(t *testing.T) {
	t.Parallel()
	berlin := time.FixedZone("CET", 3600)
	src := sliceSource{
		cols: []Column{
			{Name: "big", Type: TypeInt}, {Name: "small", Type: TypeInt}, {Name: "bytes", Type: TypeText},
			{Name: "when", Type: TypeDatetime}, {Name: "day", Type: TypeDate}, {Name: "ok", Type: TypeBool},
		},
		rows: [][]any{
			{int64(1<<62 + 1), int32(-5), []byte("raw"), time.Date(2024, 5, 6, 7, 8, 9, 0, berlin), time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), false},
			{nil, nil, nil, nil, nil, nil},
		},
		total: -1,
	}
	f, _ := export(t, src, Query{Report: Report{Source: "mem", Sheet: "Values"}}, nil)
	want := map[string]string{
		"A2": strconv.FormatInt(1<<62+1, 10), // every digit kept, as text
		"B2": "-5", "C2": "raw",
		"D2": "2024-05-06 07:08:09", // the source's wall clock, not UTC
		"E2": "1999-12-31", "F2": "FALSE",
		"A3": "", "F3": "",
	}
	for cell, w := range want {
		if got, err := f.GetCellValue("Values", cell); err != nil || got != w {
			t.Errorf("%s = %q (%v), want %q", cell, got, err, w)
		}
	}
	if ct, _ := f.GetCellType("Values", "A2"); ct != excelize.CellTypeInlineString {
		t.Errorf("A2 type %v, want text for an int beyond 2^53", ct)
	}
}

func TestWriteXLSXProgress(t *testing.T) {
	t.Parallel()
	type call struct{ rows, total int64 }
	var calls []call
	export(t, demoSource{}, demoQuery(150), func(rows, total int64) { calls = append(calls, call{rows, total}) })
	if len(calls) < 150 {
		t.Fatalf("%d progress calls for 150 rows", len(calls))
	}
	if calls[0] != (call{0, 150}) || calls[len(calls)-1] != (call{150, 150}) {
		t.Fatalf("progress ran from %v to %v, want {0 150} to {150 150}", calls[0], calls[len(calls)-1])
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].rows < calls[i-1].rows {
			t.Fatalf("progress went back: %v then %v", calls[i-1], calls[i])
		}
	}

	// An unknown total becomes the final count at the end.
	calls = nil
	export(t, sliceSource{cols: demoColumns[:1], rows: [][]any{{1}, {2}}, total: -1}, Query{}, func(rows, total int64) {
		calls = append(calls, call{rows, total})
	})
	if calls[1] != (call{1, -1}) || calls[len(calls)-1] != (call{2, 2}) {
		t.Fatalf("progress = %v, want total -1 while streaming and 2 at the end", calls)
	}
}

func TestWriteXLSXErrors(t *testing.T) {
	t.Parallel()
	cols := demoColumns[:2]
	tests := []struct {
		name      string
		src       Source
		w         io.Writer
		code      string
		permanent bool
	}{
		{"plain source error is upstream", sliceSource{err: errors.New("connection reset")}, &bytes.Buffer{}, "upstream", false},
		{"marked source error kept", sliceSource{err: jobs.Permanent("bad_query", errors.New("syntax"))}, &bytes.Buffer{}, "bad_query", true},
		{"row of wrong width", sliceSource{cols: cols, rows: [][]any{{1}}}, &bytes.Buffer{}, "bad_source", true},
		{"no columns", sliceSource{}, &bytes.Buffer{}, "no_columns", true},
		{"write fails", sliceSource{cols: cols, rows: [][]any{{1, "a"}}}, failWriter{}, "io", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := writeXLSX(t.Context(), tt.w, tt.src, Query{Report: Report{Source: "mem", Sheet: "S"}}, xlsxOptions{tmpDir: t.TempDir()})
			var je *jobs.Error
			if !errors.As(err, &je) || je.Code != tt.code || je.Permanent != tt.permanent {
				t.Fatalf("err = %#v, want code %s permanent %v", err, tt.code, tt.permanent)
			}
			if b, ok := tt.w.(*bytes.Buffer); ok && b.Len() > 0 {
				t.Fatalf("%d bytes written on failure", b.Len())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSheetName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		base string
		n    int
		want string
	}{
		{"Demo", 1, "Demo"},
		{"Demo", 2, "Demo (2)"},
		{"a/b:c?d*e[f]g\\h", 1, "a_b_c_d_e_f_g_h"},
		{"'quoted'", 1, "quoted"},
		{"", 1, "Sheet"},
		{"  ", 3, "Sheet (3)"},
		{strings.Repeat("x", 40), 1, strings.Repeat("x", 31)},
		{strings.Repeat("x", 40), 12, strings.Repeat("x", 26) + " (12)"},
		{strings.Repeat("😀", 20), 2, strings.Repeat("😀", 13) + " (2)"},             // each emoji is two UTF-16 units
		{strings.Repeat("a", 26) + "'bcdef", 2, strings.Repeat("a", 26) + "’ (2)"}, // no plain quote in a name
		{"Bob's orders", 1, "Bob’s orders"},
	}
	for _, tt := range tests {
		got := sheetName(tt.base, tt.n)
		if got != tt.want {
			t.Errorf("sheetName(%q, %d) = %q, want %q", tt.base, tt.n, got, tt.want)
		}
		f := excelize.NewFile()
		if _, err := f.NewSheet(got); err != nil {
			t.Errorf("excelize refuses %q: %v", got, err)
		}
		f.Close()
	}
}

// BenchmarkWriteDemo100k writes 100,000 demo rows, zipped, to nowhere. The
// xlsxbench program (internal/xlsxbench) measures whole exports, with peak memory.
func BenchmarkWriteDemo100k(b *testing.B) {
	const rows = 100_000
	q := demoQuery(rows)
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if err := writeXLSX(b.Context(), io.Discard, demoSource{}, q, xlsxOptions{tmpDir: dir}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWriteDemo2k writes 2,000 demo rows, the burst profile's export: what the
// fixed costs of a file (its excelize files, styles, package) weigh in a small export.
func BenchmarkWriteDemo2k(b *testing.B) {
	const rows = 2_000
	q := demoQuery(rows)
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if err := writeXLSX(b.Context(), io.Discard, demoSource{}, q, xlsxOptions{tmpDir: dir}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// The spill directory is checked before the source runs, by creating the first sheet's
// file there, and no file is left in it after an export that worked or failed.
func TestWriteXLSXSpillDirectory(t *testing.T) {
	t.Parallel()
	t.Run("unusable", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		src := countingSource{runs: new(atomic.Int64), src: demoSource{}}
		var buf bytes.Buffer
		err := writeXLSX(t.Context(), &buf, src, demoQuery(10), xlsxOptions{tmpDir: filepath.Join(file, "spill")})
		var je *jobs.Error
		if !errors.As(err, &je) || je.Code != "io" || je.Permanent || !strings.Contains(err.Error(), "spill directory") {
			t.Fatalf("err = %v, want a retryable io error about the spill directory", err)
		}
		if n := src.runs.Load(); n != 0 || buf.Len() != 0 {
			t.Fatalf("source streamed %d times and %d bytes were written before the check", n, buf.Len())
		}
	})
	for _, tt := range []struct {
		name string
		src  Source
		fail bool
	}{
		{"three sheets", demoSource{}, false},
		{"source fails", sliceSource{err: errors.New("connection reset")}, true},
		{"source fails after rows", &failAfter{n: 15}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "spill")
			var buf bytes.Buffer
			err := writeXLSX(t.Context(), &buf, tt.src, demoQuery(20), xlsxOptions{tmpDir: dir, maxSheetRows: 10})
			if (err != nil) != tt.fail {
				t.Fatalf("err = %v, want failure %v", err, tt.fail)
			}
			if !tt.fail {
				f, err := excelize.OpenReader(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if n := len(f.GetSheetList()); n != 3 {
					t.Fatalf("%d sheets, want 3", n)
				}
			}
			left, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Fatalf("left in the spill directory: %v", left)
			}
		})
	}
}
