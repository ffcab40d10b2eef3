package export

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/internal/httpapitest"
)

// exportHTTPFile runs an HTTP report as an export job does (column lines, the pipe, the
// xlsx writer) into a file, and returns its path.
func exportHTTPFile(t *testing.T, src Source, rep Report) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.xlsx")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var warnings []string
	q := Query{Report: rep, Params: map[string]any{}, Attempt: 1, Warn: func(s string) { warnings = append(warnings, s) }}
	wrapped := piped(withColumns(src, rep.Columns, func(s string) { warnings = append(warnings, s) }), nil, nil)
	if err := writeXLSX(t.Context(), f, wrapped, q, xlsxOptions{tmpDir: filepath.Join(dir, "tmp")}); err != nil {
		t.Fatalf("writeXLSX: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Fatalf("warnings: %q", warnings)
	}
	return path
}

// readXLSXRows reads a sheet back with excelize's streaming reader, calling fn with
// the 0-based number and the cells (as text) of each row that want says yes to (nil:
// every row); it returns the rows read.
func readXLSXRows(t *testing.T, path, sheet string, want func(n int) bool, fn func(n int, cells []string)) int {
	t.Helper()
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.Rows(sheet)
	if err != nil {
		t.Fatalf("sheet %q: %v (sheets %v)", sheet, err, f.GetSheetList())
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if want != nil && !want(n) {
			n++
			continue
		}
		cells, err := rows.Columns(excelize.Options{RawCellValue: true})
		if err != nil {
			t.Fatal(err)
		}
		fn(n, cells)
		n++
	}
	if err := rows.Error(); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkHTTPSheetRow compares a row read back to row i of the test API: numbers as the
// writer stores them, text as sent.
func checkHTTPSheetRow(t *testing.T, n int, cells []string, i int) {
	t.Helper()
	r := httpapitest.RowAt(i)
	want := []string{strconv.FormatInt(r.ID, 10), r.Name, strconv.FormatFloat(r.Amount, 'f', -1, 64), "0", r.Day, "", strconv.FormatInt(r.Ref, 10), ""}
	if r.Paid {
		want[3] = "1"
	}
	if r.Note != nil {
		want[5] = *r.Note
	}
	if r.Meta != nil {
		want[7] = r.Meta.MetaJSON()
	}
	for len(cells) < len(want) {
		cells = append(cells, "") // the reader leaves out empty cells at a row's end
	}
	for j := range want {
		if cells[j] != want[j] {
			t.Fatalf("sheet row %d, cell %d: %q, want %q (row %v)", n, j, cells[j], want[j], cells)
		}
	}
}

// An HTTP report through the real writers: the column lines label and type the
// columns, and the file reads back as the API sent it.
func TestHTTPExportXLSX(t *testing.T) {
	t.Parallel()
	const rows = 2500
	srv := newTestAPI(t, httpapitest.Options{Rows: rows})
	rep := httpTestReport(t, "title: Orders", "request: GET next/items?limit=300", "rows: .data[]", "paginate: next_url .links.next",
		`column: id "Order" int`, `column: ref "Reference" text`)
	path := exportHTTPFile(t, openTestHTTP(t, srv, nil), rep)
	n := readXLSXRows(t, path, "Orders", nil, func(n int, cells []string) {
		if n == 0 {
			want := []string{"Order", "name", "amount", "paid", "day", "note", "Reference", "meta"}
			for j := range want {
				if cells[j] != want[j] {
					t.Fatalf("header %v, want %v", cells, want)
				}
			}
			return
		}
		checkHTTPSheetRow(t, n, cells, n-1)
	})
	if n != rows+1 {
		t.Fatalf("%d rows read back, want %d and the header", n, rows)
	}
}

// A million rows from the test API into an xlsx file, 5,000 a page, in CI's time; the
// file reads back row for row. Under the race detector, a tenth of them.
func TestHTTPMillionRowsXLSX(t *testing.T) {
	rows := 1_000_000
	if raceEnabled {
		rows = 100_000
	}
	srv := newTestAPI(t, httpapitest.Options{Rows: rows})
	rep := httpTestReport(t, "title: Orders", "request: GET cursor/items?limit=5000", "rows: .data[]", "paginate: cursor .meta.next_cursor cursor")
	start := time.Now()
	path := exportHTTPFile(t, openTestHTTP(t, srv, nil), rep)
	took := time.Since(start)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows, %d pages: %v, %.1f MiB", rows, srv.Total(), took.Round(time.Millisecond), float64(st.Size())/(1<<20))
	check := map[int]bool{1: true, 2: true, 5001: true, rows / 2: true, rows: true}
	n := readXLSXRows(t, path, "Orders", func(n int) bool { return check[n] }, func(n int, cells []string) {
		checkHTTPSheetRow(t, n, cells, n-1)
	})
	if n != rows+1 {
		t.Fatalf("%d rows read back, want %d and the header", n, rows)
	}
	if srv.Total() != rows/5000 {
		t.Fatalf("%d requests for %d pages", srv.Total(), rows/5000)
	}
}

// An HTTP export that crashes and is resumed from the writer's checkpoints, once or
// several times, makes the same sheets as an uninterrupted one, byte for byte: the
// source's token, asked on the writer's goroutine, puts every resumed attempt on the
// right row of the right page. The pages are requested again only from the
// checkpoint's page on.
func TestHTTPResumedXLSXEqualsUninterrupted(t *testing.T) {
	t.Parallel()
	const rows, perSheet, size = 9000, 2500, 700 // four sheets, 13 pages
	for _, style := range []int{1, 2, 3} {       // next_url, cursor, page
		t.Run(httpStyles[style].name, func(t *testing.T) {
			t.Parallel()
			srv := newTestAPI(t, httpapitest.Options{Rows: rows})
			q := Query{Report: styleReport(t, style, size), Params: map[string]any{}, Attempt: 1}
			_, want := exportWith(t, openTestHTTP(t, srv, nil), q, xlsxOptions{maxSheetRows: perSheet})
			for _, crashes := range [][]int64{{1700}, {2499}, {3100, 1500, 2200}, {8999}} {
				r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 333}
				var cp []byte
				for i, crash := range crashes {
					_, last, _, err := r.run(t, openTestHTTP(t, srv, nil), q, cp, crash, perSheet)
					if err == nil {
						t.Fatalf("crashes %v, %d: the export finished", crashes, i+1)
					}
					if last != nil {
						cp = last
					}
				}
				before := srv.Total()
				data, _, resumed, err := r.run(t, openTestHTTP(t, srv, nil), q, cp, -1, perSheet)
				if err != nil {
					t.Fatalf("crashes %v: resumed: %v", crashes, err)
				}
				sameSheets(t, data, want, 4)
				// The last attempt resumed, and asked for the checkpoint's page and those
				// after it only (one more when the checkpoint ends a page).
				pages, least := srv.Total()-before, 13-int(resumed)/size
				if resumed <= 0 || pages < least || pages > least+1 {
					t.Fatalf("crashes %v: resumed after %d rows with %d requests, want %d or %d", crashes, resumed, pages, least, least+1)
				}
			}
		})
	}
}
