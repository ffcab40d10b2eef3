package export

import (
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// resumeRows is how many rows the SQL resume tests export: four sheets of 2,500.
const resumeRows = 9000

// testSQLResume exports table (id, name, amount; resumeRows rows, stored in no
// particular order) from src through a report with "-- resume: id" and a parameter,
// crashing once or several times, and wants every sheet's XML equal to an
// uninterrupted export's, each resumed attempt continuing from the checkpoint's rows.
func testSQLResume(t *testing.T, src Source, table string) {
	rep := Report{ID: "orders", Source: "shop", Sheet: "Orders", Resume: "id",
		Query:  "SELECT id, name, amount FROM " + table + " WHERE id >= :from ORDER BY id",
		Params: []Param{{Name: "from", Type: TypeInt}}}
	q := Query{Report: rep, Params: map[string]any{"from": int64(1)}, Attempt: 1}
	if ok, why := src.(Resumer).Resumable(rep); !ok {
		t.Fatalf("not resumable: %s", why)
	}
	const perSheet = 2500
	_, want := exportWith(t, src, q, xlsxOptions{maxSheetRows: perSheet})
	for _, crashes := range [][]int64{{1700}, {2600, 10, 3333}, {8999}} {
		t.Run(fmt.Sprint(crashes), func(t *testing.T) {
			r := &resumeRun{dir: filepath.Join(t.TempDir(), "resume", "job"), tmp: t.TempDir(), every: 700}
			var cp []byte
			var kept int64
			for _, crash := range crashes {
				_, last, resumed, err := r.run(t, src, q, cp, crash, perSheet)
				if err == nil {
					t.Fatal("the export finished")
				}
				if cp != nil && resumed != kept {
					t.Fatalf("resumed with %d rows, want the checkpoint's %d", resumed, kept)
				}
				if last != nil {
					cp, kept = last, decodeCheckpoint(t, last).Rows
				}
			}
			data, _, resumed, err := r.run(t, src, q, cp, -1, perSheet)
			if err != nil {
				t.Fatal(err)
			}
			if resumed != kept || kept == 0 {
				t.Fatalf("resumed with %d rows, want the checkpoint's %d (> 0)", resumed, kept)
			}
			sameSheets(t, data, want, 4)
		})
	}
	t.Run("a resume column the query does not return", func(t *testing.T) {
		bad := rep
		bad.Resume = "nope"
		r := &resumeRun{dir: filepath.Join(t.TempDir(), "job"), tmp: t.TempDir(), every: 100}
		_, _, _, err := r.run(t, src, Query{Report: bad, Params: q.Params, Attempt: 1}, nil, -1, perSheet)
		if err == nil || !permanent(err) {
			t.Fatalf("err = %v, want a permanent error", err)
		}
	})
}

func TestSQLiteSourceResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{
		`CREATE TABLE orders (id INTEGER NOT NULL UNIQUE, name TEXT, amount REAL)`,
		// Stored backwards, so that only the ORDER BY gives the order.
		fmt.Sprintf(`WITH RECURSIVE c(x) AS (SELECT %d UNION ALL SELECT x - 1 FROM c WHERE x > 1)
			INSERT INTO orders SELECT x, 'customer ' || x, x * 1.25 FROM c`, resumeRows),
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: filepath.Base(path)}, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer src.(io.Closer).Close()
	testSQLResume(t, src, "orders")
}

func TestPostgresSourceResumes(t *testing.T) {
	dsn := serverDSN(t, "SHEETQ_TEST_POSTGRES_DSN")
	fx := serverFixture(t, "postgres", "pgx", dsn, `CREATE TABLE {table} (id integer PRIMARY KEY, name text, amount double precision)`,
		[]string{fmt.Sprintf(`INSERT INTO {table} SELECT g, 'customer ' || g, g * 1.25 FROM generate_series(%d, 1, -1) g`, resumeRows)}, "")
	testSQLResume(t, fx.src, fx.table)
}

func TestMySQLSourceResumes(t *testing.T) {
	dsn := serverDSN(t, "SHEETQ_TEST_MYSQL_DSN")
	fx := serverFixture(t, "mysql", "mysql", dsn, `CREATE TABLE {table} (id int PRIMARY KEY, name text, amount double)`,
		// A cross join of digits: MariaDB stops a recursive query at 1,000 iterations.
		[]string{fmt.Sprintf(`INSERT INTO {table} SELECT n, CONCAT('customer ', n), n * 1.25 FROM (
			SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1 AS n FROM %[1]s a, %[1]s b, %[1]s c, %[1]s e) x
			WHERE n <= %[2]d ORDER BY n DESC`, "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)", resumeRows)}, "")
	testSQLResume(t, fx.src, fx.table)
}

// A report says whether it resumes, and how to make it when it does not.
func TestResumableReports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	k := New(Config{Sources: map[string]Source{
		"shop": &sqlSource{name: "shop", dialect: sqliteDialect, path: path},
		"mem":  sliceSource{},
	}})
	for _, tt := range []struct {
		rep  Report
		ok   bool
		note string
	}{
		{Report{ID: "a", Source: "shop", Resume: "id"}, true, ""},
		{Report{ID: "b", Source: "shop"}, false, `add a "-- resume: COLUMN" line`},
		{Report{ID: "c", Source: "demo"}, true, ""},
		{Report{ID: "d", Source: "mem"}, false, "cannot continue a query where it stopped"},
		{Report{ID: "e", Source: "gone"}, false, "not configured"},
	} {
		ok, note := k.Resumable(tt.rep)
		if ok != tt.ok || (tt.note == "") != (note == "") || !strings.Contains(note, tt.note) {
			t.Errorf("%s: Resumable = %v, %q; want %v, %q", tt.rep.ID, ok, note, tt.ok, tt.note)
		}
	}
}
