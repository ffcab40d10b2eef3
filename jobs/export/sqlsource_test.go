package export

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
)

// srcRecorder is a RowWriter that keeps everything it is given.
type srcRecorder struct {
	cols   []Column
	total  int64
	rows   [][]any
	begins int
}

func (r *srcRecorder) Begin(cols []Column, total int64) error {
	r.begins++
	r.cols, r.total = slices.Clone(cols), total
	return nil
}

func (r *srcRecorder) Row(values []any) error {
	r.rows = append(r.rows, slices.Clone(values))
	return nil
}

// srcReport is a report over source "src" with query text and declared params.
func srcReport(query string, params ...Param) Report {
	if params == nil {
		params = []Param{}
	}
	return Report{ID: "test", Title: "Test", Source: "src", Sheet: "Rows", Params: params, Query: query}
}

// srcStream validates params against rep like a real job and streams rep from src.
func srcStream(ctx context.Context, t *testing.T, src Source, rep Report, params map[string]any) (*srcRecorder, error) {
	t.Helper()
	canon, err := validateParams(rep.Params, params)
	if err != nil {
		t.Fatalf("params: %v", err)
	}
	rec := &srcRecorder{}
	err = src.Stream(ctx, Query{Report: rep, Params: canon, Attempt: 1}, rec)
	if err == nil && rec.begins != 1 {
		t.Fatalf("Begin called %d times", rec.begins)
	}
	return rec, err
}

// srcMustStream is srcStream that fails the test on an error.
func srcMustStream(t *testing.T, src Source, rep Report, params map[string]any) *srcRecorder {
	t.Helper()
	rec, err := srcStream(t.Context(), t, src, rep, params)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	return rec
}

// srcJobError asserts err is a *jobs.Error with the given permanence and code.
func srcJobError(t *testing.T, err error, permanent bool, code string) *jobs.Error {
	t.Helper()
	var je *jobs.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v (%T) is not a *jobs.Error", err, err)
	}
	if je.Permanent != permanent || je.Code != code {
		t.Fatalf("error %q: permanent=%v code=%q, want permanent=%v code=%q", err, je.Permanent, je.Code, permanent, code)
	}
	return je
}

