package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"sheetq/store"
	"sheetq/store/mysql"
)

// BenchmarkEventCommits measures what the event clock costs (events.go): transactions
// that change a job and append its event, as every state change does, committed from
// 1, 4 and 16 connections at once, with the store's statements (clock) and without the
// clock's row lock (free, which would let ids commit out of order). The difference is
// the price of the commit-safe cursor. Run it alone:
//
//	go test -run '^$' -bench BenchmarkEventCommits -benchtime 3s ./store/mysql/
func BenchmarkEventCommits(b *testing.B) {
	for _, mode := range []string{"clock", "clock1", "free"} {
		for _, conns := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/conns=%d", mode, conns), func(b *testing.B) { benchCommits(b, mode, conns) })
		}
	}
}

func benchCommits(b *testing.B, mode string, conns int) {
	st, dsn := openStore(b)
	ctx := context.Background()
	ids := make([]string, conns)
	for i := range ids {
		j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "bench", Args: []byte(`{}`)})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = j.ID
	}
	cfg, err := mysql.Config(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	cfg.MultiStatements = mode == "clock1"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(conns)
	// conns goroutines, one job row each, share b.N commits.
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, id := range ids {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := commitOne(ctx, db, id, mode); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// commitOne is one state change as the store writes it: the job's row, then (with lock)
// the event clock, then its event, then COMMIT.
func commitOne(ctx context.Context, db *sql.DB, id string, mode string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET progress_rows = progress_rows + 1, heartbeat_at = UTC_TIMESTAMP(6) WHERE id = ?`, id); err != nil {
		return err
	}
	const event = `INSERT INTO job_events (job_id, at, type, status, attempt) VALUES (?, UTC_TIMESTAMP(6), 'note', 'PENDING', 0)`
	const clock = `UPDATE event_clock SET n = n + 1, pruned = GREATEST(pruned, 0) WHERE one = 1`
	switch mode {
	case "clock":
		if _, err := tx.ExecContext(ctx, clock); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, event, id); err != nil {
			return err
		}
	case "clock1": // the lock and the events in one round trip
		if _, err := tx.ExecContext(ctx, clock+"; "+event, id); err != nil {
			return err
		}
	default:
		if _, err := tx.ExecContext(ctx, event, id); err != nil {
			return err
		}
	}
	return tx.Commit()
}
