package export

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOpenSourceConfigErrors(t *testing.T) {
	t.Setenv("SHEETQ_TEST_EMPTY_DSN", "")
	for _, c := range []struct {
		sc   SourceConfig
		want string
	}{
		{SourceConfig{}, "missing driver"},
		{SourceConfig{Driver: "oracle", DSN: "x"}, `unknown driver "oracle"`},
		{SourceConfig{Driver: "sqlite"}, "needs path"},
		{SourceConfig{Driver: "sqlite", Path: "a.db", DSN: "x"}, "takes path, not dsn"},
		{SourceConfig{Driver: "csv"}, "needs path"},
		{SourceConfig{Driver: "postgres"}, "needs dsn"},
		{SourceConfig{Driver: "mysql", DSN: "u:p@/db", Path: "x"}, "takes dsn, not path"},
		{SourceConfig{Driver: "postgres", DSN: "env:SHEETQ_TEST_UNSET_DSN_VAR"}, "environment variable SHEETQ_TEST_UNSET_DSN_VAR is not set"},
		{SourceConfig{Driver: "mysql", DSN: "env:SHEETQ_TEST_EMPTY_DSN"}, "environment variable SHEETQ_TEST_EMPTY_DSN is not set"},
		{SourceConfig{Driver: "mysql", DSN: "env:"}, "names no environment variable"},
		{SourceConfig{Driver: "postgres", DSN: "postgres://u:hunter2@localhost:notaport/db"}, "invalid postgres dsn"},
		{SourceConfig{Driver: "postgres", DSN: "host=localhost password=hunter2 port=x"}, "invalid postgres dsn"},
		{SourceConfig{Driver: "mysql", DSN: "u:hunter2@tcp(localhost:3306"}, "invalid mysql dsn"},
		{SourceConfig{Driver: "mysql", DSN: "u:hunter2@tcp(localhost:3306)/db?parseTime=maybe"}, "invalid mysql dsn"},
	} {
		wantSourceError(t, "shop", c.sc, c.want)
	}
}

// TestUnreachableServer: a server that is down is a retryable error at run time, not at
// startup, and the error keeps the password to itself.
func TestUnreachableServer(t *testing.T) {
	for _, sc := range []SourceConfig{
		{Driver: "postgres", DSN: "postgres://sheetq:hunter2@127.0.0.1:1/shop?sslmode=disable"},
		{Driver: "postgres", DSN: "host=127.0.0.1 port=1 user=sheetq password=hunter2 dbname=shop sslmode=disable"},
		{Driver: "mysql", DSN: "sheetq:hunter2@tcp(127.0.0.1:1)/shop"},
	} {
		src, err := OpenSource("shop", sc, "")
		if err != nil {
			t.Fatalf("%s: OpenSource must not connect: %v", sc.Driver, err)
		}
		start := time.Now()
		_, err = srcStream(t.Context(), t, src, srcReport("SELECT 1"), nil)
		if time.Since(start) > 15*time.Second {
			t.Errorf("%s: took %v to fail", sc.Driver, time.Since(start))
		}
		srcJobError(t, err, false, "upstream")
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error %q shows the password", sc.Driver, err)
		}
		if !strings.Contains(err.Error(), "source shop") {
			t.Errorf("%s: error %q does not name the source", sc.Driver, err)
		}
		if err := src.(io.Closer).Close(); err != nil {
			t.Errorf("%s: Close: %v", sc.Driver, err)
		}
	}
}

// TestSilentServer: a server that accepts the connection and never says a word fails
// the attempt, retryably, once the connect timeout has passed. A MySQL source waited
// for the handshake as long as the attempt's context lived.
func TestSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never written to
			mu.Unlock()
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	for _, sc := range []SourceConfig{
		{Driver: "mysql", DSN: fmt.Sprintf("sheetq:hunter2@tcp(%s)/shop?timeout=300ms", addr)},
		{Driver: "postgres", DSN: fmt.Sprintf("postgres://sheetq:hunter2@%s/shop?sslmode=disable&connect_timeout=1", addr)},
	} {
		t.Run(sc.Driver, func(t *testing.T) {
			src, err := OpenSource("shop", sc, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { src.(io.Closer).Close() })
			done := make(chan error, 1)
			go func() {
				_, err := srcStream(t.Context(), t, src, srcReport("SELECT 1"), nil)
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second): // a failure guard, not a timing assertion
				t.Fatal("still connecting to a silent server after 10s")
			}
			srcJobError(t, err, false, "upstream")
			msg := err.Error()
			if !strings.Contains(msg, "source shop") || strings.Contains(msg, "hunter2") {
				t.Errorf("error %q does not name the source, or shows the password", msg)
			}
			if sc.Driver == "mysql" && !strings.Contains(msg, "did not answer within 300ms") {
				t.Errorf("error %q does not say the server did not answer", msg)
			}
		})
	}
}

