//go:build !windows

package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"sheetq/store"
	sqmysql "sheetq/store/mysql"
	"sheetq/store/pg"
	"sheetq/store/storetest/mysqltest"
	"sheetq/store/storetest/pgtest"
)

// The cluster tests' shared database, on PostgreSQL or on MySQL/MariaDB: the test's own
// connection (monitoring, faults, the checker), the few places where the two dialects
// differ, and how to find and cut one node's connections.

// clusterBackend is a database the cluster tests run on.
type clusterBackend struct {
	name string
	// fresh makes an empty database (a schema on PostgreSQL, a database on MySQL) for
	// the test and returns the test's DSN and the --store value every node gets.
	fresh func(t *testing.T) (dsn, storeURL string)
}

var (
	postgresBackend = clusterBackend{"postgres", func(t *testing.T) (string, string) {
		dsn := pgtest.FreshSchema(t)
		return dsn, dsn
	}}
	mariadbBackend = clusterBackend{"mysql", func(t *testing.T) (string, string) {
		dsn := mysqltest.FreshDatabase(t)
		return dsn, mysqltest.URL(t, dsn)
	}}
)

// clusterDB is the test's own connection to the nodes' database.
type clusterDB struct {
	mysql bool
	db    *sql.DB
	port  int // the server's port, to find a node's connections to it
}

// openClusterDB opens the test's connection to dsn (a postgres:// URL, or
// go-sql-driver's DSN for backend mysql).
func openClusterDB(t *testing.T, b clusterBackend, dsn string) *clusterDB {
	t.Helper()
	d := &clusterDB{mysql: b.name == "mysql"}
	if d.mysql {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ParseTime, cfg.Loc = true, time.UTC
		_, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			t.Fatalf("%s: %v", cfg.Addr, err)
		}
		d.port, _ = strconv.Atoi(port)
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d.db = sql.OpenDB(conn)
	} else {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		d.port = int(cfg.Port)
		d.db = stdlib.OpenDB(*cfg)
	}
	// The test's statements are few and serial; its connections are the test process's,
	// so backends never takes them for a node's.
	d.db.SetMaxOpenConns(2)
	t.Cleanup(func() { d.db.Close() })
	if err := d.db.Ping(); err != nil {
		t.Fatalf("connect to %s: %v", b.name, err)
	}
	return d
}

var placeholder = regexp.MustCompile(`\$\d+`)

// sql rewrites a statement written for PostgreSQL ($1, $2, ... in order, data->>'f' for
// an event's data field as text) into the connection's dialect.
func (d *clusterDB) sql(q string) string {
	if !d.mysql {
		return q
	}
	q = placeholder.ReplaceAllString(q, "?")
	// data is JSON text in a LONGTEXT column on MySQL (store/mysql's migrations);
	// MariaDB has no ->> operator, and both have JSON_VALUE.
	return jsonField.ReplaceAllString(q, "JSON_VALUE($1, '$$.$2')")
}

var jsonField = regexp.MustCompile(`([a-z.]*data)->>'(\w+)'`)

func (d *clusterDB) queryInt(t *testing.T, q string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := d.db.QueryRowContext(ctx, d.sql(q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (d *clusterDB) queryRow(q string, args ...any) *sql.Row {
	return d.db.QueryRowContext(context.Background(), d.sql(q), args...)
}

func (d *clusterDB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.db.QueryContext(ctx, d.sql(q), args...)
}

// eventOrder is the ORDER BY of job_events e in the order a commit-safe tailer delivers
// them: (xid, id) on PostgreSQL (ARCHITECTURE.md, "PostgreSQL", Events), id on MySQL,
// where an event's id is taken under the event clock's lock held to the commit
// (ARCHITECTURE.md, "MySQL and MariaDB").
func (d *clusterDB) eventOrder() string {
	if d.mysql {
		return "e.id"
	}
	return "e.xid, e.id"
}

// The LISTEN connection's application_name (store/pg/notify.go): the pool's connections
// have none, so this is how the test tells the two apart.
const listenAppName = "sheetq listen"

// backends returns the server's ids of the connections of process pid (PostgreSQL's
// backend pids, MySQL's connection ids), found by the process's own TCP sockets to the
// server: the server knows each connection's client port, and /proc knows which local
// ports belong to which process. listenOnly keeps PostgreSQL's LISTEN connection alone
// (MySQL has none).
func (d *clusterDB) backends(t *testing.T, pid int, listenOnly bool) []int {
	t.Helper()
	ports := processPortsTo(pid, d.port)
	if len(ports) == 0 {
		return nil
	}
	in := make([]string, len(ports))
	for i, p := range ports {
		in[i] = strconv.Itoa(int(p))
	}
	var q string
	if d.mysql {
		if listenOnly {
			t.Fatal("MySQL has no LISTEN connection")
		}
		// HOST is "address:port" for a TCP client.
		q = `SELECT ID FROM information_schema.PROCESSLIST WHERE HOST LIKE '127.0.0.1:%' AND
			SUBSTRING_INDEX(HOST, ':', -1) IN (` + strings.Join(in, ",") + `)`
	} else {
		q = `SELECT pid FROM pg_stat_activity WHERE client_port IN (` + strings.Join(in, ",") + `)
			AND client_addr IN ('127.0.0.1', '::1')`
		if listenOnly {
			q += ` AND application_name = '` + listenAppName + `'`
		}
	}
	rows, err := d.db.Query(q)
	if err != nil {
		t.Fatalf("the node's connections: %v", err)
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// terminate cuts the connections (pg_terminate_backend; MySQL's KILL CONNECTION) and
// returns how many it cut.
func (d *clusterDB) terminate(t *testing.T, ids []int) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		if d.mysql {
			_, err := d.db.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
			var me *mysql.MySQLError
			switch {
			case err == nil:
				n++
			case errors.As(err, &me) && me.Number == 1094: // ER_NO_SUCH_THREAD: gone already
			default:
				t.Fatalf("KILL CONNECTION %d: %v", id, err)
			}
			continue
		}
		var ok bool
		if err := d.db.QueryRow(`SELECT pg_terminate_backend($1)`, id).Scan(&ok); err != nil {
			t.Fatalf("pg_terminate_backend(%d): %v", id, err)
		}
		if ok {
			n++
		}
	}
	return n
}

// openStore opens the production store on the nodes' database, as a node does.
func openClusterStore(ctx context.Context, b clusterBackend, dsn string) (*store.Store, error) {
	if b.name == "mysql" {
		return sqmysql.Open(ctx, dsn, sqmysql.Options{})
	}
	return pg.Open(ctx, dsn, pg.Options{})
}
