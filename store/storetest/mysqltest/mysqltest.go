// Package mysqltest gives tests a MySQL or MariaDB database of their own on the server
// that SHEETQ_TEST_MYSQL_DSN names (.ci/databases starts MariaDB and sets it).
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DSN is the test server's DSN, SHEETQ_TEST_MYSQL_DSN: the test is skipped without it,
// except in CI, where a missing one is a broken setup.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("SHEETQ_TEST_MYSQL_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SHEETQ_TEST_MYSQL_DSN is not set; CI runs .ci/databases first")
		}
		t.Skip(`SHEETQ_TEST_MYSQL_DSN is not set; dbenv=$(bash .ci/databases) && eval "$dbenv" to run this test`)
	}
	return dsn
}

// FreshDatabase creates an empty database for the test, named after the DSN's (the
// test role may create databases whose names start with it and an underscore:
// .ci/databases grants it), drops it when the test ends, and returns the DSN that names
// it.
func FreshDatabase(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(DSN(t))
	if err != nil {
		t.Fatalf("SHEETQ_TEST_MYSQL_DSN: %v", err)
	}
	name := fmt.Sprintf("%s_%d_%s", cfg.DBName, time.Now().Unix(), strings.ToLower(rand.Text()[:8]))
	Exec(t, cfg.FormatDSN(), "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	base := cfg.FormatDSN()
	t.Cleanup(func() { Exec(t, base, "DROP DATABASE IF EXISTS `"+name+"`") })
	cfg.DBName = name
	return cfg.FormatDSN()
}

// Exec runs one statement on a connection of its own to dsn.
func Exec(t testing.TB, dsn, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// URL is dsn (go-sql-driver's form) as the mysql:// URL that --store takes.
func URL(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName}
	return u.String()
}
