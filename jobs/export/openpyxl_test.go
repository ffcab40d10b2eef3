package export

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// These tests read the writer's files back with openpyxl, a reader that shares no code
// with excelize, and compare every cell's type and value with what the source sent.
// CI installs python3-openpyxl; elsewhere the tests skip without it.

var (
	pythonOnce sync.Once
	pythonPath string // an interpreter that imports openpyxl; empty if none
	pythonWhy  string
)

// openpyxl returns a Python interpreter that has openpyxl: $SHEETQ_PYTHON, python3 on
// the PATH, or the system's /usr/bin/python3 (where apt puts python3-openpyxl when the
// PATH's python3 is another one). Without one the test skips, except in CI.
func openpyxl(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() {
		var tried []string
		for _, c := range []string{os.Getenv("SHEETQ_PYTHON"), "python3", "/usr/bin/python3"} {
			if c == "" {
				continue
			}
			path, err := exec.LookPath(c)
			if err != nil {
				tried = append(tried, c+": not found")
				continue
			}
			if out, err := exec.Command(path, "-c", "import openpyxl").CombinedOutput(); err != nil {
				tried = append(tried, fmt.Sprintf("%s: %v %s", path, err, bytes.TrimSpace(out)))
				continue
			}
			pythonPath = path
			return
		}
		pythonWhy = strings.Join(tried, "; ")
	})
	if pythonPath == "" {
		msg := "no python3 with openpyxl (apt-get install python3-openpyxl): " + pythonWhy
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return pythonPath
}

// rbCell is one cell as readback.py reports it.
type rbCell struct {
	Type  string
	Value any // string, bool, json.Number or nil
}

func (c *rbCell) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("cell %s: want [type, value]", b)
	}
	if err := json.Unmarshal(pair[0], &c.Type); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(pair[1]))
	dec.UseNumber()
	return dec.Decode(&c.Value)
}

func (c rbCell) String() string { return fmt.Sprintf("%s %#v", c.Type, c.Value) }

type rbSheet struct {
	Name string `json:"name"`
	// MaxRow and MaxColumn are what the sheet's dimension declares.
	MaxRow    int        `json:"max_row"`
	MaxColumn int        `json:"max_column"`
	Header    []rbCell   `json:"header"`
	Rows      [][]rbCell `json:"rows"`
	// Formats are the number formats of the header's cells, then of each row's.
	Formats [][]string `json:"formats"`
}

// rbProperties are a file's document properties as openpyxl reads them (the times
// without a zone), and docProps/app.xml's application.
type rbProperties struct {
	Title       string `json:"title"`
	Creator     string `json:"creator"`
	Created     string `json:"created"`
	Modified    string `json:"modified"`
	Application string `json:"application"`
}

// readBack runs readback.py on the file at path.
func readBack(t *testing.T, path string) []rbSheet {
	t.Helper()
	sheets, _ := readBackAll(t, path)
	return sheets
}

// readBackAll is readBack with the document properties.
func readBackAll(t *testing.T, path string) ([]rbSheet, rbProperties) {
	t.Helper()
	return readBackWith(t, path, "read_only")
}

// readBackMode is readBack with openpyxl loading the file in mode: "read_only" (the
// streaming reader, as readBack) or "normal" (the whole workbook in memory).
func readBackMode(t *testing.T, path, mode string) []rbSheet {
	t.Helper()
	sheets, _ := readBackWith(t, path, mode)
	return sheets
}

