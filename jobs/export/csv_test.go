package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sheetq/jobs"
)

// python3 returns a Python interpreter ($SHEETQ_PYTHON, python3 on the PATH, or
// /usr/bin/python3); without one the test skips, except in CI. Its csv module is the
// independent reader of the files writeCSV makes.
func python3(t *testing.T) string {
	t.Helper()
	for _, c := range []string{os.Getenv("SHEETQ_PYTHON"), "python3", "/usr/bin/python3"} {
		if c == "" {
			continue
		}
		if path, err := exec.LookPath(c); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3")
	}
	t.Skip("no python3")
	return ""
}

// pyReadCSV reads the file at path with Python's csv module (newline="" as its docs
// require, so that quoted CR and LF stay in their fields; strict, so that a badly
// quoted field is an error) and returns whether the file starts with a UTF-8 BOM, and
// the records.
func pyReadCSV(t *testing.T, path string) (bom bool, records [][]string) {
	t.Helper()
	const script = `
import csv, io, json, sys
raw = open(sys.argv[1], "rb").read()
bom = raw.startswith(b"\xef\xbb\xbf")
text = raw[3:].decode("utf-8") if bom else raw.decode("utf-8")
rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
json.dump({"bom": bom, "rows": rows}, sys.stdout)
`
	out, err := exec.Command(python3(t), "-c", script, path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("python csv: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		BOM  bool
		Rows [][]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("python csv output %q: %v", out, err)
	}
	return got.BOM, got.Rows
}

// csvEdgeRows are values whose csv text is easy to get wrong, with the text each
// must read back as.
func csvEdgeRows() (sliceSource, [][]string) {
	berlin := time.FixedZone("CEST", 2*3600)
	cols := []Column{
		{Name: "text", Type: TypeText, Label: "Text, \"quoted\""},
		{Name: "n", Type: TypeInt},
		{Name: "x", Type: TypeNumber, Label: "Amount (€)"},
		{Name: "ok", Type: TypeBool},
		{Name: "day", Type: TypeDate},
		{Name: "at", Type: TypeDatetime},
		{Name: "raw", Type: TypeText},
	}
	src := sliceSource{cols: cols, total: -1, rows: [][]any{
		{"plain", int64(1), 0.1, true, time.Date(2025, 3, 1, 0, 0, 0, 0, berlin), time.Date(2025, 3, 1, 0, 30, 0, 0, berlin), []byte("bytes")},
		{"a,b", int64(-9007199254740993), 1234567.125, false, time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2024, 2, 29, 23, 59, 59, 123456789, time.UTC), []byte{0xff, 0x00, 0xfe}},
		{`say "hi"`, int64(math.MaxInt64), 1e21, nil, nil, nil, nil},
		{"line\nbreak", uint64(math.MaxUint64), 1e-7, true, nil, nil, ""},
		{"cr\rlf\r\n", int32(7), math.Copysign(0, -1), false, nil, nil, nil},
		{"Grüße 🎉 日本", nil, float32(0.1), nil, nil, nil, nil},
		{"", int64(0), 2.5, nil, nil, nil, nil},
		{" lead and trail ", int64(10), math.MaxFloat64, nil, nil, nil, nil},
		{"bad \xff utf-8", int64(11), 5e-324, nil, nil, nil, nil},
		{`"`, int64(12), 100.0, nil, nil, nil, nil},
	}}
	want := [][]string{
		{`Text, "quoted"`, "n", "Amount (€)", "ok", "day", "at", "raw"},
		{"plain", "1", "0.1", "true", "2025-03-01", "2025-02-28T22:30:00Z", "bytes"},
		{"a,b", "-9007199254740993", "1234567.125", "false", "1999-12-31", "2024-02-29T23:59:59.123456789Z", "/wD+"},
		{`say "hi"`, "9223372036854775807", "1e+21", "", "", "", ""},
		{"line\nbreak", "18446744073709551615", "1e-07", "true", "", "", ""},
		{"cr\rlf\r\n", "7", "-0", "false", "", "", ""},
		{"Grüße 🎉 日本", "", "0.1", "", "", "", ""},
		{"", "0", "2.5", "", "", "", ""},
		{" lead and trail ", "10", "1.7976931348623157e+308", "", "", "", ""},
		{"bad \uFFFD utf-8", "11", "5e-324", "", "", "", ""},
		{`"`, "12", "100", "", "", "", ""},
	}
	return src, want
}

// writeCSVFile runs writeCSV from src into a file and returns its path and the warnings.
func writeCSVFile(t *testing.T, src Source, bom bool) (string, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var warnings []string
	q := Query{Report: Report{ID: "edge", Source: "mem", Sheet: "Edge"}}
	if err := writeCSV(t.Context(), f, src, q, csvOptions{bom: bom, warn: func(m string) { warnings = append(warnings, m) }}); err != nil {
		t.Fatal(err)
	}
	return path, warnings
}

