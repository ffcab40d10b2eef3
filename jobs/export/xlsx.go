package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
)

// maxSheetRows is how many rows, header included, a sheet takes before the writer
// starts the next one: Excel's limit. Tests lower it to see the split.
var maxSheetRows = excelize.TotalRows

// widthSample is how many rows are held back to size the columns: a stream writer
// accepts column widths only before its first row.
const widthSample = 100

// Column widths, in Excel's units (about one digit of the default font each).
const (
	minColWidth = 6
	maxColWidth = 60
)

// writeXLSX streams q's rows from src into an .xlsx workbook and writes it to w.
// progress gets the running row count and the total (-1 while unknown). Errors are
// *jobs.Error: the source's own, "upstream" for the source's unmarked ones, "io" for writing.
func writeXLSX(ctx context.Context, w io.Writer, tmpDir string, src Source, q Query, progress func(rows, total int64)) error {
	f := excelize.NewFile(excelize.Options{TmpDir: tmpDir})
	defer f.Close() // removes the stream writer's spill files
	x, err := newXLSXWriter(f, q.Report.Sheet, progress)
	if err != nil {
		return err
	}
	if err := src.Stream(ctx, q, x); err != nil {
		var je *jobs.Error
		if errors.As(err, &je) {
			return err
		}
		return jobs.Retryable("upstream", fmt.Errorf("source %s: %w", q.Report.Source, err))
	}
	if err := x.finish(); err != nil {
		return err
	}
	// The whole zip is built in memory first; fine for now, a later writer streams it.
	if _, err := f.WriteTo(w); err != nil {
		return jobs.Retryable("io", fmt.Errorf("write xlsx: %w", err))
	}
	return nil
}

// xlsxWriter is the RowWriter behind writeXLSX. It holds back the first rows to size
// the columns, then streams, starting a new sheet (with the header again) at maxSheetRows.
type xlsxWriter struct {
	f        *excelize.File
	base     string
	progress func(rows, total int64)

	headerStyle, dateStyle, datetimeStyle int

	cols   []Column
	total  int64
	rows   int64   // data rows received
	sample [][]any // cells held back until the widths are known
	widths []float64

	sw       *excelize.StreamWriter // nil until the first sheet starts
	sheets   int
	sheetRow int   // last row written on the current sheet
	cells    []any // reused for each row
}

func newXLSXWriter(f *excelize.File, sheet string, progress func(rows, total int64)) (*xlsxWriter, error) {
	if progress == nil {
		progress = func(int64, int64) {}
	}
	x := &xlsxWriter{f: f, base: sheet, progress: progress}
	var err error
	if x.headerStyle, err = f.NewStyle(&excelize.Style{
		Font:   &excelize.Font{Bold: true},
		Fill:   excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"E8EEF5"}},
		Border: []excelize.Border{{Type: "bottom", Color: "8A99AD", Style: 1}},
	}); err != nil {
		return nil, fmt.Errorf("header style: %w", err)
	}
	if x.dateStyle, err = f.NewStyle(&excelize.Style{CustomNumFmt: ptr("yyyy-mm-dd")}); err != nil {
		return nil, fmt.Errorf("date style: %w", err)
	}
	if x.datetimeStyle, err = f.NewStyle(&excelize.Style{CustomNumFmt: ptr("yyyy-mm-dd hh:mm:ss")}); err != nil {
		return nil, fmt.Errorf("datetime style: %w", err)
	}
	return x, nil
}

// Begin implements RowWriter.
func (x *xlsxWriter) Begin(cols []Column, total int64) error {
	switch {
	case x.cols != nil:
		return jobs.Permanentf("bad_source", "source began twice")
	case len(cols) == 0:
		return jobs.Permanentf("no_columns", "the query returns no columns")
	case len(cols) > excelize.MaxColumns:
		return jobs.Permanentf("too_many_columns", "the query returns %d columns; a sheet holds %d", len(cols), excelize.MaxColumns)
	}
	x.cols, x.total = cols, total
	x.widths = make([]float64, len(cols))
	for i, c := range cols {
		// Room for the bold name and the filter button.
		x.widths[i] = float64(utf8.RuneCountInString(c.Name) + 4)
	}
	x.cells = make([]any, len(cols))
	x.progress(0, total)
	return nil
}

// Row implements RowWriter.
func (x *xlsxWriter) Row(values []any) error {
	if len(values) != len(x.cols) {
		return jobs.Permanentf("bad_source", "row %d has %d values for %d columns", x.rows+1, len(values), len(x.cols))
	}
	x.rows++
	if x.sw == nil && len(x.sample) < widthSample {
		cells := make([]any, len(values))
		for i, v := range values {
			x.widths[i] = max(x.widths[i], float64(textWidth(v, x.cols[i].Type)+2))
			cells[i] = x.cell(v, x.cols[i].Type)
		}
		x.sample = append(x.sample, cells)
		x.progress(x.rows, x.total)
		return nil
	}
	if err := x.flushSample(); err != nil {
		return err
	}
	for i, v := range values {
		x.cells[i] = x.cell(v, x.cols[i].Type)
	}
	if err := x.writeRow(x.cells); err != nil {
		return err
	}
	x.progress(x.rows, x.total)
	return nil
}

// finish writes what is held back and closes the last sheet.
func (x *xlsxWriter) finish() error {
	if x.cols == nil {
		return jobs.Permanentf("no_columns", "the source sent no columns")
	}
	if err := x.flushSample(); err != nil {
		return err
	}
	if err := x.closeSheet(); err != nil {
		return err
	}
	x.progress(x.rows, x.rows)
	return nil
}

