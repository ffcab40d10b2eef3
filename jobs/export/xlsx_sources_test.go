package export

import (
	"database/sql"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The files of the real sources, read back with openpyxl and compared cell by cell
// with what the source sends.

// mixedRow is row i of the test table: every type, NULLs, and text a spreadsheet could
// take for a formula.
func mixedRow(i int) []any {
	h := splitmix64(uint64(i))
	formulas := []string{"=1+1", "+41", "-3", "@SUM(A1)", `=HYPERLINK("http://example.invalid")`, "plain"}
	var note, score any
	if h%3 != 0 {
		note = formulas[h%uint64(len(formulas))] + fmt.Sprintf(" #%d", i)
	}
	if h%4 != 0 {
		score = float64(h>>8%100_000) / 1000
	}
	big := int64(h >> 20 % 1_000_000)
	if i%7 == 0 {
		big = 1<<60 + int64(i) // beyond a double's exact integers
	}
	day := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(h>>30%2000))
	return []any{
		int64(i + 1), fmt.Sprintf("customer %d", h%97), score, int64(h >> 40 % 50),
		h>>50%2 == 0, day.Format("2006-01-02"),
		day.Add(time.Duration(h>>24%86_400) * time.Second).Format("2006-01-02 15:04:05"),
		note, big,
	}
}

const mixedRows = 300

func TestOpenpyxlReadsSQLiteSource(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	path := filepath.Join(t.TempDir(), "shop.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, score REAL,
		qty INTEGER, paid BOOLEAN, day DATE, at DATETIME, note TEXT, big INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := range mixedRows {
		if _, err := db.Exec(`INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, mixedRow(i)...); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("x", 40_000)
	if _, err := db.Exec(`INSERT INTO orders (id, customer, note) VALUES (?, ?, ?)`, mixedRows+1, long, "="+long); err != nil {
		t.Fatal(err)
	}
	db.Close()

	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Report: Report{ID: "orders", Source: "shop", Sheet: "Orders",
		// An expression column too: typed from its values, not a declared type.
		Query: "SELECT *, score * qty AS total FROM orders ORDER BY id"}}
	want := sourceRows(t, src, q)
	if len(want) != mixedRows+2 {
		t.Fatalf("source sent %d rows, want %d and the header", len(want)-1, mixedRows+1)
	}
	checkAllTypes(t, want[0])
	assertReadbackMatches(t, writeFile(t, src, q), want)
}

func TestOpenpyxlReadsCSVSource(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "orders.csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	w.Write([]string{"id", "customer", "score", "qty", "paid", "day", "at", "note", "big"})
	for i := range mixedRows {
		rec := make([]string, 0, 9)
		for _, v := range mixedRow(i) {
			switch v := v.(type) {
			case nil:
				rec = append(rec, "")
			case float64:
				rec = append(rec, fmt.Sprintf("%.3f", v))
			default:
				rec = append(rec, fmt.Sprint(v))
			}
		}
		w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	src, err := OpenSource("files", SourceConfig{Driver: "csv", Path: dir}, "")
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Report: Report{ID: "orders", Source: "files", Sheet: "Orders", Query: "SELECT * FROM orders ORDER BY id"}}
	want := sourceRows(t, src, q)
	if len(want) != mixedRows+1 {
		t.Fatalf("source sent %d rows, want %d and the header", len(want)-1, mixedRows)
	}
	checkAllTypes(t, want[0])
	assertReadbackMatches(t, writeFile(t, src, q), want)
}

// checkAllTypes fails unless the header has a column of every type, so the comparison
// covers them all.
func checkAllTypes(t *testing.T, header []any) {
	t.Helper()
	seen := map[Type]bool{}
	for _, h := range header {
		seen[h.(Column).Type] = true
	}
	for _, typ := range []Type{TypeText, TypeInt, TypeNumber, TypeBool, TypeDate, TypeDatetime} {
		if !seen[typ] {
			t.Errorf("the source typed no column %s: %v", typ, header)
		}
	}
}
