package main

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/mysql"
)

// sheetqMySQLVariant is the real engine over store/mysql (MariaDB or MySQL, -mysql), as
// the server runs it on a shared store without LISTEN (app/compose.go): mysql.Open with
// the pool mysql.PoolSize gives for its workers, jobs.New with Shared set and a poll of
// 100 ms, which is what wakes a node for a job another node accepted. It runs beside the
// PostgreSQL variants, in the same rounds; each run gets a database of its own on the
// -mysql server, dropped afterwards (the PostgreSQL schema it is handed stays unused).
type sheetqMySQLVariant struct {
	workers int
	dsn     string // go-sql-driver's DSN of the server (its database is the one to name new ones after)
}

func (sheetqMySQLVariant) name() string { return "sheetq-mariadb" }

// mysqlPoll is the server's poll on a shared store without wake-ups (app/compose.go).
const mysqlPoll = 100 * time.Millisecond

// onFreshDatabase runs f on a database made for it, named after the DSN's, and drops it
// afterwards.
func onFreshDatabase(ctx context.Context, dsn string, f func(dsn string) (time.Duration, error)) (time.Duration, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return 0, fmt.Errorf("-mysql: %w", err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	name := cfg.DBName + "_riverbench_" + strings.ToLower(crand.Text()[:10])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return 0, err
	}
	defer admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE `"+name+"`")
	cfg.DBName = name
	return f(cfg.FormatDSN())
}

// mysqlNode is one node: a store (its own pool) and, with workers, an engine.
type mysqlNode struct {
	st  *store.Store
	e   *jobs.Engine
	dir string
}

func newMySQLNode(ctx context.Context, dsn string, i, workers int, sink *pgSink) (*mysqlNode, error) {
	st, err := mysql.Open(ctx, dsn, mysql.Options{MaxConns: mysql.PoolSize(max(workers, 1))})
	if err != nil {
		return nil, err
	}
	n := &mysqlNode{st: st}
	if workers == 0 {
		return n, nil
	}
	if n.e, n.dir, err = startEngine(ctx, st, i, workers, sink, mysqlPoll); err != nil {
		st.Close()
		return nil, err
	}
	return n, nil
}

func (n *mysqlNode) close() {
	if n.e != nil {
		n.e.Stop()
	}
	n.st.Close()
	if n.dir != "" {
		os.RemoveAll(n.dir)
	}
}

func (v sheetqMySQLVariant) enqueue(ctx context.Context, _ string, n, callers int) (time.Duration, error) {
	return onFreshDatabase(ctx, v.dsn, func(dsn string) (time.Duration, error) {
		node, err := newMySQLNode(ctx, dsn, 0, 0, nil)
		if err != nil {
			return 0, err
		}
		defer node.close()
		t0 := time.Now()
		err = fanOut(n, callers, func(int) error {
			_, _, err := node.st.Enqueue(ctx, newJob())
			return err
		})
		return time.Since(t0), err
	})
}

func (v sheetqMySQLVariant) endToEnd(ctx context.Context, _ string, n, callers, nodes int) (time.Duration, error) {
	return onFreshDatabase(ctx, v.dsn, func(dsn string) (time.Duration, error) {
		sink := newPGSink(false)
		var ns []*mysqlNode
		defer func() {
			for _, node := range ns {
				node.close()
			}
		}()
		for i := range nodes {
			node, err := newMySQLNode(ctx, dsn, i, v.workers, sink)
			if err != nil {
				return 0, err
			}
			ns = append(ns, node)
		}
		t0 := time.Now()
		if err := fanOut(n, callers, func(i int) error {
			_, _, err := ns[i%len(ns)].e.Enqueue(ctx, newJob())
			return err
		}); err != nil {
			return 0, err
		}
		if err := waitSucceededMySQL(ctx, ns[0].st, sink, n); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	})
}

// waitSucceededMySQL waits until n jobs are SUCCEEDED, counting them (store.Counts) once
// n handlers have returned and again on each change.
func waitSucceededMySQL(ctx context.Context, st *store.Store, sink *pgSink, n int) error {
	deadline := time.After(waitTimeout)
	for {
		if sink.handled.Load() >= int64(n) {
			counts, err := st.Counts(ctx)
			if err != nil {
				return err
			}
			if counts[store.StatusSucceeded] >= n {
				return nil
			}
		}
		select {
		case <-sink.changed:
		case <-deadline:
			return fmt.Errorf("timed out waiting for %d jobs to succeed (%d handled)", n, sink.handled.Load())
		}
	}
}

func (v sheetqMySQLVariant) pickup(ctx context.Context, _ string, rounds int) ([]time.Duration, error) {
	var out []time.Duration
	_, err := onFreshDatabase(ctx, v.dsn, func(dsn string) (time.Duration, error) {
		sink := newPGSink(true)
		a, err := newMySQLNode(ctx, dsn, 0, 0, nil)
		if err != nil {
			return 0, err
		}
		defer a.close()
		b, err := newMySQLNode(ctx, dsn, 1, v.workers, sink)
		if err != nil {
			return 0, err
		}
		defer b.close()
		var last string
		out, err = pickupRounds(rounds, func() error {
			// Node B's lane polls every mysqlPoll from its last claim, and a round starts
			// a few milliseconds after the last job ended: without a wait of a random part
			// of the interval, every job would land just after a poll and wait nearly a
			// whole one. A job accepted at a moment of its own meets the poll anywhere in
			// its interval. The wait is before the enqueue, outside the clock.
			time.Sleep(rand.N(mysqlPoll))
			j, _, err := a.st.Enqueue(ctx, newJob())
			last = j.ID
			return err
		}, sink.started, func(i int) error { return waitJobSucceeded(ctx, a.st, sink, last, i) })
		return 0, err
	})
	return out, err
}

// mysqlCommits measures the server's raw commit rate, the limit of every write of the
// store: n single-row INSERTs in autocommit, each its own transaction and log flush, from
// conns connections at once, into a table of a fresh database. It returns commits/s.
func mysqlCommits(ctx context.Context, dsn string, n, conns int) (float64, error) {
	d, err := onFreshDatabase(ctx, dsn, func(dsn string) (time.Duration, error) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return 0, err
		}
		defer db.Close()
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARBINARY(64)) ENGINE = InnoDB`); err != nil {
			return 0, err
		}
		// Open the connections before the clock starts.
		if err := fanOut(conns, conns, func(int) error { return db.PingContext(ctx) }); err != nil {
			return 0, err
		}
		t0 := time.Now()
		err = fanOut(n, conns, func(i int) error {
			_, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, fmt.Sprint(i))
			return err
		})
		return time.Since(t0), err
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}

// mysqlVersion is the -mysql server's VERSION().
func mysqlVersion(ctx context.Context, dsn string) (string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v)
	return v, err
}