// flushSample starts the first sheet, now that the widths are known, and writes the
// rows held back for them.
func (x *xlsxWriter) flushSample() error {
	if x.sw != nil {
		return nil
	}
	if err := x.nextSheet(); err != nil {
		return err
	}
	for _, cells := range x.sample {
		if err := x.writeRow(cells); err != nil {
			return err
		}
	}
	x.sample = nil
	return nil
}

func (x *xlsxWriter) writeRow(cells []any) error {
	if x.sheetRow >= max(maxSheetRows, 2) {
		if err := x.nextSheet(); err != nil {
			return err
		}
	}
	x.sheetRow++
	if err := x.sw.SetRow("A"+strconv.Itoa(x.sheetRow), cells); err != nil {
		return jobs.Retryable("io", fmt.Errorf("write row %d: %w", x.rows, err))
	}
	return nil
}

// nextSheet closes the current sheet and starts the next with widths, a frozen header
// row and the header.
func (x *xlsxWriter) nextSheet() error {
	if err := x.closeSheet(); err != nil {
		return err
	}
	x.sheets++
	name := sheetName(x.base, x.sheets)
	var err error
	if x.sheets == 1 {
		err = x.f.SetSheetName(x.f.GetSheetName(0), name) // reuse the new file's "Sheet1"
	} else {
		_, err = x.f.NewSheet(name)
	}
	if err != nil {
		return fmt.Errorf("add sheet %q: %w", name, err)
	}
	if x.sw, err = x.f.NewStreamWriter(name); err != nil {
		return fmt.Errorf("stream sheet %q: %w", name, err)
	}
	// Backwards, because excelize puts each new <col> first and Excel wants them in order.
	for i := len(x.widths) - 1; i >= 0; i-- {
		if err := x.sw.SetColWidth(i+1, i+1, min(max(x.widths[i], minColWidth), maxColWidth)); err != nil {
			return fmt.Errorf("column width: %w", err)
		}
	}
	if err := x.sw.SetPanes(&excelize.Panes{
		Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft",
	}); err != nil {
		return fmt.Errorf("freeze header: %w", err)
	}
	header := make([]any, len(x.cols))
	for i, c := range x.cols {
		header[i] = excelize.Cell{StyleID: x.headerStyle, Value: c.Name}
	}
	x.sheetRow = 1
	if err := x.sw.SetRow("A1", header); err != nil {
		return jobs.Retryable("io", fmt.Errorf("write header: %w", err))
	}
	return nil
}

// closeSheet adds the autofilter over the sheet's rows and flushes it.
func (x *xlsxWriter) closeSheet() error {
	if x.sw == nil {
		return nil
	}
	// AutoFilter must come before Flush: it edits the worksheet the stream writer
	// serialises after the rows.
	ref := "A1:" + colName(len(x.cols)) + strconv.Itoa(x.sheetRow)
	if err := x.f.AutoFilter(x.sw.Sheet, ref, nil); err != nil {
		return fmt.Errorf("autofilter: %w", err)
	}
	if err := x.sw.Flush(); err != nil {
		return jobs.Retryable("io", fmt.Errorf("flush sheet %q: %w", x.sw.Sheet, err))
	}
	x.sw = nil
	return nil
}

// cell converts a source value into what the stream writer should store.
func (x *xlsxWriter) cell(v any, t Type) any {
	switch v := v.(type) {
	case time.Time:
		style := x.datetimeStyle
		if t == TypeDate {
			style = x.dateStyle
		}
		return excelize.Cell{StyleID: style, Value: v}
	case []byte:
		return string(v)
	case int64:
		// Excel keeps numbers as doubles; text keeps every digit of a large id.
		if v > maxExactInt || v < -maxExactInt {
			return strconv.FormatInt(v, 10)
		}
	}
	return v
}

// textWidth estimates how many characters v takes when shown.
func textWidth(v any, t Type) int {
	switch v := v.(type) {
	case nil:
		return 0
	case string:
		w := 0
		for line := range strings.Lines(v) {
			w = max(w, utf8.RuneCountInString(line))
		}
		return w
	case []byte:
		return utf8.RuneCount(v)
	case time.Time:
		if t == TypeDate {
			return len("2006-01-02")
		}
		return len("2006-01-02 15:04:05")
	case bool:
		return len("FALSE")
	case float64:
		// Excel's General format shows at most 11 characters.
		return min(len(strconv.FormatFloat(v, 'f', -1, 64)), 11)
	default:
		return len(fmt.Sprint(v))
	}
}

// sheetName makes a valid, unique sheet name from base: "Demo", "Demo (2)", ...
func sheetName(base string, n int) string {
	base = strings.Map(func(r rune) rune {
		if strings.ContainsRune(`:\/?*[]`, r) {
			return '_'
		}
		return r
	}, base)
	base = strings.Trim(base, "' ")
	if base == "" {
		base = "Sheet"
	}
	suffix := ""
	if n > 1 {
		suffix = fmt.Sprintf(" (%d)", n)
	}
	// Excel counts the 31-character limit in UTF-16 units.
	for len(utf16.Encode([]rune(base)))+len(suffix) > excelize.MaxSheetNameLength {
		_, size := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-size]
	}
	return strings.TrimRight(base, "' ") + suffix
}

func colName(n int) string {
	name, _ := excelize.ColumnNumberToName(n) // n is within 1..MaxColumns, checked in Begin
	return name
}

func ptr[T any](v T) *T { return &v }
