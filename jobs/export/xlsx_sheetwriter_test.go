package export

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// The sheet writer (xlsx_cells.go) against the excelize StreamWriter it replaced: the
// same rows give the same row XML, byte for byte, and the same cells when excelize,
// openpyxl (normal and read-only) and LibreOffice read the files back.

// refCells is the old path's conversion of a source value into what excelize's
// StreamWriter.SetRow took (the writer's cell and value methods before issue 43), kept
// here as the reference the new writer is compared with.
type refCells struct {
	x      *xlsxWriter
	styled []excelize.Cell
}

func (r *refCells) cell(i int, v any) any {
	c := r.value(i, v)
	if s := r.x.colStyle[i]; s != 0 && c != nil {
		if _, ok := c.(*excelize.Cell); !ok { // a time has its style already
			r.styled[i] = excelize.Cell{StyleID: s, Value: c}
			return &r.styled[i]
		}
	}
	return c
}

func (r *refCells) value(i int, v any) any {
	switch t := v.(type) {
	case nil, bool, float64, float32, int8, int16, int32, uint8, uint16, uint32:
		return v
	case int64:
		if t > maxExactInt || t < -maxExactInt {
			return strconv.FormatInt(t, 10)
		}
		return v
	case int:
		if t > maxExactInt || t < -maxExactInt {
			return strconv.Itoa(t)
		}
		return v
	case uint64:
		if t > maxExactInt {
			return strconv.FormatUint(t, 10)
		}
		return v
	case uint:
		if t > maxExactInt {
			return strconv.FormatUint(uint64(t), 10)
		}
		return v
	case string:
		s, _ := cutText(t)
		return s
	case []byte:
		return r.value(i, string(t))
	case time.Time:
		date := r.x.cols[i].Type == TypeDate
		if y := t.Year(); y < 1900 || y > 9999 {
			if date {
				return t.Format("2006-01-02")
			}
			return t.Format("2006-01-02 15:04:05")
		}
		style := cmp.Or(r.x.colStyle[i], r.x.styles.datetime)
		if date {
			style = cmp.Or(r.x.colStyle[i], r.x.styles.date)
		}
		r.styled[i] = excelize.Cell{StyleID: style, Value: v}
		return &r.styled[i]
	default:
		return r.value(i, fmt.Sprint(v))
	}
}

// testWriter is an xlsxWriter with cols set, for writing rows without a sheet.
func testWriter(t testing.TB, cols []Column) *xlsxWriter {
	t.Helper()
	x := &xlsxWriter{opt: xlsxOptions{tmpDir: t.TempDir()}.withDefaults(), stop: func() error { return nil }, cut: make([]int64, len(cols))}
	x.tmpDir = x.opt.tmpDir
	if err := x.setColumns(cols); err != nil {
		t.Fatal(err)
	}
	return x
}

// excelizeFile writes the header and rows with excelize's StreamWriter, as the old
// path did, into a workbook of its own with the writer's styles, on "Sheet1".
func excelizeFile(t testing.TB, x *xlsxWriter, rows [][]any) *excelize.File {
	t.Helper()
	f, _, err := newFile(x.tmpDir, x.formats, &x.styles)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	header := make([]any, len(x.cols))
	for i, c := range x.cols {
		name, _ := cutText(headerText(c))
		header[i] = excelize.Cell{StyleID: x.styles.header, Value: name}
	}
	if err := sw.SetRow("A1", header); err != nil {
		t.Fatal(err)
	}
	ref := &refCells{x: x, styled: make([]excelize.Cell, len(x.cols))}
	cells := make([]any, len(x.cols))
	for r, row := range rows {
		for i, v := range row {
			cells[i] = ref.cell(i, v)
		}
		if err := sw.SetRow("A"+strconv.Itoa(r+2), cells); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// excelizeRowsXML is the row XML excelize's StreamWriter writes for rows, numbered
// from 2: what lies between <sheetData> and </sheetData>, less the header row.
func excelizeRowsXML(t testing.TB, x *xlsxWriter, rows [][]any) []byte {
	t.Helper()
	f := excelizeFile(t, x, rows)
	defer f.Close()
	c := &wholeCapture{name: "xl/worksheets/sheet1.xml"}
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return c })
	if _, err := f.WriteToBuffer(); err != nil {
		t.Fatal(err)
	}
	xml := c.buf.Bytes()
	h := bytes.Index(xml, sheetDataOpen)
	k := bytes.LastIndex(xml, []byte("</sheetData>"))
	if h < 0 || k < 0 {
		t.Fatalf("no sheet data in excelize's sheet: %.300s", xml)
	}
	data := xml[h+len(sheetDataOpen) : k]
	j := bytes.Index(data, rowClose)
	return data[j+len(rowClose):]
}