// serverDSN returns the test server's DSN from env, skipping the test without one,
// except in CI, where .ci/databases has started the servers and a missing DSN is a
// broken setup.
func serverDSN(t *testing.T, env string) string {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI runs .ci/databases first", env)
		}
		t.Skipf("%s is not set; eval \"$(sudo bash .ci/databases)\" to run this test", env)
	}
	return dsn
}

// uniqueName returns a table name no other test run uses, so that runs can share a server.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d_%s", prefix, time.Now().Unix(), strings.ToLower(rand.Text()[:8]))
}

// serverFixture creates the items table on a database server through a connection of
// its own and opens a source on it through an env:NAME DSN.
func serverFixture(t *testing.T, driver, sqlDriver, dsn, create string, inserts []string, slow string) srcFixture {
	t.Helper()
	admin, err := sql.Open(sqlDriver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	admin.SetMaxOpenConns(1) // one session, so that SET statements hold for what follows
	table := uniqueName("items")
	exec := func(t *testing.T, q string) {
		t.Helper()
		if _, err := admin.Exec(strings.ReplaceAll(q, "{table}", table)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(t, create)
	t.Cleanup(func() { exec(t, "DROP TABLE IF EXISTS {table}") })
	for _, q := range inserts {
		exec(t, q)
	}

	t.Setenv("SHEETQ_TEST_SOURCE_DSN", dsn)
	src, err := OpenSource("shop", SourceConfig{Driver: driver, DSN: "env:SHEETQ_TEST_SOURCE_DSN"}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.(io.Closer).Close() })
	return srcFixture{
		src:   src,
		table: table,
		exec:  exec,
		rowCount: func(t *testing.T) int64 {
			var n int64
			if err := admin.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		slow: slow,
	}
}

func TestPostgresSource(t *testing.T) {
	dsn := serverDSN(t, "SHEETQ_TEST_POSTGRES_DSN")
	fx := serverFixture(t, "postgres", "pgx", dsn,
		`CREATE TABLE {table} (id integer PRIMARY KEY, big bigint, price numeric(10,2), ratio double precision,
			f4 real, day date, at timestamp, atz timestamptz, ok boolean, name text, note varchar(20))`,
		[]string{
			`INSERT INTO {table} VALUES (1, 9007199254740993, 1234.56, 0.25, 1.1, '2024-02-29', '2024-03-01 13:45:30',
				'2024-03-01 12:00:00+00', true, 'Ada Lovelace', 'rush')`,
			`INSERT INTO {table} VALUES (2, -5, -0.5, 0.001, -2.5, '1999-12-31', '2000-01-01 00:00:00',
				'2000-01-01 00:00:00+01', false, 'Grace ''O'' "Hopper"', NULL)`,
			`INSERT INTO {table} (id) VALUES (3)`,
		},
		"SELECT pg_sleep(60)")
	testSrcFixture(t, fx)

	t.Run("more types", func(t *testing.T) {
		rec := srcMustStream(t, fx.src, srcReport(`SELECT 12345678901234567890.125::numeric AS wide, 'NaN'::numeric AS nan,
			7::smallint AS small, '{"a":1}'::jsonb AS doc, '\x00ff'::bytea AS raw,
			'00000000-0000-0000-0000-000000000001'::uuid AS id, 'infinity'::date AS forever,
			interval '1 day' AS span`), nil)
		want := []Column{{Name: "wide", Type: TypeNumber}, {Name: "nan", Type: TypeNumber}, {Name: "small", Type: TypeInt}, {Name: "doc", Type: TypeText},
			{Name: "raw", Type: TypeText}, {Name: "id", Type: TypeText}, {Name: "forever", Type: TypeDate}, {Name: "span", Type: TypeText}}
		if !slices.Equal(rec.cols, want) {
			t.Errorf("columns = %v, want %v", rec.cols, want)
		}
		// numeric becomes a float64: 17 significant digits survive, as in Excel.
		srcCheckRows(t, rec.rows, [][]any{{1.2345678901234567e19, "NaN", int64(7), `{"a": 1}`, "0x00ff",
			"00000000-0000-0000-0000-000000000001", "infinity", "1 day"}})
	})
}

func TestMySQLSource(t *testing.T) {
	dsn := serverDSN(t, "SHEETQ_TEST_MYSQL_DSN")
	fx := serverFixture(t, "mysql", "mysql", dsn,
		`CREATE TABLE {table} (id int PRIMARY KEY, big bigint, price decimal(10,2), ratio double,
			f4 float, day date, at datetime, atz timestamp NULL, ok boolean, name text, note varchar(20))`,
		[]string{
			// The admin connection's session is in UTC too, for the TIMESTAMP column.
			`SET time_zone = '+00:00'`,
			`INSERT INTO {table} VALUES (1, 9007199254740993, 1234.56, 0.25, 1.1, '2024-02-29', '2024-03-01 13:45:30',
				'2024-03-01 12:00:00', true, 'Ada Lovelace', 'rush')`,
			`INSERT INTO {table} VALUES (2, -5, -0.5, 0.001, -2.5, '1999-12-31', '2000-01-01 00:00:00',
				'1999-12-31 23:00:00', false, 'Grace ''O'' "Hopper"', NULL)`,
			`INSERT INTO {table} (id) VALUES (3)`,
		},
		"SELECT SLEEP(60)")
	testSrcFixture(t, fx)

	// MySQL runs the SQL in /*! ... */ comments, which every other reader skips.
	t.Run("no files on the server", func(t *testing.T) {
		out := filepath.Join(os.TempDir(), fx.table+".txt")
		_, err := srcStream(t.Context(), t, fx.src, srcReport(fmt.Sprintf("SELECT id /*!50000 INTO DUMPFILE '%s' */ FROM %s LIMIT 1",
			out, fx.table)), nil)
		srcJobError(t, err, true, "query")
		if _, err := os.Stat(out); err == nil {
			t.Errorf("the report wrote %s", out)
		}
	})

	t.Run("more types", func(t *testing.T) {
		more := fx.table + "_more"
		fx.exec(t, "SET sql_mode = ''") // MySQL 8 refuses the zero date otherwise
		fx.exec(t, "CREATE TABLE "+more+` (flag bit(1), mask bit(10), tiny tinyint, utiny tinyint unsigned,
			ok tinyint(1), f float, huge bigint unsigned, e enum('a','b'), tm time, y year, bin varbinary(4), zero date)`)
		t.Cleanup(func() { fx.exec(t, "DROP TABLE IF EXISTS "+more) })
		fx.exec(t, "INSERT INTO "+more+` VALUES (b'1', b'1000000001', -3, 200, 1, 3.3, 18446744073709551615, 'b',
			'10:11:12', 2024, x'00ff', '0000-00-00')`)
		want := []Column{{Name: "flag", Type: TypeBool}, {Name: "mask", Type: TypeInt}, {Name: "tiny", Type: TypeInt}, {Name: "utiny", Type: TypeInt}, {Name: "ok", Type: TypeBool},
			{Name: "f", Type: TypeNumber}, {Name: "huge", Type: TypeInt}, {Name: "e", Type: TypeText}, {Name: "tm", Type: TypeText}, {Name: "y", Type: TypeInt}, {Name: "bin", Type: TypeText},
			{Name: "zero", Type: TypeDate}}
		row := []any{true, int64(513), int64(-3), int64(200), true, 3.3, "18446744073709551615", "b", "10:11:12",
			int64(2024), "0x00ff", nil}
		// Without parameters MySQL answers in its text protocol, with them in its binary
		// protocol, which encode values differently.
		query := "SELECT flag, mask, tiny, utiny, ok, f, huge, e, tm, y, bin, zero FROM " + more
		for _, rep := range []Report{srcReport(query), srcReport(query+" WHERE 1 = :one", Param{Name: "one", Type: TypeInt, Default: "1"})} {
			rec := srcMustStream(t, fx.src, rep, nil)
			if !slices.Equal(rec.cols, want) {
				t.Errorf("columns = %v\nwant      %v", rec.cols, want)
			}
			srcCheckRows(t, rec.rows, [][]any{row})
		}
	})
}

// wantSourceError wants OpenSource to refuse sc as source name with an error that names
// the source and says want, and never shows the secret the cases use, hunter2.
func wantSourceError(t *testing.T, name string, sc SourceConfig, want string) {
	t.Helper()
	src, err := OpenSource(name, sc, t.TempDir())
	if err == nil {
		t.Errorf("%+v: no error", sc)
		if cl, ok := src.(io.Closer); ok {
			cl.Close()
		}
		return
	}
	msg := err.Error()
	if !strings.Contains(msg, `source "`+name+`"`) || !strings.Contains(msg, want) {
		t.Errorf("%+v: error %q does not name the source and say %q", sc, msg, want)
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("%+v: error %q shows a secret", sc, msg)
	}
}
