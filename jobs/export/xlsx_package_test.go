package export

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// localHeaders returns the "version needed to extract" of each local file header in
// a zip, by entry name, walking the headers from the start of the file.
func localHeaders(t *testing.T, data []byte) map[string]uint16 {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint16{}
	for _, f := range zr.File {
		h, err := localHeader(data, f)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out[f.Name] = binary.LittleEndian.Uint16(h[4:])
	}
	return out
}

func TestWriteXLSXZip64Parts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		threshold int64
		version   uint16 // of the sheet parts, in both headers
	}{
		{"below 4 GiB", 0, 20}, // the default: math.MaxUint32
		// A part this size would need ZIP64: it says so in both headers, with its sizes
		// in a data descriptor after the data.
		{"from the threshold", 1, 45},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, data := exportWith(t, demoSource{}, demoQuery(700), xlsxOptions{maxSheetRows: 300, zip64Threshold: tt.threshold})
			local := localHeaders(t, data)
			zr, _ := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			sheets := 0
			for _, zf := range zr.File {
				if !strings.HasPrefix(zf.Name, "xl/worksheets/sheet") {
					continue
				}
				sheets++
				descriptor := zf.Flags&0x8 != 0
				if zf.ReaderVersion != tt.version || local[zf.Name] != tt.version || descriptor != (tt.version == 45) {
					t.Errorf("%s: version %d in the central directory, %d in the local header, data descriptor %v",
						zf.Name, zf.ReaderVersion, local[zf.Name], descriptor)
				}
				rc, err := zf.Open()
				if err != nil {
					t.Fatal(err)
				}
				// Reading to the end checks the CRC and the size.
				if _, err := io.Copy(io.Discard, rc); err != nil {
					t.Fatalf("%s: %v", zf.Name, err)
				}
				rc.Close()
			}
			if sheets != 3 {
				t.Fatalf("%d sheet parts, want 3", sheets)
			}
			rows, err := f.GetRows("Demo (3)")
			if err != nil || len(rows) != 700-2*299+1 || rows[len(rows)-1][0] != "700" {
				t.Fatalf("last sheet: %d rows (%v)", len(rows), err)
			}
			if tt.version == 45 {
				path := filepath.Join(t.TempDir(), "zip64.xlsx")
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				assertReadbackMatches(t, path, sourceRows(t, demoSource{}, demoQuery(700)))
			}
		})
	}
}

