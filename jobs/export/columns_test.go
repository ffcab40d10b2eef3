package export

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// A report's column lines reach the writer: labels, formats and types on the columns
// Begin announces, values converted to the declared types, what does not convert kept
// as text with one warning per column, and a line naming no column warned about.
func TestColumnsApply(t *testing.T) {
	srcCols := []Column{
		{Name: "id", Type: TypeInt},
		{Name: "created_at", Type: TypeText}, // SQLite text that holds datetimes
		{Name: "unit_price", Type: TypeNumber},
		{Name: "qty", Type: TypeText},
		{Name: "paid", Type: TypeInt},
		{Name: "Total", Type: TypeNumber},
		{Name: "day", Type: TypeDatetime},
		{Name: "code", Type: TypeInt},
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	src := sliceSource{cols: slices.Clone(srcCols), total: 4, rows: [][]any{
		{int64(1), "2025-03-04 05:06:07", 26.5, "3", int64(1), 1133.0, at, int64(7)},
		{int64(2), "2025-03-04T05:06:07+02:00", 53.0, " 12 ", int64(0), 53.0, at.Add(20 * time.Hour), int64(8)},
		{int64(3), "yesterday", nil, "3.5", nil, 26.5, nil, int64(9)},
		{int64(4), []byte("2025-03-04"), 1.0, "lots", int64(1), 0.0, at, int64(10)},
	}}
	specs := []ColumnSpec{
		{Name: "unit_price", Label: "Unit price", Type: TypeNumber, Format: "#,##0.00"},
		{Name: "created_at", Label: "Created", Type: TypeDatetime},
		{Name: "qty", Type: TypeInt},
		{Name: "paid", Label: "Paid", Type: TypeBool},
		{Name: "total", Label: "Total (EUR)"}, // no exact match: found case-blind
		{Name: "day", Type: TypeDate, Format: "dd.mm.yyyy"},
		{Name: "code", Type: TypeText},
		{Name: "discount", Label: "Discount"}, // the query returns no such column
	}
	var warnings []string
	rec := &srcRecorder{}
	err := withColumns(src, specs, func(m string) { warnings = append(warnings, m) }).Stream(t.Context(), Query{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []Column{
		{Name: "id", Type: TypeInt},
		{Name: "created_at", Type: TypeDatetime, Label: "Created"},
		{Name: "unit_price", Type: TypeNumber, Label: "Unit price", Format: "#,##0.00"},
		{Name: "qty", Type: TypeInt},
		{Name: "paid", Type: TypeBool, Label: "Paid"},
		{Name: "Total", Type: TypeNumber, Label: "Total (EUR)"},
		{Name: "day", Type: TypeDate, Format: "dd.mm.yyyy"},
		{Name: "code", Type: TypeText},
	}
	if !reflect.DeepEqual(rec.cols, wantCols) || rec.total != 4 {
		t.Errorf("columns\n got %+v (total %d)\nwant %+v", rec.cols, rec.total, wantCols)
	}
	if !reflect.DeepEqual(src.cols, srcCols) {
		t.Errorf("the source's columns were changed: %+v", src.cols)
	}
	day := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)
	wantRows := [][]any{
		{int64(1), at, 26.5, int64(3), true, 1133.0, day, "7"},
		{int64(2), at.Add(-2 * time.Hour), 53.0, int64(12), false, 53.0, day.AddDate(0, 0, 1), "8"},
		{int64(3), "yesterday", nil, "3.5", nil, 26.5, nil, "9"},
		{int64(4), day, 1.0, "lots", true, 0.0, day, "10"},
	}
	if !reflect.DeepEqual(rec.rows, wantRows) {
		t.Errorf("rows\n got %#v\nwant %#v", rec.rows, wantRows)
	}
	wantWarnings := []string{
		`column line "discount": the query returns no such column (it returns id, created_at, unit_price, qty, paid, Total, day, code)`,
		`column "created_at": 1 value is not datetime and stayed text (the first: "yesterday")`,
		`column "qty": 2 values are not int and stayed text (the first: "3.5")`,
	}
	if !slices.Equal(warnings, wantWarnings) {
		t.Errorf("warnings\n got %q\nwant %q", warnings, wantWarnings)
	}
}

// Without column lines the source is not wrapped; a failed stream warns of nothing,
// since its file is thrown away; an exact name wins over a case-blind one.
func TestColumnsEdges(t *testing.T) {
	src := sliceSource{cols: []Column{{Name: "a", Type: TypeInt}}, rows: [][]any{{int64(1)}}}
	if got := withColumns(src, nil, nil); !reflect.DeepEqual(got, Source(src)) {
		t.Errorf("no column lines: got %#v, want the source itself", got)
	}

	boom := errors.New("boom")
	var warnings []string
	failing := sliceSource{err: boom}
	err := withColumns(failing, []ColumnSpec{{Name: "missing"}}, func(m string) { warnings = append(warnings, m) }).
		Stream(context.Background(), Query{}, &srcRecorder{})
	if !errors.Is(err, boom) || len(warnings) != 0 {
		t.Errorf("failed stream: err %v, warnings %q; want boom and none", err, warnings)
	}

	both := sliceSource{cols: []Column{{Name: "ID", Type: TypeInt}, {Name: "id", Type: TypeInt}}, rows: [][]any{{int64(1), int64(2)}}}
	rec := &srcRecorder{}
	if err := withColumns(both, []ColumnSpec{{Name: "id", Label: "Id"}}, nil).Stream(t.Context(), Query{}, rec); err != nil {
		t.Fatal(err)
	}
	if rec.cols[0].Label != "" || rec.cols[1].Label != "Id" {
		t.Errorf("exact match: got %+v", rec.cols)
	}
}

// convertValue turns what sources send into each declared type, and says when it
// cannot, returning the value as text.
func TestConvertValue(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 800e6, time.UTC)
	day := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		v    any
		from Type
		to   Type
		want any
		ok   bool
	}{
		{nil, TypeText, TypeInt, nil, true},
		{int64(5), TypeInt, TypeText, "5", true},
		{2.50, TypeNumber, TypeText, "2.5", true},
		{1e21, TypeNumber, TypeText, "1000000000000000000000", true},
		{true, TypeBool, TypeText, "true", true},
		{at, TypeDatetime, TypeText, "2025-03-04 05:06:07.8", true},
		{day, TypeDate, TypeText, "2025-03-04", true},
		{[]byte{0xff, 0x00}, TypeText, TypeText, "0xff00", true},
		{[]byte{0xff, 0x00}, TypeText, TypeInt, "0xff00", false},
		{"42", TypeText, TypeInt, int64(42), true},
		{"42.0", TypeText, TypeInt, int64(42), true},
		{42.5, TypeNumber, TypeInt, "42.5", false},
		{1e300, TypeNumber, TypeInt, "1" + strings.Repeat("0", 300), false},
		{int32(7), TypeInt, TypeInt, int64(7), true},
		{uint64(1 << 63), TypeInt, TypeInt, "9223372036854775808", false},
		{true, TypeBool, TypeInt, int64(1), true},
		{"1,5", TypeText, TypeNumber, "1,5", false},
		{" 26.5 ", TypeText, TypeNumber, 26.5, true},
		{int64(3), TypeInt, TypeNumber, 3.0, true},
		{"NaN", TypeText, TypeNumber, "NaN", false},
		{"yes", TypeText, TypeBool, true, true},
		{"F", TypeText, TypeBool, false, true},
		{int64(2), TypeInt, TypeBool, true, true},
		{0.0, TypeNumber, TypeBool, false, true},
		{"maybe", TypeText, TypeBool, "maybe", false},
		{"2025-03-04 05:06:07.8", TypeText, TypeDatetime, at, true},
		{"2025-03-04 05:06", TypeText, TypeDatetime, time.Date(2025, 3, 4, 5, 6, 0, 0, time.UTC), true},
		{"2025-03-04", TypeText, TypeDatetime, day, true},
		{"2025-03-04T07:06:07.8+02:00", TypeText, TypeDate, day, true},
		{at, TypeDatetime, TypeDate, day, true},
		{int64(1741064767), TypeInt, TypeDatetime, "1741064767", false},
		{"04/03/2025", TypeText, TypeDate, "04/03/2025", false},
	}
	for _, tt := range tests {
		got, ok := convertValue(tt.v, tt.from, tt.to)
		if !reflect.DeepEqual(got, tt.want) || ok != tt.ok {
			t.Errorf("convertValue(%#v, %s -> %s) = %#v, %v; want %#v, %v", tt.v, tt.from, tt.to, got, ok, tt.want, tt.ok)
		}
	}
}