// Python's csv module reads the file back cell for cell: the labels, quotes, commas,
// CR and LF inside fields, unicode, empty fields for nil, exact numbers, dates and UTC
// times; the BOM is there exactly when asked for.
func TestWriteCSVReadBackByPython(t *testing.T) {
	t.Parallel()
	for _, bom := range []bool{false, true} {
		t.Run(fmt.Sprintf("bom=%v", bom), func(t *testing.T) {
			t.Parallel()
			src, want := csvEdgeRows()
			path, warnings := writeCSVFile(t, src, bom)
			gotBOM, got := pyReadCSV(t, path)
			if gotBOM != bom {
				t.Errorf("file starts with a BOM: %v, want %v", gotBOM, bom)
			}
			if len(got) != len(want) {
				t.Fatalf("python read %d records, want %d: %q", len(got), len(want), got)
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("record %d = %q, want %q", i, got[i], want[i])
				}
			}
			// Numbers parse back to the very values written.
			for i, row := range src.rows {
				switch v := row[2].(type) {
				case float64:
					if f, err := strconv.ParseFloat(got[i+1][2], 64); err != nil || f != v {
						t.Errorf("record %d: %q parses as %v, %v; want %v", i+1, got[i+1][2], f, err, v)
					}
				case float32:
					if f, err := strconv.ParseFloat(got[i+1][2], 32); err != nil || float32(f) != v {
						t.Errorf("record %d: %q parses as %v, %v; want %v", i+1, got[i+1][2], f, err, v)
					}
				}
			}
			// Columns are named as the header shows them, as the xlsx writer's warnings do.
			wantWarn := []string{
				`column "Text, \"quoted\"": 1 text value had bytes that are not UTF-8, written as U+FFFD`,
				`column "raw": 1 value was written as base64, not being UTF-8 text`,
			}
			if !slices.Equal(warnings, wantWarn) {
				t.Errorf("warnings = %q, want %q", warnings, wantWarn)
			}
		})
	}
}

// RFC 4180 on the bytes: CRLF after every record, quotes only where a field needs them
// (and around a space at either end), quotes doubled, a lone LF or CR inside a field
// kept as it is, and a record of one empty field written as "" rather than an empty line.
func TestWriteCSVBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  sliceSource
		bom  bool
		want string
	}{
		{sliceSource{cols: []Column{{Name: "a", Type: TypeText}, {Name: "b", Type: TypeInt, Label: "B, total"}},
			rows: [][]any{{"x", int64(1)}, {"y,z", nil}, {"q\"", int64(3)}, {"l\nf", int64(4)}, {"c\rr", int64(5)}, {" s", int64(6)}, {"", nil}}},
			true, "\uFEFFa,\"B, total\"\r\nx,1\r\n\"y,z\",\r\n\"q\"\"\",3\r\n\"l\nf\",4\r\n\"c\rr\",5\r\n\" s\",6\r\n,\r\n"},
		{sliceSource{cols: []Column{{Name: "only", Type: TypeText}}, rows: [][]any{{nil}, {"v"}, {""}}},
			false, "only\r\n\"\"\r\nv\r\n\"\"\r\n"},
	} {
		path, _ := writeCSVFile(t, tc.src, tc.bom)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("file = %q, want %q", got, tc.want)
		}
	}
}

// countSource streams n rows of one int column, without holding them.
type countSource struct{ n int64 }

func (s countSource) Stream(ctx context.Context, _ Query, w RowWriter) error {
	if err := w.Begin([]Column{{Name: "i", Type: TypeInt}}, s.n); err != nil {
		return err
	}
	row := make([]any, 1)
	for i := range s.n {
		if i%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		row[0] = i
		if err := w.Row(row); err != nil {
			return err
		}
	}
	return nil
}