// Sheets are written in files of their own and put together at the end: the workbook
// must still list them in order with their filters, and only the first is selected.
func TestWriteXLSXAssemblesSheets(t *testing.T) {
	t.Parallel()
	q := demoQuery(250)
	q.Report.Sheet = "Bob's orders"
	f, data := exportWith(t, demoSource{}, q, xlsxOptions{maxSheetRows: 100})
	want := []string{"Bob’s orders", "Bob’s orders (2)", "Bob’s orders (3)"}
	if got := f.GetSheetList(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("sheets = %q, want %q", got, want)
	}
	if f.GetActiveSheetIndex() != 0 {
		t.Errorf("active sheet %d, want the first", f.GetActiveSheetIndex())
	}
	for i := range want {
		x := sheetXML(t, data, i+1)
		selected := strings.Contains(x, `tabSelected="1"`) || strings.Contains(x, `tabSelected="true"`)
		if selected != (i == 0) {
			t.Errorf("sheet %d selected: %v; Excel would open the sheets grouped", i+1, selected)
		}
	}
	var wb struct {
		Names []struct {
			Name  string `xml:"name,attr"`
			Sheet int    `xml:"localSheetId,attr"`
			Ref   string `xml:",chardata"`
		} `xml:"definedNames>definedName"`
	}
	if err := xml.Unmarshal([]byte(zipPart(t, data, "xl/workbook.xml")), &wb); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range wb.Names {
		names = append(names, fmt.Sprintf("%s %d %s", n.Name, n.Sheet, n.Ref))
	}
	wantNames := []string{
		"_xlnm._FilterDatabase 0 'Bob’s orders'!$A$1:$G$100",
		"_xlnm._FilterDatabase 1 'Bob’s orders (2)'!$A$1:$G$100",
		"_xlnm._FilterDatabase 2 'Bob’s orders (3)'!$A$1:$G$53",
	}
	if strings.Join(names, "\n") != strings.Join(wantNames, "\n") {
		t.Errorf("defined names:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(wantNames, "\n"))
	}
	// Every part of the package is there once, with the content types it declares.
	ct := zipPart(t, data, "[Content_Types].xml")
	for i := range want {
		if !strings.Contains(ct, fmt.Sprintf(`PartName="/xl/worksheets/sheet%d.xml"`, i+1)) {
			t.Errorf("no content type for sheet %d", i+1)
		}
	}
	zr, _ := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	seen := map[string]bool{}
	for _, zf := range zr.File {
		if seen[zf.Name] {
			t.Errorf("%s twice", zf.Name)
		}
		seen[zf.Name] = true
	}
	// The style ids the sheets use are the package's: dates show as dates.
	for i, name := range want {
		if v, _ := f.GetCellValue(name, "E2"); !regexp.MustCompile(`^\d{4}-\d\d-\d\d$`).MatchString(v) {
			t.Errorf("sheet %d: E2 shows %q, want a date", i+1, v)
		}
		if st := cellStyle(t, f, name, "A1"); st.Font == nil || !st.Font.Bold {
			t.Errorf("sheet %d: header not bold", i+1)
		}
	}
}

func zipPart(t *testing.T, data []byte, name string) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The package file must make the same style ids as the sheet files, whose cells use them.
func TestStylesAgree(t *testing.T) {
	t.Parallel()
	formats := []string{"#,##0.00", "dd.mm.yyyy", `0.0" kg"`}
	a, sa, err := newFile(t.TempDir(), formats, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _, err := newFile(t.TempDir(), formats, &sa)
	if err != nil {
		t.Fatalf("a second file's styles: %v", err)
	}
	defer b.Close()
	ids := append([]int{sa.header, sa.date, sa.datetime}, sa.custom...)
	if sa.header == 0 || len(sa.custom) != len(formats) || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
		t.Fatalf("styles %+v are not distinct", sa)
	}
	if _, _, err := newFile(t.TempDir(), nil, &styles{header: 9}); err == nil {
		t.Fatal("different style ids were not noticed")
	}
	if _, _, err := newFile(t.TempDir(), formats[:2], &sa); err == nil {
		t.Fatal("a missing format's style was not noticed")
	}
}

// A sheet's XML goes, compressed, to its rows file in tmpDir as it comes, rather than
// growing in memory, and no excelize spill file is made for it.
func TestWriteXLSXSpillsToTmpDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := strings.Repeat("spill ", 5000) // 30,000 characters
	src := &spillWatch{dir: dir, text: text}
	var buf bytes.Buffer
	if err := writeXLSX(t.Context(), &buf, src, Query{Report: Report{Sheet: "S"}}, xlsxOptions{tmpDir: dir}); err != nil {
		t.Fatal(err)
	}
	if len(src.seen) != 1 || !strings.HasPrefix(src.seen[0], "sheetq-sheet-") {
		t.Fatalf("files in %s with data after %d MiB of sheet XML: %q, want one rows file", dir, 4*len(text)*src.rows>>20, src.seen)
	}
	// A spilled sheet reaches the compressor in pieces: its dimension is patched all the same.
	if got := dimension(t, sheetXML(t, buf.Bytes(), 1)); got != "A1:D251" {
		t.Errorf("dimension %q, want A1:D251", got)
	}
}

// dimension returns the ref of the one <dimension> in a sheet's XML.
func dimension(t *testing.T, sheet string) string {
	t.Helper()
	m := regexp.MustCompile(`<dimension ref="([^"]*)"`).FindAllStringSubmatch(sheet, -1)
	if len(m) != 1 {
		t.Fatalf("%d dimension elements, want 1", len(m))
	}
	return m[0][1]
}