// A report's column lines, end to end: parsed from the file, kept in the job's spec,
// applied to a SQLite source's rows by the export job, and read back from the
// published file with openpyxl: labels, types (text in SQLite, dates and numbers in the
// file) and number formats; the value that does not convert is a warning, and the
// download is named by the filename pattern.
func TestColumnLinesEndToEnd(t *testing.T) {
	t.Parallel()
	openpyxl(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "shop.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	// Declared TEXT: the source sends text, which only the column lines make typed.
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER, created_at TEXT, unit_price TEXT, qty TEXT, paid TEXT);
		INSERT INTO orders VALUES
			(1, '2025-03-04 05:06:07', '1133', '2', 'true'),
			(2, '2025-03-05T10:00:00Z', '26.5', '1', 'false'),
			(3, 'soon', '53', NULL, 'yes')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: dbPath}, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ParseReport("reports/priced.sql", []byte(`-- title: Priced
-- source: shop
-- param: from date = 2025-03-01
-- filename: orders from {from}
-- column: created_at "Created" datetime(yyyy-mm-dd hh:mm)
-- column: unit_price "Unit price" number(#,##0.00)
-- column: qty "Qty" int
-- column: paid "Paid" bool
SELECT id, created_at, unit_price, qty, paid FROM orders WHERE :from <= '2025-03-01' ORDER BY id;
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	changed := make(chan struct{}, 1)
	eng := jobs.New(st, jobs.Config{Workers: 1, TmpDir: filepath.Join(dir, "tmp"), ExportsDir: filepath.Join(dir, "exports"),
		Logger: slog.New(slog.DiscardHandler), OnChange: wakeUp(changed)})
	kind := New(Config{TmpDir: filepath.Join(dir, "spill"), Library: oneReport{rep}, Sources: map[string]Source{"shop": src}})
	eng.Register(Name, kind)
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	j := runExport(t, eng, st, kind, "priced", 0, changed, nil)
	if j.Status != store.StatusSucceeded {
		t.Fatalf("job %s: %s %s", j.Status, j.ErrorCode, j.ErrorMessage)
	}
	if want := []string{`column "created_at": 1 value is not datetime and stayed text (the first: "soon")`}; !slices.Equal(j.Warnings, want) {
		t.Errorf("warnings %q, want %q", j.Warnings, want)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.DateTime, s); return v }
	want := [][]any{
		{Column{Name: "id", Type: TypeInt}, Column{Name: "created_at", Type: TypeDatetime, Label: "Created", Format: "yyyy-mm-dd hh:mm"},
			Column{Name: "unit_price", Type: TypeNumber, Label: "Unit price", Format: "#,##0.00"},
			Column{Name: "qty", Type: TypeInt, Label: "Qty"}, Column{Name: "paid", Type: TypeBool, Label: "Paid"}},
		{int64(1), at("2025-03-04 05:06:07"), 1133.0, int64(2), true},
		{int64(2), at("2025-03-05 10:00:00"), 26.5, int64(1), false},
		{int64(3), "soon", 53.0, nil, true},
	}
	assertReadbackMatches(t, jobs.FilePath(filepath.Join(dir, "exports"), j.FileName), want)
	if got := JobJSON(j, "").File.Name; got != "orders from 2025-03-01.xlsx" {
		t.Errorf("download name %q, want the pattern's", got)
	}
}
