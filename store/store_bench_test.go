package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func reportRate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// BenchmarkRawCommit is the disk's commit rate: one-row INSERT transactions on a plain
// connection with the store's writer pragmas (WAL, synchronous=FULL, busy_timeout). The
// store's own rates are judged against it.
func BenchmarkRawCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "raw.db")
	db, err := sql.Open("sqlite", dsn(path, writerPragmas(10*time.Second), "_txlock=immediate"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	var sync string
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != "2" {
		b.Fatalf("synchronous = %q, %v; want 2 (FULL)", sync, err)
	}
	b.ResetTimer()
	for i := range b.N {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, fmt.Sprint("row ", i)); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "commits/s")
}

func openBench(b *testing.B) *Store {
	b.Helper()
	st, err := Open(context.Background(), filepath.Join(b.TempDir(), "sheetq.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

var benchArgs = json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01","to":"2024-02-01"}}`)

// BenchmarkEnqueue is durable job acceptance: one job and its event per transaction.
func BenchmarkEnqueue(b *testing.B) {
	st := openBench(b)
	ctx := context.Background()
	for i := range b.N {
		if _, _, err := st.Enqueue(ctx, NewJob{ID: fmt.Sprintf("job%09d", i), Kind: "export", Args: benchArgs}); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "jobs/s")
}

// BenchmarkClaim takes jobs from a queue that holds b.N of them.
func BenchmarkClaim(b *testing.B) {
	st := openBench(b)
	ctx := context.Background()
	for i := range b.N {
		if _, _, err := st.Enqueue(ctx, NewJob{ID: fmt.Sprintf("job%09d", i), Kind: "export", Args: benchArgs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := st.Claim(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "claims/s")
}