func readBackWith(t *testing.T, path, mode string) ([]rbSheet, rbProperties) {
	t.Helper()
	py := openpyxl(t)
	cmd := exec.Command(py, filepath.Join("testdata", "readback.py"), path, mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("readback.py %s: %v\n%s", path, err, stderr.String())
	}
	var doc struct {
		Properties rbProperties `json:"properties"`
		Sheets     []rbSheet    `json:"sheets"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("readback.py output: %v\n%.2000s", err, out)
	}
	return doc.Sheets, doc.Properties
}

// assertReadbackMatches reads the xlsx at path with openpyxl and checks it holds
// exactly want: want[0] is the header, each entry a column name (string) or a Column
// (whose Type says how a time outside Excel's years shows as text, whose Label is the
// header and whose Format the cells' number format); want[1:] are the data rows as the
// source sent them. Every sheet must declare its real size in its dimension and start
// with the header, and the sheets' data rows, in order, must be want[1:], cell by
// cell: type, value and number format.
func assertReadbackMatches(t *testing.T, path string, want [][]any) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("assertReadbackMatches: want has no header")
	}
	cols := make([]Column, len(want[0]))
	for i, h := range want[0] {
		switch h := h.(type) {
		case Column:
			cols[i] = h
		case string:
			cols[i] = Column{Name: h, Type: TypeDatetime}
		default:
			t.Fatalf("assertReadbackMatches: header %d is %T, want a string or a Column", i, h)
		}
	}
	sheets := readBack(t, path)
	if len(sheets) == 0 {
		t.Fatalf("%s: no sheets", path)
	}
	row := 0 // index into want[1:]
	failures := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if failures++; failures >= 10 {
			t.Fatalf("too many differences")
		}
	}
	for _, sh := range sheets {
		// Read-only openpyxl reads what the dimension declares: a sheet that declared
		// less loses rows and cells (and fails below), one that declared more has them.
		if sh.MaxRow != len(sh.Rows)+1 || sh.MaxColumn != len(cols) {
			fail("sheet %q declares %d rows and %d columns; it has %d rows, header included, and %d columns",
				sh.Name, sh.MaxRow, sh.MaxColumn, len(sh.Rows)+1, len(cols))
		}
		if len(sh.Header) != len(cols) {
			t.Fatalf("sheet %q: header has %d cells, want %d: %v", sh.Name, len(sh.Header), len(cols), sh.Header)
		}
		for i, c := range sh.Header {
			name, _ := cutText(cmp.Or(cols[i].Label, cols[i].Name)) // not headerText: the test would agree with any bug in it
			if c.Type != "s" || c.Value != name {
				fail("sheet %q header %s: %v, want s %q", sh.Name, colName(i+1), c, name)
			}
		}
		if len(sh.Formats) != len(sh.Rows)+1 {
			t.Fatalf("sheet %q: number formats of %d rows, want %d", sh.Name, len(sh.Formats), len(sh.Rows)+1)
		}
		for r, cells := range sh.Rows {
			if row+1 >= len(want) {
				t.Fatalf("sheet %q row %d: more rows than the source's %d", sh.Name, r+2, len(want)-1)
			}
			src := want[row+1]
			row++
			if len(cells) != len(cols) || len(src) != len(cols) {
				t.Fatalf("sheet %q row %d: %d cells read, %d sent, %d columns", sh.Name, r+2, len(cells), len(src), len(cols))
			}
			for i, v := range src {
				if msg := matchCell(cells[i], v, cols[i].Type); msg != "" {
					fail("sheet %q %s%d: read %v, sent %#v: %s", sh.Name, colName(i+1), r+2, cells[i], v, msg)
				}
				if got, want := sh.Formats[r+1][i], expectFormat(v, cols[i]); got != want {
					fail("sheet %q %s%d: number format %q, want %q", sh.Name, colName(i+1), r+2, got, want)
				}
			}
		}
	}
	if row != len(want)-1 {
		t.Fatalf("%d data rows read, the source sent %d", row, len(want)-1)
	}
}

// matchCell says how got differs from what the writer should make of the source value
// v in a column of type typ, or "" if it does not.
func matchCell(got rbCell, v any, typ Type) string {
	wantType, wantVal := expectCell(v, typ)
	if got.Type != wantType {
		return "want type " + wantType
	}
	switch w := wantVal.(type) {
	case nil:
		if got.Value != nil {
			return "want no value"
		}
	case bool, string:
		if got.Value != w {
			return fmt.Sprintf("want %#v", w)
		}
	case int64:
		n, ok := got.Value.(json.Number)
		if !ok || n.String() != strconv.FormatInt(w, 10) {
			return fmt.Sprintf("want the integer %d", w)
		}
	case float64:
		n, ok := got.Value.(json.Number)
		f, err := n.Float64()
		// excelize writes 15 significant digits, as Excel keeps them.
		if !ok || err != nil || math.Abs(f-w) > 1e-14*math.Abs(w) {
			return fmt.Sprintf("want %v", w)
		}
	case time.Time:
		s, _ := got.Value.(string)
		d, err := time.Parse("2006-01-02T15:04:05.999999", s)
		// openpyxl reads a date's serial number to the millisecond.
		if err != nil || d.Sub(w).Abs() > time.Millisecond {
			return fmt.Sprintf("want %s", w.Format("2006-01-02T15:04:05.000"))
		}
	default:
		return fmt.Sprintf("no expectation for %T", wantVal)
	}
	return ""
}

// expectCell is how the writer stores the source value v of a column of type typ, as
// readback.py reports it: a type and a value that is nil, bool, string, int64,
// float64, or a time.Time (the wall clock, in UTC) for a date.
func expectCell(v any, typ Type) (string, any) {
	switch v := v.(type) {
	case nil:
		return "empty", nil
	case bool:
		return "b", v
	case int:
		return expectCell(int64(v), typ)
	case int8, int16, int32, uint8, uint16, uint32:
		n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
		return "n", n
	case uint:
		return expectCell(uint64(v), typ)
	case uint64:
		if v > maxExactInt {
			return "s", strconv.FormatUint(v, 10)
		}
		return "n", int64(v)
	case int64:
		if v > maxExactInt || v < -maxExactInt {
			return "s", strconv.FormatInt(v, 10)
		}
		return "n", v
	case float32:
		return expectCell(float64(v), typ)
	case float64:
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return "s", fmt.Sprint(v)
		case v == math.Trunc(v) && math.Abs(v) < 1e15:
			return "n", int64(v) // written without a fraction, read back as an int
		}
		return "n", v
	case []byte:
		return expectCell(string(v), typ)
	case string:
		s, _ := cutText(v)
		// XML 1.0 cannot carry most control characters; the encoder writes U+FFFD.
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r != utf8.RuneError && (r < 0xD800 || r > 0xDFFF) && r != 0xFFFE && r != 0xFFFF {
				return r
			}
			return '\uFFFD'
		}, s)
		return "s", s
	case time.Time:
		if y := v.Year(); y < 1900 || y > 9999 {
			if typ == TypeDate {
				return "s", v.Format("2006-01-02")
			}
			return "s", v.Format("2006-01-02 15:04:05")
		}
		return "d", time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
	default:
		s, _ := cutText(fmt.Sprint(v))
		return "s", s
	}
}

// expectFormat is the number format openpyxl reads for the source value v in column
// c: the column's Format, else the writer's default for a date, else General. An empty
// cell is not written, so it has none.
func expectFormat(v any, c Column) string {
	switch v := v.(type) {
	case nil:
		return "General"
	case time.Time:
		if y := v.Year(); c.Format == "" && y >= 1900 && y <= 9999 {
			if c.Type == TypeDate {
				return "yyyy-mm-dd"
			}
			return "yyyy-mm-dd hh:mm:ss"
		}
	}
	return cmp.Or(c.Format, "General")
}

// sourceRows runs src's query and returns what it sends: the columns as the header,
// then every row, copied (a source may reuse its row slice).
func sourceRows(t *testing.T, src Source, q Query) [][]any {
	t.Helper()
	rc := &rowCollector{}
	if err := src.Stream(t.Context(), q, rc); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return rc.rows
}

// rowCollector is a RowWriter that keeps everything it gets.
type rowCollector struct{ rows [][]any }

func (c *rowCollector) Begin(cols []Column, _ int64) error {
	header := make([]any, len(cols))
	for i, col := range cols {
		header[i] = col
	}
	c.rows = append(c.rows, header)
	return nil
}

func (c *rowCollector) Row(values []any) error {
	row := slices.Clone(values)
	for i, v := range row {
		if b, ok := v.([]byte); ok {
			row[i] = slices.Clone(b)
		}
	}
	c.rows = append(c.rows, row)
	return nil
}

// writeFile runs writeXLSX into a file in a new temporary directory.
func writeFile(t *testing.T, src Source, q Query) string {
	t.Helper()
	return writeFileWith(t, src, q, xlsxOptions{})
}

// writeFileWith is writeFile with options (opt.tmpDir is set here).
func writeFileWith(t *testing.T, src Source, q Query, opt xlsxOptions) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.xlsx")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opt.tmpDir = filepath.Join(dir, "tmp")
	if err := writeXLSX(context.WithoutCancel(t.Context()), f, src, q, opt); err != nil {
		t.Fatalf("writeXLSX: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenpyxlReadsDemo(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	q := demoQuery(1500)
	assertReadbackMatches(t, writeFile(t, demoSource{}, q), sourceRows(t, demoSource{}, q))
}

func TestOpenpyxlReadsSplitSheets(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	q := demoQuery(1000)
	// 1000 rows: 399 + 399 + 202, the header on each sheet
	path := writeFileWith(t, demoSource{}, q, xlsxOptions{maxSheetRows: 400})
	if sheets := readBack(t, path); len(sheets) != 3 || sheets[2].Name != "Demo (3)" || len(sheets[2].Rows) != 202 {
		t.Fatalf("want 3 sheets, the last Demo (3) with 202 rows")
	}
	assertReadbackMatches(t, path, sourceRows(t, demoSource{}, q))
}

// edgeRows are values that a spreadsheet gets wrong easily.
func edgeRows() sliceSource {
	long := strings.Repeat("0123456789", 4000) // 40,000 characters
	return sliceSource{
		cols: []Column{
			{Name: "text", Type: TypeText}, {Name: "int", Type: TypeInt}, {Name: "number", Type: TypeNumber},
			{Name: "when", Type: TypeDatetime}, {Name: "day", Type: TypeDate}, {Name: "flag", Type: TypeBool},
		},
		rows: [][]any{
			{"=1+1", int64(maxExactInt), 0.1, time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), true},
			{"+SUM(A1:A9)", int64(maxExactInt + 1), -1.5e-300, time.Date(2024, 5, 6, 7, 8, 9, 500_000_000, time.FixedZone("CEST", 7200)), time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC), false},
			{"-2+3", int64(-maxExactInt - 1), 1e300, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC), nil},
			{"@SUM(1)", uint64(math.MaxUint64), math.NaN(), time.Date(1850, 6, 1, 12, 0, 0, 0, time.UTC), time.Date(1900, 2, 28, 0, 0, 0, 0, time.UTC), nil},
			{`=HYPERLINK("http://example.invalid","click")`, int32(-7), math.Inf(-1), nil, nil, nil},
			{"=cmd|' /C calc'!A0", uint8(255), 123456789.123456789, time.Time{}, time.Date(2038, 1, 19, 0, 0, 0, 0, time.UTC), true},
			{long, int64(0), 0.0, nil, nil, nil},
			{"😀" + long, nil, nil, nil, nil, nil},
			{"  spaces kept  ", int(42), float32(2.5), nil, nil, nil},
			{"line one\nline two\r\nline three\ttab", int16(3), 3.0, nil, nil, nil},
			{"ctrl \x01\x07 and <tags> & \"quotes\" 'and' ]]>", int64(1), 1.0 / 3, nil, nil, nil},
			{"ünïcödé 日本語 עברית", []byte("bytes"), nil, nil, nil, nil},
			{"", nil, nil, nil, nil, nil},
		},
		total: -1,
	}
}

func TestOpenpyxlReadsEdgeValues(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	src := edgeRows()
	q := Query{Report: Report{Source: "mem", Sheet: "Edge"}}
	assertReadbackMatches(t, writeFile(t, src, q), sourceRows(t, src, q))
}

// labelledRows are columns with header labels and number formats, as a report's column
// lines make them, and columns with neither, which keep the writer's defaults.
func labelledRows(n int) sliceSource {
	src := sliceSource{
		cols: []Column{
			{Name: "id", Type: TypeInt},
			{Name: "customer", Type: TypeText, Label: "Customer name"},
			{Name: "unit_price", Type: TypeNumber, Label: "Unit price", Format: "#,##0.00"},
			{Name: "created_at", Type: TypeDatetime, Label: "Created", Format: "yyyy-mm-dd hh:mm"},
			{Name: "day", Type: TypeDate},
			{Name: "share", Type: TypeNumber, Format: "0.0%"},
			{Name: "qty", Type: TypeInt, Label: "Quantity", Format: "#,##0.00"}, // a format shared with unit_price
			{Name: "at", Type: TypeDatetime},
		},
		total: -1,
	}
	start := time.Date(2025, 3, 1, 8, 30, 0, 0, time.UTC)
	for i := range n {
		row := []any{int64(i + 1), fmt.Sprintf("customer %d", i), 1133.5 + float64(i)*1000.25,
			start.Add(time.Duration(i) * 90 * time.Minute), start.AddDate(0, 0, i), float64(i) / 40,
			int64(i * 1500), start.Add(time.Duration(i) * time.Second)}
		if i%7 == 3 { // empty cells in formatted columns stay empty
			row[2], row[3], row[6] = nil, nil, nil
		}
		src.rows = append(src.rows, row)
	}
	return src
}

// A streaming reader (openpyxl read-only, no reset_dimensions) sees every sheet of a
// rolled-over file whole, the columns' labels and number formats, and the export's
// document properties.
func TestOpenpyxlReadOnlySeesSizesLabelsFormatsAndProperties(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	src := labelledRows(25)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))
	q := Query{Report: Report{ID: "orders", Title: "Orders by month", Source: "mem", Sheet: "Orders"}, Time: at}
	// 25 rows, 9 per sheet under the header: 9 + 9 + 7 on three sheets
	path := writeFileWith(t, src, q, xlsxOptions{maxSheetRows: 10, version: "1.2.3 (abc, 2026-03-01)"})
	sheets, props := readBackAll(t, path)
	var got []string
	for _, sh := range sheets {
		got = append(got, fmt.Sprintf("%s %dx%d", sh.Name, sh.MaxRow, sh.MaxColumn))
	}
	if want := []string{"Orders 10x8", "Orders (2) 10x8", "Orders (3) 8x8"}; !slices.Equal(got, want) {
		t.Errorf("sheets %q, want %q", got, want)
	}
	assertReadbackMatches(t, path, sourceRows(t, src, q))
	want := rbProperties{
		Title: "Orders by month", Creator: "sheetq",
		Created: "2026-03-04T04:06:07", Modified: "2026-03-04T04:06:07", // UTC
		Application: "sheetq 1.2.3 (abc, 2026-03-01)",
	}
	if props != want {
		t.Errorf("properties %+v, want %+v", props, want)
	}
}
