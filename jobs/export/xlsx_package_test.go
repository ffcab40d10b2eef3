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

// A sheet's XML spills to tmpDir once it passes excelize's chunk size, rather than
// growing in memory.
func TestWriteXLSXSpillsToTmpDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := strings.Repeat("spill ", 5000) // 30,000 characters
	src := &spillWatch{dir: dir, text: text}
	var buf bytes.Buffer
	if err := writeXLSX(t.Context(), &buf, src, Query{Report: Report{Sheet: "S"}}, xlsxOptions{tmpDir: dir}); err != nil {
		t.Fatal(err)
	}
	if len(src.seen) == 0 {
		t.Fatalf("no spill file in %s after %d MiB of sheet XML", dir, 4*len(text)*src.rows>>20)
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

// A segment's rows come out whole, and only they, however excelize cuts the sheet's
// XML into writes; their size and checksum are counted on the way. A segment that makes
// the sheet's frame gives its head through the header row.
func TestRowsCaptureCutsWholeRows(t *testing.T) {
	t.Parallel()
	head := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<worksheet xmlns="x"><dimension ref="A1"></dimension><sheetViews/><sheetData>`
	header := `<row r="1"><c r="A1" s="1" t="inlineStr"><is><t>id</t></is></c></row>`
	rows := `<row r="2"><c r="A2"><v>1</v></c></row><row r="3"><c r="A3" t="inlineStr"><is><t>a &lt;/row&gt; b</t></is></c></row>` +
		strings.Repeat(`<row r="4"><c r="A4"><v>2.5</v></c></row>`, 50)
	tail := `</sheetData><pageMargins/></worksheet>`
	for _, frame := range []bool{false, true} {
		in := head + rows + tail
		if frame {
			in = head + header + rows + tail
		}
		for _, size := range []int{1, 2, 5, 7, 11, 31, len(head) + 5, len(head) + len(header) - 3, 1000, len(in)} {
			f, err := os.CreateTemp(t.TempDir(), "rows")
			if err != nil {
				t.Fatal(err)
			}
			x := &xlsxWriter{opt: xlsxOptions{}.withDefaults(), stop: func() error { return nil }}
			s := x.newSheetRows(f, 0, nil, 0, 0, 1)
			c := &rowsCapture{name: "s.xml", rows: s, frame: frame}
			for p := []byte(in); len(p) > 0; {
				n := min(size, len(p))
				if k, err := c.Write(p[:n]); k != n || err != nil {
					t.Fatalf("pieces of %d: Write = %d, %v", size, k, err)
				}
				p = p[n:]
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
				t.Fatalf("pieces of %d: %v", size, err)
			}
			if string(got) != rows || string(c.hold) != tail {
				t.Errorf("frame %v, pieces of %d: got\n%s\nwant\n%s\n(held back %q)", frame, size, got, rows, c.hold)
			}
			if frame && (string(c.head) != head+header || !c.headerDone) {
				t.Errorf("pieces of %d: head %q, want %q", size, c.head, head+header)
			}
			if s.raw != int64(len(rows)) || s.crc != crc32.ChecksumIEEE([]byte(rows)) {
				t.Errorf("pieces of %d: size %d, crc %x; want %d, %x", size, s.raw, s.crc, len(rows), crc32.ChecksumIEEE([]byte(rows)))
			}
		}
	}
	// A segment without sheet data (a newer excelize, say) fails rather than going out
	// without its rows.
	c := &rowsCapture{name: "s.xml"}
	if _, err := c.Write([]byte(strings.Repeat(" ", maxSheetHead+1))); err == nil {
		t.Error("no error for a segment without <sheetData>")
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
	for s.rows = 0; s.rows < 250; s.rows++ { // 30 MiB of XML, past the 16 MiB chunk
		if err := w.Row(row); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "excelize-") {
			s.seen = append(s.seen, e.Name())
		}
	}
	return nil
}
