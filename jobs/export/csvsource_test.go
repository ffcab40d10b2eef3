package export

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// itemsCSV holds itemRows as a CSV file, in the forms people export.
const itemsCSV = "\ufeffid,big,price,ratio,f4,day,at,atz,ok,name,note\r\n" +
	"1,9007199254740993,1234.56,0.25,1.1,2024-02-29,2024-03-01 13:45:30,2024-03-01T12:00:00Z,true,Ada Lovelace,rush\r\n" +
	"2,-5,-0.5,0.001,-2.5,1999-12-31,2000-01-01T00:00,2000-01-01T00:00:00+01:00,FALSE,\"Grace 'O' \"\"Hopper\"\"\",\r\n" +
	"3,,,,,,,,,,\r\n"

// newCSVSource writes files into a new folder and opens a csv source on it, with its
// temporary databases in a folder of their own, which it returns.
func newCSVSource(t *testing.T, files map[string]string) (*csvSource, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := OpenSource("files", SourceConfig{Driver: "csv", Path: filepath.Base(dir)}, filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	cs := src.(*csvSource)
	cs.tmpDir = t.TempDir()
	return cs, dir
}

func TestCSVSource(t *testing.T) {
	src, dir := newCSVSource(t, map[string]string{
		"items.csv": itemsCSV,
		// Not named by any query: were it imported, every query would fail.
		"broken.csv": "a,b\n1\n",
		"notes.txt":  "not a table",
	})
	testSrcFixture(t, srcFixture{
		src:   src,
		table: "items",
		rowCount: func(t *testing.T) int64 {
			b, err := os.ReadFile(filepath.Join(dir, "items.csv"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != itemsCSV {
				t.Fatalf("items.csv changed:\n%s", b)
			}
			return int64(len(itemRows))
		},
		slow: sqliteSlow,
	})
	if left, _ := os.ReadDir(src.tmpDir); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestCSVSourceJoin(t *testing.T) {
	src, _ := newCSVSource(t, map[string]string{
		"Customers.csv": "id,name,since\n1,Ada,2020-01-01\n2,Grace,2021-06-30 08:00\n",
		"orders.csv":    "id,customer_id,total,zip\n10,1,9.5,02134\n11,1,10,10001\n12,2,,\n",
	})
	rep := srcReport(`SELECT c.name, c.since, count(o.id) AS orders, sum(o.total) AS total, max(o.zip) AS zip
		FROM customers c JOIN orders o ON o.customer_id = c.id
		WHERE c.name <> :skip GROUP BY c.id ORDER BY c.id`, Param{Name: "skip", Type: TypeText})
	rep.Count = true
	rec := srcMustStream(t, src, rep, map[string]any{"skip": "nobody"})
	want := []Column{{Name: "name", Type: TypeText}, {Name: "since", Type: TypeDatetime}, {Name: "orders", Type: TypeInt}, {Name: "total", Type: TypeNumber}, {Name: "zip", Type: TypeText}}
	if !slices.Equal(rec.cols, want) {
		t.Errorf("columns = %v, want %v", rec.cols, want)
	}
	if rec.total != 2 {
		t.Errorf("total = %d, want 2", rec.total)
	}
	// zip keeps its leading zero: a column with one is text.
	srcCheckRows(t, rec.rows, [][]any{
		{"Ada", utcAt(2020, 1, 1, 0, 0, 0), int64(2), 19.5, "10001"},
		{"Grace", utcAt(2021, 6, 30, 8, 0, 0), int64(1), nil, nil},
	})
}

func TestCSVSourceHeader(t *testing.T) {
	src, _ := newCSVSource(t, map[string]string{"t.csv": "\ufeff a ,,A,a, \nx,y,z,w,v\n"})
	rec := srcMustStream(t, src, srcReport(`SELECT * FROM t`), nil)
	var names []string
	for _, c := range rec.cols {
		names = append(names, c.Name)
	}
	if want := []string{"a", "column_2", "A_2", "a_3", "column_5"}; !slices.Equal(names, want) {
		t.Errorf("names = %q, want %q", names, want)
	}
	srcCheckRows(t, rec.rows, [][]any{{"x", "y", "z", "w", "v"}})
}

func TestCSVSourceSeparators(t *testing.T) {
	src, _ := newCSVSource(t, map[string]string{
		"semi.csv": "a;b\n1;2,5\n",
		"tabs.csv": "a\tb\n1\tx\n",
	})
	rec := srcMustStream(t, src, srcReport(`SELECT semi.a, semi.b, tabs.b AS c FROM semi, tabs`), nil)
	if want := []Column{{Name: "a", Type: TypeInt}, {Name: "b", Type: TypeText}, {Name: "c", Type: TypeText}}; !slices.Equal(rec.cols, want) {
		t.Errorf("columns = %v, want %v", rec.cols, want)
	}
	srcCheckRows(t, rec.rows, [][]any{{int64(1), "2,5", "x"}})
}

func TestCSVSourceErrors(t *testing.T) {
	for _, c := range []struct {
		name, content string
		permanent     bool
		code, want    string
	}{
		{"fields", "a,b\n1,2\n3\n", true, "bad_csv", "t.csv: record on line 3: wrong number of fields"},
		{"quote", "a,b\n1,x\"y\n", true, "bad_csv", "t.csv: parse error on line 2, column 4"},
		{"empty", "", true, "bad_csv", "t.csv is empty"},
		{"no table", "", true, "query", "no such table: t"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"t.csv": c.content}
			if c.name == "no table" {
				files = map[string]string{"other.csv": "a\n1\n"}
			}
			src, _ := newCSVSource(t, files)
			_, err := srcStream(t.Context(), t, src, srcReport("SELECT * FROM t"), nil)
			srcJobError(t, err, c.permanent, c.code)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			if left, _ := os.ReadDir(src.tmpDir); len(left) != 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}

	t.Run("missing folder", func(t *testing.T) {
		src, err := OpenSource("files", SourceConfig{Driver: "csv", Path: "nowhere"}, t.TempDir())
		if err != nil {
			t.Fatalf("a missing folder must not fail at startup: %v", err)
		}
		_, err = srcStream(t.Context(), t, src, srcReport("SELECT * FROM t"), nil)
		srcJobError(t, err, false, "upstream")
		if !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("error %q does not say the folder is missing", err)
		}
	})

	t.Run("same table twice", func(t *testing.T) {
		src, _ := newCSVSource(t, map[string]string{"t.csv": "a\n1\n", "T.CSV": "a\n2\n"})
		_, err := srcStream(t.Context(), t, src, srcReport("SELECT * FROM t"), nil)
		srcJobError(t, err, true, "bad_csv")
	})
}

func TestCSVTypes(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
	}{
		{[]string{"1", "-2", "+3", "0"}, "INTEGER"},
		{[]string{"1", "2.5", "1e3"}, "REAL"},
		{[]string{"007", "12"}, "TEXT"},                // a leading zero is an identifier
		{[]string{"123456789012345678901"}, "TEXT"},    // too big for int64: keep the digits
		{[]string{"NaN"}, "TEXT"},                      // ParseFloat would take it
		{[]string{"0x1F"}, "TEXT"},                     // and this
		{[]string{"true", "FALSE", "True"}, "BOOLEAN"}, // any case
		{[]string{"1", "0", "true"}, "TEXT"},           // not one type
		{[]string{"2024-02-29", "1999-01-01"}, "DATE"},
		{[]string{"2024-02-30"}, "TEXT"}, // no such day
		{[]string{"2024-02-29", "2024-03-01 10:00"}, "DATETIME"},
		{[]string{"2024-03-01T10:00:00.5+02:00"}, "DATETIME"},
		{[]string{"2024-03-01 10:00:00Z", "2024-03-01T10:00:00"}, "DATETIME"},
		{[]string{"01/02/2024"}, "TEXT"},
		{nil, "TEXT"}, // empty in every row
	} {
		k, seen := csvAnyKind, false
		for _, v := range c.values {
			k &= csvKindsOf(v)
			seen = true
		}
		if got := csvDecl(k, seen); got != c.want {
			t.Errorf("%q: %s, want %s", c.values, got, c.want)
		}
	}

	for _, c := range []struct {
		decl, in string
		want     any
	}{
		{"INTEGER", " 42 ", int64(42)},
		{"INTEGER", "  ", nil},
		{"TEXT", "  ", "  "},
		{"TEXT", "", nil},
		{"REAL", "1e3", 1000.0},
		{"BOOLEAN", "True", 1},
		{"DATE", "2024-02-29", "2024-02-29"},
		{"DATETIME", "2024-02-29", "2024-02-29 00:00:00"},
		{"DATETIME", "2024-03-01T10:00:00.5+02:00", "2024-03-01 08:00:00.5"},
	} {
		if got := csvValue(c.decl, c.in); got != c.want {
			t.Errorf("csvValue(%s, %q) = %#v, want %#v", c.decl, c.in, got, c.want)
		}
	}
}

func TestLineLimiter(t *testing.T) {
	in := "ok\n" + strings.Repeat("x", 100) + "\nok\n"
	_, err := io.ReadAll(&lineLimiter{r: strings.NewReader(in), max: 50})
	var le *lineTooLongError
	if !errors.As(err, &le) || le.line != 2 {
		t.Fatalf("err = %v, want line 2 too long", err)
	}
	got, err := io.ReadAll(&lineLimiter{r: strings.NewReader(in), max: 100})
	if err != nil || !bytes.Equal(got, []byte(in)) {
		t.Fatalf("a line at the limit: %q, %v", got, err)
	}
}
