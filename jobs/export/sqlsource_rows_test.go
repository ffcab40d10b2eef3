package export

import (
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"
)

// TestSQLConvertKeepsValues holds convert's shortcut (a value passed on in its own
// interface) to the full conversion: for every column type and every kind of value a
// driver sends, the two give equal values, so the cells written are the same.
func TestSQLConvertKeepsValues(t *testing.T) {
	t.Parallel()
	paris := time.FixedZone("CET", 3600)
	utcNamed := time.FixedZone("UTC", 0) // named UTC, but not time.UTC
	values := []any{
		nil, int64(0), int64(7), int64(-1), int64(1<<53 + 1), int64(math.MaxInt64), int64(math.MinInt64),
		0.0, 1.1, -2.5, 1e300, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), float32(1.1),
		true, false,
		"", "text", " 12 ", "2024-02-29", "2024-03-01 13:45:30", "2024-03-01T12:00:00Z", "1", "t", "infinity",
		[]byte("bytes"), []byte{0xff, 0x00},
		time.Time{},
		time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 2, 29, 13, 45, 30, 0, time.UTC),
		time.Date(2024, 2, 29, 0, 0, 0, 1, time.UTC),
		time.Date(2024, 2, 29, 0, 0, 1, 0, time.UTC),
		time.Date(2024, 2, 29, 0, 0, 0, 0, paris),
		time.Date(2024, 2, 29, 23, 30, 0, 0, paris),
		time.Date(2024, 2, 29, 0, 0, 0, 0, utcNamed),
		time.Date(1, 1, 1, 0, 0, 0, 0, paris),
		time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 12, 0, 0, 0, time.UTC),
		time.Now(), // with a monotonic reading, in the local zone
		time.Now().UTC(),
		int(3), int32(-4), uint8(5), uint64(math.MaxUint64),
	}
	var specs []colSpec
	for _, typ := range []Type{TypeText, TypeInt, TypeNumber, TypeBool, TypeDate, TypeDatetime, ""} {
		specs = append(specs, colSpec{typ: typ}, colSpec{typ: typ, float32: true})
	}
	for _, spec := range specs {
		for _, v := range values {
			got, want := spec.convert(v), spec.convertValue(v)
			if b, ok := v.([]byte); ok { // not comparable: both make text
				if got != want {
					t.Errorf("%+v.convert(%q) = %#v, want %#v", spec, b, got, want)
				}
				continue
			}
			if !sameValue(got, want) {
				t.Errorf("%+v.convert(%#v) = %#v, want %#v", spec, v, got, want)
			}
		}
	}
}

// sameValue is == on interfaces, with NaN equal to itself.
func sameValue(a, b any) bool {
	if fa, ok := a.(float64); ok {
		if fb, ok := b.(float64); ok && math.IsNaN(fa) && math.IsNaN(fb) {
			return true
		}
	}
	return a == b
}

// newSQLiteOrders creates a SQLite file with n rows of the shape xlsxbench exports
// (every column type, dates and times as SQLite's date functions write them, NULLs,
// integers beyond 2^53) and returns its path.
func newSQLiteOrders(tb testing.TB, n int) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "orders.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL,
		amount REAL NOT NULL, quantity INTEGER NOT NULL, paid BOOLEAN NOT NULL, order_date DATE NOT NULL,
		created_at DATETIME NOT NULL, note TEXT, discount REAL, ref INTEGER NOT NULL, anything)`); err != nil {
		tb.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	stmt, err := tx.Prepare(`INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		tb.Fatal(err)
	}
	epoch := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		h := splitmix64(uint64(i))
		day := epoch.AddDate(0, 0, int(h>>8%730))
		at := day.Add(time.Duration(h>>44%86_400) * time.Second).Format("2006-01-02 15:04:05")
		var note, discount, anything any
		if k := h >> 60; k < 4 {
			note = fmt.Sprintf("note %d", k)
		}
		if h&1 == 0 {
			discount = float64(h>>8%5000) / 100
		}
		switch h >> 56 % 8 { // an untyped column: whatever the row holds
		case 0:
			anything = int64(h >> 30)
		case 1:
			anything = "text"
		case 2:
			anything = 0.5
		}
		ref := int64(h >> 12 % 1_000_000_000)
		if h>>50%16 == 0 {
			ref = 1<<53 + int64(h>>20%1_000_000)
		}
		switch h >> 52 % 64 { // some values that are not what their column says
		case 0:
			at = day.Format("2006-01-02T15:04:05Z")
		case 1:
			at = day.Format("2006-01-02 15:04:05+02:00")
		case 2:
			at = "not a time"
		}
		if _, err := stmt.Exec(i+1, fmt.Sprintf("customer %d", h%100), float64(h>>20%1_000_000)/100,
			int64(h>>32%100)+1, h>>40%4 != 0, day.Format("2006-01-02"), at, note, discount, ref, anything); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// discardRows is a RowWriter that counts rows and keeps nothing.
type discardRows struct{ rows int }

func (*discardRows) Begin([]Column, int64) error { return nil }
func (d *discardRows) Row([]any) error {
	d.rows++
	return nil
}

// BenchmarkSQLiteSourceRows reads 20,000 rows of the xlsxbench table through the SQL
// source into a writer that keeps nothing: the source's own CPU and garbage per row.
func BenchmarkSQLiteSourceRows(b *testing.B) {
	const rows = 20_000
	path := newSQLiteOrders(b, rows)
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		b.Fatal(err)
	}
	defer src.(interface{ Close() error }).Close()
	q := Query{Report: srcReport(`SELECT * FROM orders ORDER BY id`), Params: map[string]any{}, Attempt: 1}
	b.ReportAllocs()
	for b.Loop() {
		var w discardRows
		if err := src.Stream(b.Context(), q, &w); err != nil {
			b.Fatal(err)
		}
		if w.rows != rows {
			b.Fatalf("%d rows, want %d", w.rows, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows)/float64(b.N), "ns/row")
}