// sheetWriterCols are the columns of the fuzzed rows: every type a source sends, with
// and without number formats.
func sheetWriterCols(format uint8) []Column {
	formats := []string{"#,##0.00", "0.0%", "yyyy-mm-dd hh:mm", `[Red]-"$"#,##0.00;"$"#,##0.00`, "0.00E+00", "@", "# ?/?", `"<&>" 0`}
	return []Column{
		{Name: "text", Type: TypeText},
		{Name: "raw", Type: TypeText},
		{Name: "n", Type: TypeInt},
		{Name: "f", Type: TypeNumber},
		{Name: "f32", Type: TypeNumber},
		{Name: "flag", Type: TypeBool},
		{Name: "day", Type: TypeDate},
		{Name: "at", Type: TypeDatetime},
		{Name: "fmt", Type: TypeNumber, Format: formats[int(format)%len(formats)]},
		{Name: "fmtAt", Type: TypeDatetime, Format: "yyyy-mm-dd hh:mm"},
		{Name: "fmtText", Type: TypeText, Format: "@", Label: "Text & <formatted>"},
		{Name: "i32", Type: TypeInt},
		{Name: "u64", Type: TypeInt},
		{Name: "int", Type: TypeInt, Format: "0"},
		{Name: "u8", Type: TypeInt},
		{Name: "other", Type: TypeText},
		{Name: "null", Type: TypeText},
	}
}

// sheetWriterRows makes three rows of the fuzzer's values: as they are, with the
// columns in mask NULL, and changed (text padded with white space, numbers negated).
func sheetWriterRows(text string, raw []byte, n int64, f float64, flag bool, sec, nsec int64, zone int8, mask uint16) [][]any {
	loc := time.FixedZone("", int(zone)*15*60)
	at := time.Unix(sec, nsec).In(loc)
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	row := func(text string, raw []byte, n int64, f float64, flag bool, at, day time.Time) []any {
		return []any{text, raw, n, f, float32(f), flag, day, at, f, at, text, int32(n), uint64(n), int(n), uint8(n),
			time.Duration(n), nil}
	}
	first := row(text, raw, n, f, flag, at, day)
	masked := row(text, raw, n, f, flag, at, day)
	for i := range masked {
		if mask&(1<<(i%16)) != 0 {
			masked[i] = nil
		}
	}
	changed := row(" "+text+"\n", append([]byte("\t"), raw...), -n, -f, !flag, at.Add(time.Duration(nsec)), day.AddDate(0, 0, int(n%1000)))
	return [][]any{first, masked, changed}
}

// sheetWriterSeed is one set of the fuzzer's arguments.
type sheetWriterSeed struct {
	text   string
	raw    []byte
	n      int64
	f      float64
	flag   bool
	sec    int64
	nsec   int64
	zone   int8
	mask   uint16
	format uint8
}

