package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
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
	for _, lock := range []bool{true, false} {
		for _, conns := range []int{1, 4, 16} {
			name := fmt.Sprintf("free/conns=%d", conns)
			if lock {
				name = fmt.Sprintf("clock/conns=%d", conns)
			}
			b.Run(name, func(b *testing.B) { benchCommits(b, lock, conns) })
		}
	}
}

func benchCommits(b *testing.B, lock bool, conns int) {
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
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(conns)
	next := make(chan string, conns)
	for _, id := range ids {
		next <- id
	}
	b.SetParallelism((conns + 1) / 2) // GOMAXPROCS is 2 here: conns goroutines in all
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := <-next
		for pb.Next() {
			if err := commitOne(ctx, db, id, lock); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// commitOne is one state change as the store writes it: the job's row, then (with lock)
// the event clock, then its event, then COMMIT.
func commitOne(ctx context.Context, db *sql.DB, id string, lock bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET progress_rows = progress_rows + 1, heartbeat_at = UTC_TIMESTAMP(6) WHERE id = ?`, id); err != nil {
		return err
	}
	if lock {
		if _, err := tx.ExecContext(ctx, `UPDATE event_clock SET n = n + 1, pruned = GREATEST(pruned, 0) WHERE one = 1`); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt) VALUES (?, UTC_TIMESTAMP(6), 'note', 'PENDING', 0)`, id); err != nil {
		return err
	}
	return tx.Commit()
}
