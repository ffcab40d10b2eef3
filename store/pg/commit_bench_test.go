package pg_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkRawCommits is the server's commit rate for one-row INSERT transactions,
// committed from 1, 4 and 16 connections at once (fsync on, synchronous_commit on).
// It is the measurement behind ARCHITECTURE.md rule 31's "not on PostgreSQL": the
// server's WAL flush already carries the commits of concurrent connections, so a writer
// queue in the node would save no flush, only serialize its writes on one connection.
//
//	go test -run '^$' -bench BenchmarkRawCommits -benchtime 3s ./store/pg/
func BenchmarkRawCommits(b *testing.B) {
	for _, conns := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			dsn := freshSchema(b)
			cs := make([]*pgx.Conn, conns)
			for i := range cs {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close(ctx)
				cs[i] = c
			}
			if _, err := cs[0].Exec(ctx, `CREATE TABLE t (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, c := range cs {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						tx, err := c.Begin(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := tx.Exec(ctx, `INSERT INTO t (v) VALUES ($1)`, "row"); err != nil {
							b.Error(err)
							return
						}
						if err := tx.Commit(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