// sheetWriterSeeds are the edge cases the fuzzer starts from (also in
// testdata/fuzz/FuzzSheetWriter, which go test runs as well): Excel's limits, XML's
// special and invalid characters, Office's _xHHHH_ escapes, numbers that Excel's 15
// digits or doubles cannot hold, and times at the ends of Excel's years.
func sheetWriterSeeds() []sheetWriterSeed {
	long := strings.Repeat("long text ", maxCellChars/10+1) // over the cell limit
	return []sheetWriterSeed{
		{"hello", []byte("world"), 42, 1.5, true, 1715000000, 0, 0, 0, 0},
		{`a & b < c > d " e ' f`, []byte("tab\there\r\nnew line"), -7, 0.1 + 0.2, false, 0, 0, 8, 0x5555, 1},
		{" leading and trailing ", []byte("\n"), 1 << 53, 1e300, true, -2208988800, 0, -20, 0, 2},
		{"ctrl \x00\x01\x08\x0b\x0c\x1f\x7f end", []byte("bad utf-8 \xff\xfe \xc3 \xed\xa0\x80 surrogate"), 1<<53 + 1, math.Copysign(0, -1), false, 253402300799, 999999999, 56, 0, 3},
		{"\uFFFE\uFFFF\uFFFD \U0001F600 emoji", []byte("_x0041_ _x005F_ _x005F_x0041_ _xD800_ _x12G4_ __x0009_"), -(1<<53 + 1), 5e-324, true, 253402300800, 0, 0, 0xAAAA, 4},
		{"=SUM(A1:A2)", []byte("@cmd|' /C calc'!A0"), math.MaxInt64, math.MaxFloat64, false, -2209075200, 1, 0, 0, 5},
		{long, []byte(strings.Repeat("é", maxCellChars+3)), math.MinInt64, math.NaN(), true, -2203891200, 0, 0, 0, 6},
		{strings.Repeat("😀", maxCellChars/2+1), nil, 255, math.Inf(1), false, -2203891201, 0, 0, 0, 7},
		{"", []byte{}, 0, math.Inf(-1), true, 1e12, 0, 4, 0xFFFF, 0},
		{"123456789012345678", []byte("0.30000000000000004"), 123456789012345678, 123456789012345678, true, 951782400, 123456789, -48, 0, 1},
		{"1e5", []byte(" "), 9007199254740992, 1234567890123456.7, false, 1, 0, 0, 0x0100, 2},
		{"_x005F_x0041_", []byte("x_x0041_y"), -1, 0.000001234567890123456789, true, -5000000000, 0, 0, 0, 3},
		{"\r", []byte("\t"), 1000000, float64(float32(0.1)), false, 4102444800, 500000000, 0, 0, 4},
	}
}

// FuzzSheetWriter writes fuzzed rows with the sheet writer and with excelize's
// StreamWriter, as the pipeline did before issue 43, and compares: the row XML, byte
// for byte; then whole files, read back with excelize cell by cell (type, value as
// shown, raw value, style). Its seeds are sheetWriterSeeds, in
// testdata/fuzz/FuzzSheetWriter (TestWriteSheetWriterSeeds writes them there).
func FuzzSheetWriter(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string, raw []byte, n int64, fl float64, flag bool, sec, nsec int64, zone int8, mask uint16, format uint8) {
		cols := sheetWriterCols(format)
		rows := sheetWriterRows(text, raw, n, fl, flag, sec, nsec, zone, mask)
		x := testWriter(t, cols)
		var got []byte
		for r, row := range rows {
			got = x.appendRow(got, r+2, row)
		}
		want := excelizeRowsXML(t, x, rows)
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("row XML differs from excelize's at byte %d:\n got %q\nwant %q", i, got[max(i-80, 0):min(i+120, len(got))], want[max(i-80, 0):min(i+120, len(want))])
		}
		compareWithExcelize(t, cols, rows)
	})
}

// compareWithExcelize writes rows with writeXLSX and with excelize's StreamWriter and
// compares every cell of the two files as excelize reads them back.
func compareWithExcelize(t *testing.T, cols []Column, rows [][]any) {
	t.Helper()
	_, data := exportWith(t, sliceSource{cols: cols, rows: rows, total: -1}, Query{Report: Report{Sheet: "Sheet1"}}, xlsxOptions{})
	got, err := excelize.OpenReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("open the writer's file: %v", err)
	}
	defer got.Close()
	x := testWriter(t, cols)
	ref := excelizeFile(t, x, rows)
	defer ref.Close()
	buf, err := ref.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	want, err := excelize.OpenReader(buf)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for r := 1; r <= len(rows)+1; r++ {
		for c := 1; c <= len(cols); c++ {
			ref, _ := excelize.CoordinatesToCellName(c, r)
			for _, raw := range []bool{false, true} {
				g, gerr := got.GetCellValue("Sheet1", ref, excelize.Options{RawCellValue: raw})
				w, werr := want.GetCellValue("Sheet1", ref, excelize.Options{RawCellValue: raw})
				if g != w || (gerr == nil) != (werr == nil) {
					t.Fatalf("%s (raw %v): %q (%v), excelize's %q (%v)", ref, raw, g, gerr, w, werr)
				}
			}
			gt, _ := got.GetCellType("Sheet1", ref)
			wt, _ := want.GetCellType("Sheet1", ref)
			gs, _ := got.GetCellStyle("Sheet1", ref)
			ws, _ := want.GetCellStyle("Sheet1", ref)
			if gt != wt || gs != ws {
				t.Fatalf("%s: type %v style %d, excelize's type %v style %d", ref, gt, gs, wt, ws)
			}
		}
	}
}

