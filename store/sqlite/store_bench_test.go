package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sheetq/store"
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

// openBench opens a fresh store in a temporary directory, for benchmarks and for the
// tests that need the store's insides.
func openBench(tb testing.TB) *store.Store {
	tb.Helper()
	st, err := Open(context.Background(), filepath.Join(tb.TempDir(), "sheetq.db"), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// driverOf is st's SQLite driver, for the tests that look behind the core at the file's
// connections and transactions.
func driverOf(st *store.Store) *Store { return st.Driver().(*Store) }

var benchArgs = json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01","to":"2024-02-01"}}`)

// BenchmarkEnqueue is durable job acceptance: one job and its event per transaction.
func BenchmarkEnqueue(b *testing.B) {
	st := openBench(b)
	ctx := context.Background()
	for i := range b.N {
		if _, _, err := st.Enqueue(ctx, store.NewJob{ID: fmt.Sprintf("job%09d", i), Kind: "export", Args: benchArgs}); err != nil {
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
		if _, _, err := st.Enqueue(ctx, store.NewJob{ID: fmt.Sprintf("job%09d", i), Kind: "export", Args: benchArgs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := st.Claim(ctx, "bench", store.DefaultQueue); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "claims/s")
}

// BenchmarkEnqueueWALFrames counts what one accepted job costs the disk: the WAL frames
// (pages) a one-job commit appends, with an idempotency key as the API sends. Every
// B-tree a PENDING row enters is a frame (migration 0006 took the listing indexes out).
func BenchmarkEnqueueWALFrames(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	args := json.RawMessage(`{"report":"demo","params":{"rows":2000,"seconds":0},"spec":"0123456789abcdef"}`)
	enqueue := func(i int) {
		_, _, err := s.Enqueue(ctx, store.NewJob{ID: fmt.Sprintf("%026x", uint64(i)*0x9e3779b97f4a7c15), Kind: "export", Args: args,
			IdempotencyKey: fmt.Sprintf("bench-%08d", i), RequestHash: fmt.Sprintf("%064d", i)})
		if err != nil {
			b.Fatal(err)
		}
	}
	// A table of some size first, so the B-trees have depth, then an empty WAL.
	for i := range 3000 {
		enqueue(i)
	}
	// No checkpoint may restart the WAL while it is being measured.
	if _, err := driverOf(s).w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		b.Fatal(err)
	}
	var busy, frames, done int
	if err := driverOf(s).w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
		b.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	b.ResetTimer()
	for i := range b.N {
		enqueue(1_000_000 + i)
	}
	b.StopTimer()
	// PASSIVE copies nothing new that matters here; its second column is the WAL's length.
	if err := driverOf(s).w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &done); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(frames)/float64(b.N), "wal-frames/job")
}
