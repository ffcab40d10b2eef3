package export

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
)

func TestCutText(t *testing.T) {
	t.Parallel()
	emoji := "😀" // two UTF-16 units
	tests := []struct {
		name string
		in   string
		cut  bool
	}{
		{"short", "hello", false},
		{"at the limit", strings.Repeat("a", maxCellChars), false},
		{"one over", strings.Repeat("a", maxCellChars+1), true},
		{"far over", strings.Repeat("abc", 100_000), true},
		{"3-byte characters at the limit", strings.Repeat("日", maxCellChars), false}, // 98,301 bytes, 32,767 units
		{"3-byte characters over", strings.Repeat("日", maxCellChars+1), true},
		{"emoji at the limit", strings.Repeat(emoji, maxCellChars/2) + "a", false},
		{"emoji over", strings.Repeat(emoji, maxCellChars/2+1), true},
		{"emoji across the cut", "a" + strings.Repeat(emoji, maxCellChars), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := cutText(tt.in)
			if cut != tt.cut {
				t.Fatalf("cut = %v, want %v", cut, tt.cut)
			}
			if !cut {
				if got != tt.in {
					t.Fatal("changed a value it did not cut")
				}
				return
			}
			if n := len(utf16.Encode([]rune(got))); n > maxCellChars || n < maxCellChars-40 {
				t.Fatalf("%d UTF-16 units, want at most %d and not much less", n, maxCellChars)
			}
			i := strings.LastIndex(got, "… [cut: ")
			if i < 0 || !strings.HasSuffix(got, " characters]") {
				t.Fatalf("no marker at the end: %q", got[max(len(got)-60, 0):])
			}
			kept := got[:i]
			if !strings.HasPrefix(tt.in, kept) || !utf8.ValidString(kept) {
				t.Fatal("the kept text is not a whole-character prefix of the value")
			}
			n, err := strconv.Atoi(strings.TrimSuffix(got[i+len("… [cut: "):], " characters]"))
			if want := utf8.RuneCountInString(tt.in) - utf8.RuneCountInString(kept); err != nil || n != want {
				t.Fatalf("marker says %d characters cut (%v), want %d", n, err, want)
			}
		})
	}
}

// warnings collects what the writer warns about.
type warnings []string

func (w *warnings) add(msg string) { *w = append(*w, msg) }

func TestWriteXLSXCutsLongTextAndWarnsOncePerColumn(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 40_000)
	src := sliceSource{
		cols: []Column{{Name: "id", Type: TypeInt}, {Name: "note", Type: TypeText}, {Name: "raw", Type: TypeText}, {Name: "short", Type: TypeText}},
		rows: [][]any{
			{int64(1), long, []byte(long), "ok"},
			{int64(2), long + "y", "fine", "ok"},
			{int64(3), "fine", "fine", "ok"},
			{int64(4), strings.Repeat("é", 33_000), nil, "ok"},
		},
		total: 4,
	}
	var warned warnings
	var buf bytes.Buffer
	err := writeXLSX(t.Context(), &buf, src, Query{Report: Report{Source: "mem", Sheet: "S"}}, xlsxOptions{tmpDir: t.TempDir(), warn: warned.add})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`column "note": 3 values longer than 32,767 characters were cut`,
		`column "raw": 1 value longer than 32,767 characters was cut`,
	}
	if strings.Join(warned, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(warned, "\n"), strings.Join(want, "\n"))
	}
	f, err := excelize.OpenReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, cell := range []string{"B2", "B3", "B5", "C2"} {
		v, _ := f.GetCellValue("S", cell)
		if n := len(utf16.Encode([]rune(v))); n > maxCellChars || !strings.HasSuffix(v, " characters]") {
			t.Errorf("%s: %d units, ends %q", cell, n, v[max(len(v)-30, 0):])
		}
	}
	// Room is kept for a marker with as many digits as 40,001: 32,742 characters, and
	// then "… [cut: 7259 characters]" takes 24.
	if v, _ := f.GetCellValue("S", "B3"); !strings.HasSuffix(v, "x… [cut: 7259 characters]") || utf8.RuneCountInString(v) != 32_742+24 {
		t.Errorf("B3 ends %q, want 40,001 - 32,742 characters cut", v[len(v)-30:])
	}
}