// Every sheet, a rolled-over one too, states its real range: streaming readers size the
// sheet by it.
func TestWriteXLSXDimensions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rows int64
		max  int
		want []string
	}{
		{rows: 0, want: []string{"A1:G1"}},
		{rows: 1, want: []string{"A1:G2"}},
		{rows: 250, max: 100, want: []string{"A1:G100", "A1:G100", "A1:G53"}},
		{rows: 198, max: 100, want: []string{"A1:G100", "A1:G100"}},
	} {
		_, data := exportWith(t, demoSource{}, demoQuery(tt.rows), xlsxOptions{maxSheetRows: tt.max})
		for i, want := range tt.want {
			if got := dimension(t, sheetXML(t, data, i+1)); got != want {
				t.Errorf("%d rows, %d a sheet: sheet %d dimension %q, want %q", tt.rows, tt.max, i+1, got, want)
			}
		}
	}
}

// A sheet's rows reach its rows file whole and in order, however the row buffer's
// flushes and a checkpoint's sync fall, with their size and checksum counted on the way.
func TestSheetRowsCompressesWholeRows(t *testing.T) {
	t.Parallel()
	cols := []Column{{Name: "id", Type: TypeInt}, {Name: "note", Type: TypeText}, {Name: "at", Type: TypeDatetime}}
	for _, n := range []int{1, 100, 3000} {
		f, err := os.CreateTemp(t.TempDir(), "rows")
		if err != nil {
			t.Fatal(err)
		}
		x := &xlsxWriter{opt: xlsxOptions{}.withDefaults(), stop: func() error { return nil }, cut: make([]int64, len(cols))}
		x.tmpDir = x.opt.tmpDir
		if err := x.setColumns(cols); err != nil {
			t.Fatal(err)
		}
		s := x.newSheetRows(f, 0, nil, 0, 0, 1)
		var want []byte
		at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		for i := range n {
			row := []any{int64(i), strings.Repeat("a <b> & c ", i%40), at.Add(time.Duration(i) * time.Minute)}
			want = x.appendRow(want, i+2, row)
			if err := s.row(row); err != nil {
				t.Fatal(err)
			}
			if i == n/2 {
				if _, err := s.sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.end(); err != nil {
			t.Fatal(err)
		}
		comp, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		// The stream is not final (the sheet's tail ends it): one more, empty, final block.
		got, err := io.ReadAll(flate.NewReader(io.MultiReader(bytes.NewReader(comp), bytes.NewReader([]byte{3, 0}))))
		if err != nil {
			t.Fatalf("%d rows: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%d rows: the file inflates to %d bytes that differ from the %d written", n, len(got), len(want))
		}
		if s.raw != int64(len(want)) || s.crc != crc32.ChecksumIEEE(want) || s.rows != n+1 {
			t.Errorf("%d rows: size %d, crc %x, last row %d; want %d, %x, %d", n, s.raw, s.crc, s.rows, len(want), crc32.ChecksumIEEE(want), n+1)
		}
	}
}

// crc32Combine gives the checksum of the bytes joined.
func TestCRC32Combine(t *testing.T) {
	t.Parallel()
	data := make([]byte, 200_000)
	for i := range data {
		data[i] = byte(i*7 + i/13)
	}
	for _, cut := range []int{0, 1, 2, 3, 100, 4095, 65536, 199_999, 200_000} {
		a, b := data[:cut], data[cut:]
		if got, want := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), int64(len(b))), crc32.ChecksumIEEE(data); got != want {
			t.Errorf("cut at %d: %08x, want %08x", cut, got, want)
		}
	}
}

// spillWatch sends rows of long text and then looks for the stream writer's spill file.
type spillWatch struct {
	dir, text string
	rows      int
	seen      []string
}

func (s *spillWatch) Stream(_ context.Context, _ Query, w RowWriter) error {
	cols := []Column{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	if err := w.Begin(cols, -1); err != nil {
		return err
	}
	row := []any{s.text, s.text, s.text, s.text}
	for s.rows = 0; s.rows < 250; s.rows++ { // 30 MiB of XML
		if err := w.Row(row); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Size() > 0 {
			s.seen = append(s.seen, e.Name())
		}
	}
	return nil
}