// A csv file has no row limit: past Excel's 1,048,576 rows every row stays in the one
// file, after one header; progress ends at the row count, and the writer yields as the
// xlsx writer does.
func TestWriteCSVNoRowLimit(t *testing.T) {
	t.Parallel()
	const n = 1_048_576 + 10
	var buf bytes.Buffer
	var last, total int64 = -1, -2
	yields := 0
	err := writeCSV(t.Context(), &buf, countSource{n}, Query{}, csvOptions{
		progress: func(rows, tot int64) {
			if rows < last {
				t.Errorf("progress went back from %d to %d", last, rows)
			}
			last, total = rows, tot
		},
		yield: func() { yields++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(buf.Bytes(), []byte("\r\n")); lines != n+1 {
		t.Errorf("%d lines, want %d rows and a header", lines, n)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("\r\n"+strconv.Itoa(n-1)+"\r\n")) {
		t.Errorf("the file does not end with row %d", n-1)
	}
	if last != n || total != n {
		t.Errorf("final progress %d of %d, want %d of %d", last, total, n, n)
	}
	if yields != n/yieldEvery {
		t.Errorf("%d yields, want one every %d rows (%d)", yields, yieldEvery, n/yieldEvery)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A cancel stops the export with "canceled", a write that fails is "io", a source's own
// unmarked error is "upstream", and a source that sends no columns is a permanent error.
func TestWriteCSVErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	codeOf := func(err error) string {
		var je *jobs.Error
		if !errors.As(err, &je) {
			return fmt.Sprintf("unmarked %v", err)
		}
		return je.Code
	}
	if err := writeCSV(ctx, new(bytes.Buffer), countSource{100_000}, Query{}, csvOptions{}); codeOf(err) != "canceled" {
		t.Errorf("canceled export: %v", err)
	}
	if err := writeCSV(t.Context(), failingWriter{}, countSource{100_000}, Query{}, csvOptions{}); codeOf(err) != "io" || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing file: %v", err)
	}
	if err := writeCSV(t.Context(), new(bytes.Buffer), sliceSource{err: errors.New("connection reset")}, Query{Report: Report{Source: "db"}}, csvOptions{}); codeOf(err) != "upstream" {
		t.Errorf("source error: %v", err)
	}
	if err := writeCSV(t.Context(), new(bytes.Buffer), sliceSource{}, Query{}, csvOptions{}); codeOf(err) != "no_columns" {
		t.Errorf("no columns: %v", err)
	}
	bad := sliceSource{cols: []Column{{Name: "a"}, {Name: "b"}}, rows: [][]any{{1}}}
	if err := writeCSV(t.Context(), new(bytes.Buffer), bad, Query{}, csvOptions{}); codeOf(err) != "bad_source" {
		t.Errorf("short row: %v", err)
	}
}

// The file format of a request: xlsx (named or not) is stored as "", csv with or
// without a BOM, with formulas neutralised (named or not, stored as "") or kept; a BOM
// or kept formulas without csv, another format or another csv_formulas are refused;
// each format names its file and content type.
func TestArgsWithFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    FileOptions
		want Args
		ext  string
		err  string
	}{
		{FileOptions{}, Args{}, ".xlsx", ""},
		{FileOptions{Format: "xlsx"}, Args{}, ".xlsx", ""},
		{FileOptions{Format: "csv"}, Args{Format: "csv"}, ".csv", ""},
		{FileOptions{Format: "csv", BOM: true}, Args{Format: "csv", BOM: true}, ".csv", ""},
		{FileOptions{Format: "csv", CSVFormulas: "neutralise"}, Args{Format: "csv"}, ".csv", ""},
		{FileOptions{Format: "csv", BOM: true, CSVFormulas: "keep"}, Args{Format: "csv", BOM: true, CSVFormulas: "keep"}, ".csv", ""},
		{FileOptions{Format: "xlsx", CSVFormulas: "neutralise"}, Args{}, ".xlsx", ""},
		{FileOptions{CSVFormulas: "neutralise"}, Args{}, ".xlsx", ""},
		{FileOptions{Format: "xlsx", BOM: true}, Args{}, "", `"bom" applies to csv files only`},
		{FileOptions{BOM: true}, Args{}, "", `"bom" applies to csv files only`},
		{FileOptions{Format: "xlsx", CSVFormulas: "keep"}, Args{}, "", `"csv_formulas": "keep" applies to csv files only`},
		{FileOptions{CSVFormulas: "keep"}, Args{}, "", `"csv_formulas": "keep" applies to csv files only`},
		{FileOptions{Format: "csv", CSVFormulas: "Keep"}, Args{}, "", `csv_formulas "Keep": want "neutralise" (the default) or "keep"`},
		{FileOptions{Format: "csv", CSVFormulas: "neutralize"}, Args{}, "", `csv_formulas "neutralize": want "neutralise"`},
		{FileOptions{CSVFormulas: "off"}, Args{}, "", `csv_formulas "off": want`},
		{FileOptions{Format: "CSV"}, Args{}, "", `format "CSV": want "xlsx" or "csv"`},
		{FileOptions{Format: "pdf", CSVFormulas: "bad"}, Args{}, "", `format "pdf": want "xlsx" or "csv"`},
	} {
		got, err := Args{}.WithFile(tc.f)
		if tc.err != "" {
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("WithFile(%+v) = %v, want a FormatError saying %s", tc.f, err, tc.err)
			}
			continue
		}
		if err != nil || got.Format != tc.want.Format || got.BOM != tc.want.BOM || got.CSVFormulas != tc.want.CSVFormulas {
			t.Errorf("WithFile(%+v) = %+v, %v; want %+v", tc.f, got, err, tc.want)
		}
		raw, _ := json.Marshal(got)
		if name := (&Kind{}).FileName("id1", raw); name != "id1"+tc.ext {
			t.Errorf("%+v: file name %q, want id1%s", tc.f, name, tc.ext)
		}
	}
	// Args stored before there were formats, and args of another kind, are xlsx.
	for _, raw := range []string{`{"report":"demo","params":{}}`, ``, `{"format":5}`} {
		if name := (&Kind{}).FileName("id1", json.RawMessage(raw)); name != "id1.xlsx" {
			t.Errorf("args %s: file name %q, want id1.xlsx", raw, name)
		}
	}
	if ct := (Args{Format: FormatCSV}).ContentType(); ct != "text/csv; charset=utf-8" {
		t.Errorf("csv content type %q", ct)
	}
}