func TestWriteXLSXWarnsOnlyWhenWritten(t *testing.T) {
	t.Parallel()
	src := sliceSource{cols: []Column{{Name: "note", Type: TypeText}}, rows: [][]any{{strings.Repeat("x", 40_000)}}}
	var warned warnings
	err := writeXLSX(t.Context(), failWriter{}, src, Query{Report: Report{Sheet: "S"}}, xlsxOptions{tmpDir: t.TempDir(), warn: warned.add})
	if err == nil || len(warned) != 0 {
		t.Fatalf("err = %v, warnings %q: a failed file warns about nothing", err, warned)
	}
}

// Text that looks like a formula is stored as text: a cell with t="inlineStr" and no
// <f>, so no spreadsheet computes it (CSV/formula injection).
func TestWriteXLSXFormulaLikeTextStaysText(t *testing.T) {
	t.Parallel()
	values := []string{"=1+1", "+1", "-1", "@SUM(A1)", "=cmd|' /C calc'!A0", `=HYPERLINK("http://example.invalid","x")`, "\t=1+1"}
	src := sliceSource{cols: []Column{{Name: "v", Type: TypeText}}}
	for _, v := range values {
		src.rows = append(src.rows, []any{v})
	}
	// A value of a type no source sends, even excelize's own formula cell, is text too.
	src.rows = append(src.rows, []any{excelize.Cell{Formula: "1+1"}})
	f, data := export(t, src, Query{Report: Report{Sheet: "S"}}, nil)
	x := sheetXML(t, data, 1)
	if strings.Contains(x, "<f>") || strings.Contains(x, "<f ") {
		t.Fatalf("the sheet has a formula:\n%s", x)
	}
	for i, v := range values {
		cell := "A" + strconv.Itoa(i+2)
		if ct, _ := f.GetCellType("S", cell); ct != excelize.CellTypeInlineString {
			t.Errorf("%s type %v, want an inline string", cell, ct)
		}
		if got, _ := f.GetCellValue("S", cell); got != v {
			t.Errorf("%s = %q, want %q", cell, got, v)
		}
		if fm, _ := f.GetCellFormula("S", cell); fm != "" {
			t.Errorf("%s has formula %q", cell, fm)
		}
	}
}

func TestWriteXLSXCellTypes(t *testing.T) {
	t.Parallel()
	type stringer struct{ A, B int }
	src := sliceSource{
		cols: []Column{{Name: "v", Type: TypeText}, {Name: "day", Type: TypeDate}},
		rows: [][]any{
			{int(-maxExactInt - 1), time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC)},
			{uint64(maxExactInt + 1), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
			{uint(7), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)},
			{math.NaN(), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
			{float32(0.5), nil},
			{stringer{1, 2}, nil},
			{time.Duration(90) * time.Minute, nil},
		},
	}
	f, _ := export(t, src, Query{Report: Report{Sheet: "S"}}, nil)
	tests := []struct {
		cell string
		typ  excelize.CellType
		raw  string
	}{
		{"A2", excelize.CellTypeInlineString, "-9007199254740993"},
		{"A3", excelize.CellTypeInlineString, "9007199254740993"},
		{"A4", excelize.CellTypeUnset, "7"},
		{"A5", excelize.CellTypeInlineString, "NaN"},
		{"A6", excelize.CellTypeUnset, "0.5"},
		{"A7", excelize.CellTypeInlineString, "{1 2}"},
		{"A8", excelize.CellTypeInlineString, "1h30m0s"},
		// Outside Excel's years 1900 to 9999, a time is text in its column's format.
		{"B2", excelize.CellTypeInlineString, "1899-12-31"},
		{"B3", excelize.CellTypeInlineString, "10000-01-01"},
		{"B4", excelize.CellTypeUnset, "1"},
		{"B5", excelize.CellTypeUnset, "2958465"},
	}
	for _, tt := range tests {
		ct, _ := f.GetCellType("S", tt.cell)
		raw, _ := f.GetCellValue("S", tt.cell, excelize.Options{RawCellValue: true})
		if ct != tt.typ || raw != tt.raw {
			t.Errorf("%s = %q (%v), want %q (%v)", tt.cell, raw, ct, tt.raw, tt.typ)
		}
	}
}

// recordingWriter records the size of every write.
type recordingWriter struct {
	bytes.Buffer
	writes, largest int
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.largest = max(w.largest, len(p))
	return w.Buffer.Write(p)
}