// The seeds' files, and the same rows written by excelize's StreamWriter, read the same
// in openpyxl, loaded normally and read-only: every cell's type, value and number
// format.
func TestOpenpyxlReadsSheetWriterLikeExcelize(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	for k, s := range sheetWriterSeeds() {
		cols := sheetWriterCols(s.format)
		rows := sheetWriterRows(s.text, s.raw, s.n, s.f, s.flag, s.sec, s.nsec, s.zone, s.mask)
		path := writeFileWith(t, sliceSource{cols: cols, rows: rows, total: -1}, Query{Report: Report{Sheet: "Sheet1"}}, xlsxOptions{})
		x := testWriter(t, cols)
		ref := excelizeFile(t, x, rows)
		refPath := filepath.Join(t.TempDir(), "ref.xlsx")
		if err := ref.SaveAs(refPath); err != nil {
			t.Fatal(err)
		}
		ref.Close()
		want := openpyxlCells(t, refPath, "normal")
		for _, mode := range []string{"normal", "read_only"} {
			got := openpyxlCells(t, path, mode)
			if len(got) != len(want) {
				t.Fatalf("seed %d, %s: %d rows, excelize's file %d", k, mode, len(got), len(want))
			}
			for r := range want {
				if g, w := fmt.Sprint(got[r]), fmt.Sprint(want[r]); g != w {
					t.Errorf("seed %d, %s, row %d:\n got %s\nwant %s", k, mode, r+1, g, w)
				}
			}
		}
	}
}

// openpyxlCells reads the first sheet of the file at path with readback.py in mode
// ("normal" or "read_only"): each row's cells, then its number formats.
func openpyxlCells(t *testing.T, path, mode string) [][]rbCell {
	t.Helper()
	sheets := readBackMode(t, path, mode)
	if len(sheets) != 1 {
		t.Fatalf("%s: %d sheets", path, len(sheets))
	}
	sh := sheets[0]
	var out [][]rbCell
	for r, row := range append([][]rbCell{sh.Header}, sh.Rows...) {
		cells := append([]rbCell(nil), row...)
		for _, f := range sh.Formats[r] {
			cells = append(cells, rbCell{Type: "format", Value: f})
		}
		out = append(out, cells)
	}
	return out
}

// The seeds' files, and the same rows written by excelize's StreamWriter, show the
// same in LibreOffice: every cell as it shows in en-US.
func TestLibreOfficeReadsSheetWriterLikeExcelize(t *testing.T) {
	t.Parallel()
	soffice(t)
	dir := t.TempDir()
	var paths []string
	seeds := sheetWriterSeeds()
	for k, s := range seeds {
		cols := sheetWriterCols(s.format)
		rows := sheetWriterRows(s.text, s.raw, s.n, s.f, s.flag, s.sec, s.nsec, s.zone, s.mask)
		path := writeFileWith(t, sliceSource{cols: cols, rows: rows, total: -1}, Query{Report: Report{Sheet: "Sheet1"}}, xlsxOptions{})
		got := filepath.Join(dir, fmt.Sprintf("new%d.xlsx", k))
		if err := os.Rename(path, got); err != nil {
			t.Fatal(err)
		}
		x := testWriter(t, cols)
		ref := excelizeFile(t, x, rows)
		old := filepath.Join(dir, fmt.Sprintf("old%d.xlsx", k))
		if err := ref.SaveAs(old); err != nil {
			t.Fatal(err)
		}
		ref.Close()
		paths = append(paths, got, old)
	}
	sheets := libreOfficeFirstSheets(t, paths) // one LibreOffice run: it starts slowly
	for k := range seeds {
		g, w := sheets[2*k], sheets[2*k+1]
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("seed %d: LibreOffice shows\n%q\nexcelize's file\n%q", k, g, w)
		}
		if len(g) != 4 {
			t.Errorf("seed %d: %d rows, want the header and 3", k, len(g))
		}
	}
}