func utcDay(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func utcAt(y int, m time.Month, d, hh, mm, ss int) time.Time {
	return time.Date(y, m, d, hh, mm, ss, 0, time.UTC)
}

// itemColumns and itemRows are what every source kind must return for its items table:
// the same data, whatever the database calls the types.
var (
	itemColumns = []Column{
		{Name: "id", Type: TypeInt}, {Name: "big", Type: TypeInt}, {Name: "price", Type: TypeNumber}, {Name: "ratio", Type: TypeNumber},
		{Name: "f4", Type: TypeNumber}, {Name: "day", Type: TypeDate}, {Name: "at", Type: TypeDatetime}, {Name: "atz", Type: TypeDatetime},
		{Name: "ok", Type: TypeBool}, {Name: "name", Type: TypeText}, {Name: "note", Type: TypeText},
	}
	itemRows = [][]any{
		{int64(1), int64(9007199254740993), 1234.56, 0.25, 1.1, utcDay(2024, 2, 29), utcAt(2024, 3, 1, 13, 45, 30),
			utcAt(2024, 3, 1, 12, 0, 0), true, "Ada Lovelace", "rush"},
		{int64(2), int64(-5), -0.5, 0.001, -2.5, utcDay(1999, 12, 31), utcAt(2000, 1, 1, 0, 0, 0),
			utcAt(1999, 12, 31, 23, 0, 0), false, `Grace 'O' "Hopper"`, nil},
		{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
	itemsQuery = "SELECT id, big, price, ratio, f4, day, at, atz, ok, name, note FROM %s ORDER BY id"
)

// srcSameValue reports whether a source returned want exactly: the same Go type and
// value, times in UTC.
func srcSameValue(got, want any) bool {
	if w, ok := want.(time.Time); ok {
		g, ok := got.(time.Time)
		return ok && g.Equal(w) && g.Location() == time.UTC
	}
	return fmt.Sprintf("%T", got) == fmt.Sprintf("%T", want) && got == want
}

func srcCheckRows(t *testing.T, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("row %d has %d values, want %d", i+1, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if !srcSameValue(got[i][j], want[i][j]) {
				t.Errorf("row %d col %d = %#v (%T), want %#v (%T)", i+1, j+1, got[i][j], got[i][j], want[i][j], want[i][j])
			}
		}
	}
}

// srcFixture is one source kind with an items table (itemColumns, itemRows) for the
// tests every kind must pass.
type srcFixture struct {
	src   Source
	table string // the items table, as queries name it
	// rowCount counts the items table's rows behind the source's back.
	rowCount func(t *testing.T) int64
	// slow is a query that runs for far longer than a test.
	slow string
	// exec runs a statement with write access (server sources), {table} being the table.
	exec func(t *testing.T, query string)
}

// testSrcFixture runs the tests every source kind must pass.
func testSrcFixture(t *testing.T, fx srcFixture) {
	t.Run("types", func(t *testing.T) {
		rec := srcMustStream(t, fx.src, srcReport(fmt.Sprintf(itemsQuery, fx.table)), nil)
		if !slices.Equal(rec.cols, itemColumns) {
			t.Errorf("columns = %v\nwant      %v", rec.cols, itemColumns)
		}
		if rec.total != -1 {
			t.Errorf("total = %d without Count, want -1", rec.total)
		}
		srcCheckRows(t, rec.rows, itemRows)
	})

	// An independent reader (openpyxl) sees every cell with the source's type and value.
	t.Run("openpyxl", func(t *testing.T) {
		q := Query{Report: srcReport(fmt.Sprintf(itemsQuery, fx.table)), Params: map[string]any{}, Attempt: 1}
		assertReadbackMatches(t, writeFile(t, fx.src, q), sourceRows(t, fx.src, q))
	})

	t.Run("params", func(t *testing.T) {
		const evil = "'; DROP TABLE x; --"
		rep := srcReport(fmt.Sprintf(`SELECT id, :evil AS echo FROM %s
WHERE id >= :min AND price > :price AND day >= :from AND at >= :since AND ok = :flag AND name <> :evil
ORDER BY id`, fx.table),
			Param{Name: "evil", Type: TypeText}, Param{Name: "min", Type: TypeInt},
			Param{Name: "price", Type: TypeNumber}, Param{Name: "from", Type: TypeDate},
			Param{Name: "since", Type: TypeDatetime}, Param{Name: "flag", Type: TypeBool})
		rep.Count = true
		rec := srcMustStream(t, fx.src, rep, map[string]any{
			"evil": evil, "min": "1", "price": "0.5", "from": "2024-01-01",
			"since": "2024-03-01T13:45:30Z", "flag": "true",
		})
		srcCheckRows(t, rec.rows, [][]any{{int64(1), evil}})
		if rec.total != 1 {
			t.Errorf("total = %d, want 1", rec.total)
		}
		// A datetime param is an instant: a second later matches nothing.
		rec = srcMustStream(t, fx.src, rep, map[string]any{
			"evil": evil, "min": "1", "price": "0.5", "from": "2024-01-01",
			"since": "2024-03-01T14:45:31+01:00", "flag": "true",
		})
		if len(rec.rows) != 0 {
			t.Errorf("rows after the last datetime: %v", rec.rows)
		}
		if n := fx.rowCount(t); n != int64(len(itemRows)) {
			t.Errorf("%d rows left in the table, want %d", n, len(itemRows))
		}
	})

	t.Run("count", func(t *testing.T) {
		rep := srcReport(fmt.Sprintf("SELECT id, name FROM %s ORDER BY id; -- every row\n", fx.table))
		rep.Count = true
		rec := srcMustStream(t, fx.src, rep, nil)
		if rec.total != int64(len(itemRows)) || len(rec.rows) != len(itemRows) {
			t.Errorf("total %d, %d rows, want %d", rec.total, len(rec.rows), len(itemRows))
		}
	})

	t.Run("read-only", func(t *testing.T) {
		dir := t.TempDir() // where a hostile query would create files (servers here run locally)
		for _, q := range []string{
			// SQLite's ATTACH created the file it names.
			"ATTACH DATABASE '" + filepath.Join(dir, "a.db") + "' AS a",
			"DETACH DATABASE a",
			// MySQL writes files on the server whatever the transaction; PostgreSQL's
			// COPY too.
			fmt.Sprintf("SELECT id FROM %s INTO OUTFILE '%s'", fx.table, filepath.Join(dir, "o.txt")),
			fmt.Sprintf("COPY (SELECT 1) TO '%s'", filepath.Join(dir, "c.txt")),
			// A read-only transaction still lets MySQL create temporary tables.
			"CREATE TEMPORARY TABLE sheetq_tmp (x int)",
			fmt.Sprintf("WITH n AS (SELECT 1) DELETE FROM %s", fx.table),
			"SET SESSION TRANSACTION READ WRITE",
			fmt.Sprintf("INSERT INTO %s (id) VALUES (99)", fx.table),
			fmt.Sprintf("UPDATE %s SET name = 'changed'", fx.table),
			fmt.Sprintf("DELETE FROM %s", fx.table),
			// MySQL commits before DDL and runs it outside the transaction.
			fmt.Sprintf("CREATE TABLE %s_new (x int)", fx.table),
			fmt.Sprintf("DROP TABLE %s", fx.table),
		} {
			_, err := srcStream(t.Context(), t, fx.src, srcReport(q), nil)
			if err == nil {
				t.Errorf("%s: no error", q)
				continue
			}
			srcJobError(t, err, true, "query")
		}
		if n := fx.rowCount(t); n != int64(len(itemRows)) {
			t.Fatalf("%d rows in the table after writes were refused, want %d", n, len(itemRows))
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("report SQL created %v", left)
		}
		rec := srcMustStream(t, fx.src, srcReport(fmt.Sprintf("SELECT name FROM %s WHERE id = 1", fx.table)), nil)
		srcCheckRows(t, rec.rows, [][]any{{"Ada Lovelace"}})
	})

	t.Run("query errors are permanent", func(t *testing.T) {
		for _, q := range []string{
			"SELEC 1",
			"SELECT * FROM no_such_table_here",
			fmt.Sprintf("SELECT no_such_column FROM %s", fx.table),
		} {
			rep := srcReport(q)
			rep.Count = true
			_, err := srcStream(t.Context(), t, fx.src, rep, nil)
			srcJobError(t, err, true, "query")
			_, err = srcStream(t.Context(), t, fx.src, srcReport(q), nil)
			srcJobError(t, err, true, "query")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := srcStream(ctx, t, fx.src, srcReport(fx.slow), nil)
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("a cancelled query took %v to return", elapsed)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline", err)
		}
		srcJobError(t, err, false, "canceled")
		// The source still works afterwards (a pool must not keep a broken connection).
		srcMustStream(t, fx.src, srcReport(fmt.Sprintf("SELECT id FROM %s", fx.table)), nil)
	})

	t.Run("xlsx", func(t *testing.T) {
		f, _ := export(t, fx.src, Query{Report: srcReport(fmt.Sprintf(itemsQuery, fx.table)), Params: map[string]any{}, Attempt: 1}, nil)
		checkItemsSheet(t, f)
	})
}

// checkItemsSheet checks the cells the writer made of the items table.
func checkItemsSheet(t *testing.T, f *excelize.File) {
	t.Helper()
	const sheet = "Rows"
	rows, err := f.GetRows(sheet)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(itemRows) || strings.Join(rows[0], ",") != "id,big,price,ratio,f4,day,at,atz,ok,name,note" {
		t.Fatalf("sheet rows = %q", rows)
	}
	cell := func(ref string) (excelize.CellType, string, string) {
		ct, err := f.GetCellType(sheet, ref)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := f.GetCellValue(sheet, ref, excelize.Options{RawCellValue: true})
		shown, _ := f.GetCellValue(sheet, ref)
		return ct, raw, shown
	}
	for _, c := range []struct {
		ref   string
		typ   excelize.CellType
		raw   string // "" skips the check
		shown string
	}{
		{"A2", excelize.CellTypeUnset, "1", "1"},
		// Beyond 2^53 an int is text, so that no digit is lost.
		{"B2", excelize.CellTypeInlineString, "9007199254740993", "9007199254740993"},
		{"B3", excelize.CellTypeUnset, "-5", "-5"},
		{"C2", excelize.CellTypeUnset, "1234.56", "1234.56"},
		{"D3", excelize.CellTypeUnset, "0.001", "0.001"},
		{"E2", excelize.CellTypeUnset, "1.1", "1.1"},
		{"F2", excelize.CellTypeUnset, "", "2024-02-29"},
		{"G2", excelize.CellTypeUnset, "", "2024-03-01 13:45:30"},
		{"H3", excelize.CellTypeUnset, "", "1999-12-31 23:00:00"},
		{"I2", excelize.CellTypeBool, "1", "TRUE"},
		{"I3", excelize.CellTypeBool, "0", "FALSE"},
		{"J3", excelize.CellTypeInlineString, `Grace 'O' "Hopper"`, `Grace 'O' "Hopper"`},
		{"K2", excelize.CellTypeInlineString, "rush", "rush"},
		{"K3", excelize.CellTypeUnset, "", ""},
		{"B4", excelize.CellTypeUnset, "", ""},
	} {
		typ, raw, shown := cell(c.ref)
		if typ != c.typ || (c.raw != "" && raw != c.raw) || shown != c.shown {
			t.Errorf("%s: type %v raw %q shown %q, want type %v raw %q shown %q", c.ref, typ, raw, shown, c.typ, c.raw, c.shown)
		}
	}
}

// newSQLiteItems creates a SQLite file with the items table and returns its path and
// a read-write connection to it.
func newSQLiteItems(t *testing.T) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shop.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, stmt := range []string{
		`CREATE TABLE items (id INTEGER PRIMARY KEY, big BIGINT, price DECIMAL(10,2), ratio REAL, f4 FLOAT,
			day DATE, at DATETIME, atz TIMESTAMP, ok BOOLEAN, name TEXT, note VARCHAR(20))`,
		`INSERT INTO items VALUES (1, 9007199254740993, 1234.56, 0.25, 1.1, '2024-02-29', '2024-03-01 13:45:30',
			'2024-03-01T12:00:00Z', 1, 'Ada Lovelace', 'rush')`,
		// A zone in the text is honoured: the instant comes back in UTC.
		`INSERT INTO items VALUES (2, -5, -0.5, 0.001, -2.5, '1999-12-31', '2000-01-01 00:00:00',
			'2000-01-01 00:00:00+01:00', 0, 'Grace ''O'' "Hopper"', NULL)`,
		`INSERT INTO items (id) VALUES (3)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return path, db
}

// sqliteSlow counts to a billion: minutes of work, unless interrupted.
const sqliteSlow = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
SELECT count(*) FROM c`

func TestSQLiteSource(t *testing.T) {
	path, db := newSQLiteItems(t)
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: filepath.Base(path)}, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.(io.Closer).Close() })
	testSrcFixture(t, srcFixture{
		src:   src,
		table: "items",
		rowCount: func(t *testing.T) int64 {
			var n int64
			if err := db.QueryRow("SELECT count(*) FROM items").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		slow: sqliteSlow,
	})
}

func TestSQLiteSourceUntypedColumns(t *testing.T) {
	path, _ := newSQLiteItems(t)
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		t.Fatal(err)
	}
	// Aggregates and expressions have no declared type: their first value types them.
	rec := srcMustStream(t, src, srcReport(`SELECT count(*) AS n, max(day) AS last_day, max(at) AS last_at,
		sum(price) AS total, 'x' || name AS label, NULL AS empty, CAST('ab' AS BLOB) AS blob
		FROM items WHERE name IS NOT NULL`), nil)
	want := []Column{{Name: "n", Type: TypeInt}, {Name: "last_day", Type: TypeDate}, {Name: "last_at", Type: TypeDatetime}, {Name: "total", Type: TypeNumber},
		{Name: "label", Type: TypeText}, {Name: "empty", Type: TypeText}, {Name: "blob", Type: TypeText}}
	if !slices.Equal(rec.cols, want) {
		t.Errorf("columns = %v, want %v", rec.cols, want)
	}
	srcCheckRows(t, rec.rows, [][]any{{int64(2), utcDay(2024, 2, 29), utcAt(2024, 3, 1, 13, 45, 30), 1234.06,
		"xAda Lovelace", nil, "ab"}})

	// A column that is NULL in the first rows is typed from a later one, and the rows
	// held back meanwhile keep their order.
	rec = srcMustStream(t, src, srcReport(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 250)
		SELECT x, CASE WHEN x > 50 THEN x * 0.5 END AS half, CASE WHEN x > 150 THEN 'late' END AS late FROM c`), nil)
	want = []Column{{Name: "x", Type: TypeInt}, {Name: "half", Type: TypeNumber}, {Name: "late", Type: TypeText}}
	if !slices.Equal(rec.cols, want) {
		t.Errorf("columns = %v, want %v", rec.cols, want)
	}
	if len(rec.rows) != 250 {
		t.Fatalf("%d rows, want 250", len(rec.rows))
	}
	for i, r := range rec.rows {
		x := int64(i + 1)
		var half, late any
		if x > 50 {
			half = float64(x) * 0.5
		}
		if x > 150 {
			late = "late"
		}
		srcCheckRows(t, [][]any{r}, [][]any{{x, half, late}})
	}

	// Binary data that is not UTF-8 shows as hex.
	rec = srcMustStream(t, src, srcReport(`SELECT X'00ff10' AS raw`), nil)
	srcCheckRows(t, rec.rows, [][]any{{"0x00ff10"}})
}

func TestSQLiteSourceMissingFile(t *testing.T) {
	dir := t.TempDir()
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: "gone.db"}, dir)
	if err != nil {
		t.Fatalf("a missing file must not fail at startup: %v", err)
	}
	_, err = srcStream(t.Context(), t, src, srcReport("SELECT 1"), nil)
	srcJobError(t, err, false, "upstream")
	if want := "database file gone.db does not exist"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Errorf("the source created %v", m)
	}
}

// TestSQLiteSourceWriterError checks that a RowWriter's error comes back unchanged.
func TestSQLiteSourceWriterError(t *testing.T) {
	path, _ := newSQLiteItems(t)
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("writer full")
	err = src.Stream(t.Context(), Query{Report: srcReport("SELECT id FROM items"), Params: map[string]any{}}, &srcFailingWriter{err: stop})
	if err != stop {
		t.Fatalf("err = %v, want the writer's own error", err)
	}
}

// srcFailingWriter fails on the first row.
type srcFailingWriter struct{ err error }

func (w *srcFailingWriter) Begin([]Column, int64) error { return nil }
func (w *srcFailingWriter) Row([]any) error             { return w.err }

func TestColSpecConvert(t *testing.T) {
	for _, c := range []struct {
		spec colSpec
		in   any
		want any
	}{
		{colSpec{typ: TypeInt}, int32(-7), int64(-7)},
		{colSpec{typ: TypeInt}, uint64(1 << 63), "9223372036854775808"},
		{colSpec{typ: TypeInt}, []byte("42"), int64(42)},
		{colSpec{typ: TypeInt}, "n/a", "n/a"},
		{colSpec{typ: TypeNumber}, "12345678901234567890.5", 12345678901234567890.5},
		{colSpec{typ: TypeNumber}, "NaN", "NaN"},
		{colSpec{typ: TypeNumber}, []byte("-0.25"), -0.25},
		{colSpec{typ: TypeNumber}, float32(0.1), 0.1},
		{colSpec{typ: TypeNumber, float32: true}, float64(float32(3.3)), 3.3},
		{colSpec{typ: TypeNumber}, int64(3), 3.0},
		{colSpec{typ: TypeBool}, int64(1), true},
		{colSpec{typ: TypeBool}, []byte("0"), false},
		{colSpec{typ: TypeBool, bits: true}, []byte{1}, true},
		{colSpec{typ: TypeInt, bits: true}, []byte{1, 0}, int64(256)},
		{colSpec{typ: TypeDate}, "2024-02-29", utcDay(2024, 2, 29)},
		{colSpec{typ: TypeDate}, time.Date(2024, 2, 29, 0, 0, 0, 0, time.FixedZone("x", 3600)), utcDay(2024, 2, 29)},
		{colSpec{typ: TypeDate}, time.Time{}, nil},
		{colSpec{typ: TypeDatetime}, time.Date(2024, 3, 1, 1, 0, 0, 0, time.FixedZone("x", 3600)), utcAt(2024, 3, 1, 0, 0, 0)},
		{colSpec{typ: TypeDatetime}, "infinity", "infinity"},
		{colSpec{typ: TypeDatetime}, "2024-03-01T10:00:00+02:00", utcAt(2024, 3, 1, 8, 0, 0)},
		{colSpec{typ: TypeText}, []byte("héllo"), "héllo"},
		{colSpec{typ: TypeText}, []byte{0xff, 0x00}, "0xff00"},
		{colSpec{typ: TypeText}, nil, nil},
	} {
		if got := c.spec.convert(c.in); !srcSameValue(got, c.want) {
			t.Errorf("%+v.convert(%#v) = %#v (%T), want %#v (%T)", c.spec, c.in, got, got, c.want, c.want)
		}
	}
}

func TestSQLiteURI(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "odd name?#%.db")
	db, err := sql.Open("sqlite", sqliteURI(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	src, err := OpenSource("odd", SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := srcMustStream(t, src, srcReport("SELECT x FROM t"), nil)
	srcCheckRows(t, rec.rows, [][]any{{int64(7)}})
}
