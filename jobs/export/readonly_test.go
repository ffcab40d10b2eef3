package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportSQLOnlyReadsFileSources: a report over a sqlite or csv source can neither
// attach, detach nor write, and creates no file: ATTACH used to create the file it named.
func TestReportSQLOnlyReadsFileSources(t *testing.T) {
	path, db := newSQLiteItems(t)
	sqliteSrc, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		t.Fatal(err)
	}
	csvSrc, csvDir := newCSVSource(t, map[string]string{"items.csv": itemsCSV})
	for _, c := range []struct {
		name  string
		src   Source
		count func(t *testing.T) int64
	}{
		{"sqlite", sqliteSrc, func(t *testing.T) int64 {
			var n int64
			if err := db.QueryRow("SELECT count(*) FROM items").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}},
		{"csv", csvSrc, func(t *testing.T) int64 {
			if b, err := os.ReadFile(filepath.Join(csvDir, "items.csv")); err != nil || string(b) != itemsCSV {
				t.Fatalf("items.csv changed (%v)", err)
			}
			return int64(len(itemRows))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir() // where a hostile query would create files
			target := filepath.Join(dir, "x.db")
			for _, q := range []struct{ sql, want string }{
				{"ATTACH DATABASE '" + target + "' AS x", "must start with SELECT, WITH or VALUES, not ATTACH"},
				{"attach '" + target + "' as x", "not ATTACH"},
				{"/* hi */ (DETACH DATABASE main)", "not DETACH"},
				{"DETACH x", "not DETACH"},
				{"VACUUM INTO '" + filepath.Join(dir, "v.db") + "'", "not VACUUM"},
				{"PRAGMA query_only = 0", "not PRAGMA"},
				{"CREATE TEMP TABLE t (x)", "not CREATE"},
				{"INSERT INTO items (id) VALUES (99)", "not INSERT"},
				// These pass the statement check; the connection refuses them.
				{"WITH n AS (SELECT 99) INSERT INTO items (id) SELECT * FROM n", "a report may only read"},
				{"WITH n AS (SELECT 1) DELETE FROM items", "a report may only read"},
				{"WITH n AS (SELECT 1) UPDATE items SET name = 'x'", "a report may only read"},
			} {
				for _, count := range []bool{false, true} {
					rep := srcReport(q.sql)
					rep.Count = count
					_, err := srcStream(t.Context(), t, c.src, rep, nil)
					if err == nil {
						t.Errorf("%s: no error", q.sql)
						continue
					}
					srcJobError(t, err, true, "query")
					// Counted, a write is a syntax error inside the count's subquery.
					if !count && !strings.Contains(err.Error(), q.want) {
						t.Errorf("%s: error %q does not say %q", q.sql, err, q.want)
					}
				}
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("report SQL created %v", left)
			}
			if n := c.count(t); n != int64(len(itemRows)) {
				t.Errorf("%d rows after refused writes, want %d", n, len(itemRows))
			}
			// Reading still works, schema functions included.
			rec := srcMustStream(t, c.src, srcReport("SELECT name FROM pragma_table_info('items') WHERE cid = 0"), nil)
			srcCheckRows(t, rec.rows, [][]any{{"id"}})
			rec = srcMustStream(t, c.src, srcReport("SELECT count(*) FROM json_each('[1,2]')"), nil)
			srcCheckRows(t, rec.rows, [][]any{{int64(2)}})
		})
	}
	if left, _ := os.ReadDir(csvSrc.tmpDir); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestReadOnlySQLiteConnection checks the defence itself, below the statement check: a
// connection made read-only refuses ATTACH, DETACH, settings and writes, and creates
// no file, whatever the statement starts with.
func TestReadOnlySQLiteConnection(t *testing.T) {
	path, _ := newSQLiteItems(t)
	db, err := openSQLiteReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := readOnlySQLite(conn); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, q := range []string{
		"ATTACH DATABASE '" + filepath.Join(dir, "a.db") + "' AS a",
		"ATTACH 'file:" + filepath.Join(dir, "b.db") + "?mode=rwc' AS b",
		"DETACH DATABASE temp",
		"VACUUM INTO '" + filepath.Join(dir, "v.db") + "'",
		"PRAGMA query_only = 0",
		"PRAGMA user_version = 7",
		"CREATE TEMP TABLE t (x)",
		"CREATE TEMP VIEW v AS SELECT 1",
		"INSERT INTO items (id) VALUES (99)",
		"DELETE FROM items",
		"SAVEPOINT s",
		"ANALYZE",
	} {
		if _, err := conn.ExecContext(t.Context(), q); err == nil {
			t.Errorf("%s: no error", q)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("statements created %v", left)
	}
	var n int
	if err := conn.QueryRowContext(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != len(itemRows) {
		t.Errorf("count = %d, %v; want %d", n, err, len(itemRows))
	}
}

func TestReadOnlyProblem(t *testing.T) {
	for _, c := range []struct {
		sql  string
		bad  string // the keyword named in the message; "" for allowed
		line int
	}{
		{"SELECT 1", "", 0},
		{"  with x as (select 1) select * from x", "", 0},
		{"VALUES (1), (2)", "", 0},
		{"((SELECT 1) UNION (SELECT 2))", "", 0},
		{"-- note\n/* c */ select 1", "", 0},
		{"", "", 0},
		{"ATTACH 'x' AS y", "ATTACH", 1},
		{"-- c\n\n  detach y", "DETACH", 3},
		{"pragma writable_schema = 1", "PRAGMA", 1},
		{"/* x */\nINSERT INTO t VALUES (1)", "INSERT", 2},
		{"COPY t TO '/tmp/x'", "COPY", 1},
		{"SET SESSION TRANSACTION READ WRITE", "SET", 1},
		{"EXPLAIN SELECT 1", "EXPLAIN", 1},
		{"'SELECT'", "'", 1},
		{"SELECTX 1", "SELECTX", 1},
		{"\n→ SELECT 1", "→", 2},
	} {
		msg, line := readOnlyProblem(c.sql)
		switch {
		case c.bad == "" && msg != "":
			t.Errorf("%q: refused: %s", c.sql, msg)
		case c.bad != "" && (!strings.HasSuffix(msg, "not "+c.bad) || line != c.line):
			t.Errorf("%q: %q on line %d, want it to name %s on line %d", c.sql, msg, line, c.bad, c.line)
		}
	}
	for _, c := range []struct {
		sql string
		bad bool
	}{
		{"SELECT 1", false},
		{"SELECT 1 INTO OUTFILE '/tmp/x'", true},
		{"SELECT 1 INTO\n dumpfile '/tmp/x'", true},
		{"SELECT 1 /*!50000 INTO @x */", true},
		{"SELECT 1 /*M!100000 x */", true},
		{"SELECT 'x\\'' INTO OUTFILE '/tmp/y' -- '", true},
		{"SELECT outfile_count FROM t /*+ hint */", false},
	} {
		if got := mysqlProblem(c.sql) != ""; got != c.bad {
			t.Errorf("mysqlProblem(%q) refused = %v, want %v", c.sql, got, c.bad)
		}
	}
}
