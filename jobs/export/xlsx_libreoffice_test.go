package export

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LibreOffice is a second reader that shares no code with excelize or openpyxl: it
// converts a rolled-over file to CSV, one file per sheet, with the cells as it shows
// them. CI installs libreoffice-calc-nogui; elsewhere the test skips without it.

// soffice returns LibreOffice's soffice, or skips the test without it (fails in CI).
func soffice(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("soffice")
	if err != nil {
		msg := "no soffice (apt-get install libreoffice-calc-nogui): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// libreOfficeSheets converts the xlsx at path to CSV with LibreOffice and returns each
// sheet's records by sheet name. The cells are as LibreOffice shows them in en-US:
// number formats applied.
func libreOfficeSheets(t *testing.T, path string, sheets []string) map[string][][]string {
	t.Helper()
	bin := soffice(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// CSV filter options: comma, double quote, UTF-8 (76), from line 1, no column types,
	// en-US (1033), quoted text not as text, detect special numbers, cells as shown,
	// no formulas, keep spaces, every sheet (-1) to a file of its own (LibreOffice 7.2+).
	const filter = "csv:Text - txt - csv (StarCalc):44,34,76,1,,1033,false,true,true,false,false,-1"
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// A profile of its own, so that parallel runs and a user's LibreOffice do not
	// share (and lock) one.
	cmd := exec.CommandContext(ctx, bin, "-env:UserInstallation=file://"+filepath.Join(dir, "profile"),
		"--headless", "--norestore", "--convert-to", filter, "--outdir", out, path)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, b)
	}
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	got := map[string][][]string{}
	for _, name := range sheets {
		f, err := os.Open(filepath.Join(out, base+"-"+name+".csv"))
		if err != nil {
			entries, _ := os.ReadDir(out)
			t.Fatalf("sheet %q: %v (soffice wrote %v)", name, err, entries)
		}
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		recs, err := r.ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("sheet %q: %v", name, err)
		}
		got[name] = recs
	}
	return got
}

// A rolled-over file opens in LibreOffice with every sheet whole: the header labels on
// each, every row once and in order, and the cells in their number formats.
func TestLibreOfficeReadsRolledOverSheets(t *testing.T) {
	t.Parallel()
	soffice(t)
	src := labelledRows(25)
	q := Query{Report: Report{ID: "orders", Title: "Orders", Source: "mem", Sheet: "Orders"}}
	path := writeFileWith(t, src, q, xlsxOptions{maxSheetRows: 10})
	names := []string{"Orders", "Orders (2)", "Orders (3)"}
	sheets := libreOfficeSheets(t, path, names)
	header := []string{"id", "Customer name", "Unit price", "Created", "day", "share", "Quantity", "at"}
	next := 0 // index into src.rows
	for i, name := range names {
		recs := sheets[name]
		if want := []int{10, 10, 8}[i]; len(recs) != want {
			t.Errorf("sheet %q: %d rows, want %d, header included", name, len(recs), want)
		}
		if len(recs) == 0 || strings.Join(recs[0], "|") != strings.Join(header, "|") {
			t.Errorf("sheet %q: header %q, want %q", name, recs[0], header)
			continue
		}
		for r, rec := range recs[1:] {
			if next >= len(src.rows) {
				t.Fatalf("sheet %q row %d: more rows than the %d sent", name, r+2, len(src.rows))
			}
			if want := shownInEnUS(src.rows[next]); strings.Join(rec, "|") != strings.Join(want, "|") {
				t.Errorf("sheet %q row %d:\n got %q\nwant %q", name, r+2, rec, want)
			}
			next++
		}
	}
	if next != len(src.rows) {
		t.Errorf("%d rows read, %d sent", next, len(src.rows))
	}
}

// shownInEnUS is how a labelledRows row shows in en-US: "#,##0.00", "yyyy-mm-dd hh:mm",
// the default date and datetime formats, "0.0%" and General.
func shownInEnUS(row []any) []string {
	out := make([]string, len(row))
	num := func(v any) string {
		switch v := v.(type) {
		case float64:
			return grouped(fmt.Sprintf("%.2f", v))
		case int64:
			return grouped(fmt.Sprintf("%d.00", v))
		}
		return ""
	}
	out[0] = strconv.FormatInt(row[0].(int64), 10)
	out[1] = row[1].(string)
	out[2] = num(row[2])
	if t, ok := row[3].(time.Time); ok {
		out[3] = t.Format("2006-01-02 15:04")
	}
	out[4] = row[4].(time.Time).Format("2006-01-02")
	out[5] = fmt.Sprintf("%.1f%%", row[5].(float64)*100)
	out[6] = num(row[6])
	out[7] = row[7].(time.Time).Format("2006-01-02 15:04:05")
	return out
}

// grouped puts thousands separators into a decimal such as "1234567.50".
func grouped(s string) string {
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}