// libreOfficeFirstSheets is libreOfficeSheets for many files at once, each with one
// sheet, "Sheet1": its records, in the order of paths.
func libreOfficeFirstSheets(t *testing.T, paths []string) [][][]string {
	t.Helper()
	bin := soffice(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	const filter = "csv:Text - txt - csv (StarCalc):44,34,76,1,,1033,false,true,true,false,false,-1"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := []string{"-env:UserInstallation=file://" + filepath.Join(dir, "profile"),
		"--headless", "--norestore", "--convert-to", filter, "--outdir", out}
	cmd := exec.CommandContext(ctx, bin, append(args, paths...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, b)
	}
	var all [][][]string
	for _, path := range paths {
		base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		f, err := os.Open(filepath.Join(out, base+"-Sheet1.csv"))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		all = append(all, recs)
	}
	return all
}

// TestWriteSheetWriterSeeds writes sheetWriterSeeds into testdata/fuzz/FuzzSheetWriter
// in go test's corpus format, when SHEETQ_WRITE_SEEDS=1: run it after changing them.
func TestWriteSheetWriterSeeds(t *testing.T) {
	if os.Getenv("SHEETQ_WRITE_SEEDS") != "1" {
		t.Skip("SHEETQ_WRITE_SEEDS=1 writes the seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSheetWriter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, s := range sheetWriterSeeds() {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		fmt.Fprintf(&b, "string(%q)\n[]byte(%q)\nint64(%d)\nmath.Float64frombits(0x%x)\nbool(%v)\nint64(%d)\nint64(%d)\nint8(%d)\nuint16(%d)\nuint8(%d)\n",
			s.text, s.raw, s.n, math.Float64bits(s.f), s.flag, s.sec, s.nsec, s.zone, s.mask, s.format)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", k)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// benchRows are demo rows, boxed once: the benchmarks below measure the writing alone.
func benchRows(n int) [][]any {
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = make([]any, len(demoColumns))
		demoRow(rows[i], int64(i))
	}
	return rows
}

// BenchmarkSheetRow writes demo rows' XML with the sheet writer: the allocations and
// time of one row on the hot path (compression aside).
func BenchmarkSheetRow(b *testing.B) {
	rows := benchRows(1024)
	x := testWriter(b, demoColumns)
	buf := make([]byte, 0, rowBufSize*2)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		buf = x.appendRow(buf[:0], n+2, rows[n%len(rows)])
		n++
	}
}

// BenchmarkSheetRowExcelize is BenchmarkSheetRow with excelize's StreamWriter.SetRow,
// as the pipeline wrote rows before issue 43: the writer's cell conversions, and per
// 16,384 rows a segment, a file of excelize's own whose sheet XML it wrote out.
func BenchmarkSheetRowExcelize(b *testing.B) {
	rows := benchRows(1024)
	x := testWriter(b, demoColumns)
	ref := &refCells{x: x, styled: make([]excelize.Cell, len(x.cols))}
	cells := make([]any, len(x.cols))
	var (
		f   *excelize.File
		sw  *excelize.StreamWriter
		err error
	)
	end := func() {
		if err := sw.Flush(); err != nil {
			b.Fatal(err)
		}
		f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return &wholeCapture{name: "none"} })
		if _, err := f.WriteToBuffer(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%16384 == 0 {
			if f != nil {
				end()
			}
			if f, _, err = newFile(x.tmpDir, x.formats, &x.styles); err != nil {
				b.Fatal(err)
			}
			if sw, err = f.NewStreamWriter("Sheet1"); err != nil {
				b.Fatal(err)
			}
		}
		for i, v := range rows[n%len(rows)] {
			cells[i] = ref.cell(i, v)
		}
		if err := sw.SetRow("A"+strconv.Itoa(n%16384+2), cells); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.StopTimer()
	end()
}