// The package reaches the writer as it is zipped, in small writes: nothing builds the
// whole file in memory first.
func TestWriteXLSXStreamsThePackage(t *testing.T) {
	t.Parallel()
	var w recordingWriter
	if err := writeXLSX(t.Context(), &w, demoSource{}, demoQuery(8000), xlsxOptions{tmpDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if w.Len() < 4*64<<10 || w.largest > 64<<10 || w.writes < w.Len()/(64<<10) {
		t.Fatalf("%d bytes in %d writes, the largest %d: want writes of at most 64 KiB", w.Len(), w.writes, w.largest)
	}
	// Reading every part to its end checks its size and CRC.
	zr, err := zip.NewReader(bytes.NewReader(w.Bytes()), int64(w.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatalf("%s: %v", zf.Name, err)
		}
		rc.Close()
	}
}

// Every temporary file goes, whether the export succeeds or fails at any point.
func TestWriteXLSXLeavesNoTemporaryFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  Source
		w    io.Writer
		ok   bool
	}{
		{"success", demoSource{}, &bytes.Buffer{}, true},
		{"source fails after sheets", &failAfter{n: 700}, &bytes.Buffer{}, false},
		{"writer fails", demoSource{}, failWriter{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := writeXLSX(t.Context(), tt.w, tt.src, demoQuery(1000), xlsxOptions{
				tmpDir:       dir,
				maxSheetRows: 200, // finished sheets are compressed to files too
			})
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v", err)
			}
			if left := dirEntries(t, dir); len(left) > 0 {
				t.Fatalf("left in the temporary directory: %v", left)
			}
		})
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// failAfter streams demo rows and fails after n of them.
type failAfter struct{ n int64 }

func (s *failAfter) Stream(ctx context.Context, q Query, w RowWriter) error {
	rw := &countingRows{RowWriter: w, left: s.n}
	err := demoSource{}.Stream(ctx, q, rw)
	if errors.Is(err, errEnough) {
		return errors.New("connection reset")
	}
	return err
}

var errEnough = errors.New("enough rows")

type countingRows struct {
	RowWriter
	left int64
}

func (c *countingRows) Row(v []any) error {
	if c.left == 0 {
		return errEnough
	}
	c.left--
	return c.RowWriter.Row(v)
}

// A cancel while the writer compresses a finished sheet, or zips the package, stops it
// with "canceled" and leaves nothing behind.
func TestWriteXLSXStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	opt := func(dir string) xlsxOptions { return xlsxOptions{tmpDir: dir, maxSheetRows: 151} }

	t.Run("compressing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The cancel comes with the sheet's last row; the next row starts the next
		// sheet, which first compresses this one.
		src := &cancelAfter{n: 150, cancel: cancel}
		dir := t.TempDir()
		var buf bytes.Buffer
		err := writeXLSX(ctx, &buf, src, demoQuery(1000), opt(dir))
		checkCanceled(t, err)
		if buf.Len() > 0 || len(dirEntries(t, dir)) > 0 {
			t.Fatalf("%d bytes written, %v left behind", buf.Len(), dirEntries(t, dir))
		}
	})
	t.Run("zipping", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := &cancelingWriter{cancel: cancel}
		dir := t.TempDir()
		err := writeXLSX(ctx, w, demoSource{}, demoQuery(5000), opt(dir))
		checkCanceled(t, err)
		if w.writes != 1 || len(dirEntries(t, dir)) > 0 {
			t.Fatalf("%d writes after the cancel, %v left behind", w.writes-1, dirEntries(t, dir))
		}
	})
}

func checkCanceled(t *testing.T, err error) {
	t.Helper()
	var je *jobs.Error
	if !errors.As(err, &je) || je.Code != "canceled" || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %#v, want code canceled", err)
	}
}

// cancelingWriter cancels the export on its first write.
type cancelingWriter struct {
	cancel context.CancelFunc
	writes int
}

func (w *cancelingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.cancel()
	return len(p), nil
}

// cancelAfter streams demo rows and cancels after n of them, carrying on as a source
// that does not check its context would.
type cancelAfter struct {
	n      int64
	cancel context.CancelFunc
}

func (s *cancelAfter) Stream(_ context.Context, q Query, w RowWriter) error {
	return demoSource{}.Stream(context.Background(), q, &cancelRows{RowWriter: w, left: s.n, cancel: s.cancel})
}

type cancelRows struct {
	RowWriter
	left   int64
	cancel context.CancelFunc
}

func (c *cancelRows) Row(v []any) error {
	if c.left--; c.left == 0 {
		c.cancel()
	}
	return c.RowWriter.Row(v)
}

// A column's label and number format size it: a long label widens a short column, and
// a grouped, two-decimal format widens a number beyond its General digits. Columns
// with neither keep the width of their name and values.
func TestWriteXLSXWidthsFitLabelsAndFormats(t *testing.T) {
	t.Parallel()
	src := sliceSource{
		cols: []Column{
			{Name: "n", Type: TypeInt, Label: "Number of orders this month"}, // 27 characters
			{Name: "total", Type: TypeNumber, Format: "#,##0.00"},
			{Name: "plain", Type: TypeNumber},
			{Name: "at", Type: TypeDatetime, Format: "yyyy-mm-dd hh:mm"},
		},
		rows:  [][]any{{int64(3), 1234567.5, 1234567.5, time.Date(2025, 3, 1, 8, 30, 0, 0, time.UTC)}},
		total: -1,
	}
	f, _ := export(t, src, Query{Report: Report{Sheet: "S"}}, nil)
	// label + 4; "1,234,567.50" + 2; "1234567.5" + 2; "2025-03-01 08:30" + 2
	for col, want := range map[string]float64{"A": 31, "B": 14, "C": 11, "D": 18} {
		if got, _ := f.GetColWidth("S", col); got != want {
			t.Errorf("column %s width %v, want %v", col, got, want)
		}
	}
	if v, _ := f.GetCellValue("S", "B2"); v != "1,234,567.50" {
		t.Errorf("B2 shows %q, want 1,234,567.50", v)
	}
}

func TestNumberWidth(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v    float64
		code string
		want int
	}{
		{1234567.5, "#,##0.00", len("1,234,567.50")},
		{-12.25, "#,##0.00", len("-12.25")},
		{0.5, "0", len("1")},
		{7, "000", len("007")},
		{0.125, "0.0%", len("12.5%")},
		{1234, `"$"#,##0`, len("$1,234")},
		{1234, `#,##0.00 "kg"`, len("1,234.00 kg")},
		{1234, `[Red]#,##0.00_)`, len("1,234.00 ")},
		{5, `#,##0.00;[Red]-#,##0.00`, len("5.00")},
	} {
		if got := numberWidth(tt.v, firstSection(tt.code)); got != tt.want {
			t.Errorf("numberWidth(%v, %q) = %d, want %d", tt.v, tt.code, got, tt.want)
		}
	}
}

// Each distinct number format is one style, shared by the columns that use it, in
// every sheet of a rolled-over file; a time column's format replaces the default
// date format.
func TestWriteXLSXFormatStyles(t *testing.T) {
	t.Parallel()
	day := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	src := sliceSource{
		cols: []Column{
			{Name: "a", Type: TypeNumber, Format: "#,##0.00"},
			{Name: "b", Type: TypeInt, Format: "#,##0.00"},
			{Name: "c", Type: TypeDate, Format: "dd.mm.yyyy"},
			{Name: "d", Type: TypeText},
		},
		total: -1,
	}
	for i := range 5 {
		src.rows = append(src.rows, []any{float64(i) + 0.5, int64(i), day.AddDate(0, 0, i), "x"})
	}
	f, _ := exportWith(t, src, Query{Report: Report{Sheet: "S"}}, xlsxOptions{maxSheetRows: 3})
	for _, sheet := range []string{"S", "S (2)", "S (3)"} {
		a, _ := f.GetCellStyle(sheet, "A2")
		b, _ := f.GetCellStyle(sheet, "B2")
		if a == 0 || a != b {
			t.Errorf("%s: A2 style %d, B2 style %d: want one style for one format", sheet, a, b)
		}
		if v, _ := f.GetCellValue(sheet, "C2"); !regexp.MustCompile(`^\d\d\.03\.2025$`).MatchString(v) {
			t.Errorf("%s: C2 shows %q, want dd.mm.yyyy", sheet, v)
		}
		if d, _ := f.GetCellStyle(sheet, "D2"); d != 0 {
			t.Errorf("%s: D2 has style %d, want none", sheet, d)
		}
	}
	if v, _ := f.GetCellValue("S (2)", "B3"); v != "3.00" {
		t.Errorf("B3 of the second sheet shows %q, want 3.00", v)
	}
}
