package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"sheetq/store"
)

// BenchmarkJobWALFrames counts the WAL frames (pages) a one-by-one job's writes append:
// its enqueue, its claim and its end, each committed alone, and the three in one commit
// of the writer's queue, as a one-by-one load commits them (the enqueue of one job, the
// claim of the one before and the end of the one before that; rule 31).
func BenchmarkJobWALFrames(b *testing.B) {
	ctx := context.Background()
	s := openBench(b)
	d := driverOf(s)
	var pageSize int64
	if err := d.w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		b.Fatal(err)
	}
	// The WAL's length: no checkpoint runs while it is measured, so it only grows.
	frames := func() int64 {
		fi, err := os.Stat(d.path + "-wal")
		if err != nil {
			b.Fatal(err)
		}
		return (fi.Size() - 32) / (pageSize + 24)
	}
	n := 0
	enqueue := func() {
		n++
		if _, _, err := s.Enqueue(ctx, store.NewJob{ID: fmt.Sprintf("job%09d", n), Kind: "export", Args: benchArgs,
			IdempotencyKey: fmt.Sprintf("k%09d", n), CreatedBy: "bench"}); err != nil {
			b.Error(err)
		}
	}
	var claimed []store.Job
	claim := func() {
		j, err := s.Claim(ctx, "bench", store.DefaultQueue)
		if err != nil {
			b.Error(err)
		}
		claimed = append(claimed, j)
	}
	end := func() {
		j := claimed[0]
		claimed = claimed[1:]
		if r := d.FinishBatch(ctx, []store.Finish{{ID: j.ID, Attempt: j.Attempt, Outcome: store.Succeeded}}); r[0].Err != nil {
			b.Error(r[0].Err)
		}
	}
	// together runs fns in one commit: a first write holds the writer until all of them
	// wait in its queue, and its commit takes them in (groupcommit.Queue.More).
	together := func(fns ...func()) {
		started, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := d.writeStep(ctx, func(context.Context, *sql.Tx, *txState) error {
				close(started)
				<-release
				return nil
			}); err != nil {
				b.Error(err)
			}
		})
		<-started
		for i, fn := range fns {
			wg.Go(fn)
			for d.wq.q.Waiting() != i+1 {
				time.Sleep(10 * time.Microsecond)
			}
		}
		close(release)
		wg.Wait()
	}
	// A table of some size first, so the B-trees have depth.
	for range 3000 {
		enqueue()
		claim()
		end()
	}
	enqueue()
	enqueue()
	claim()
	if _, err := d.w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		b.Fatal(err)
	}
	var busy, log, done int
	if err := d.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &done); err != nil || busy != 0 {
		b.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	var alone [3]int64
	var shared int64
	b.ResetTimer()
	for range b.N {
		for k, fn := range []func(){enqueue, claim, end} {
			f := frames()
			fn()
			alone[k] += frames() - f
		}
		f := frames()
		commits := d.wq.commits.Load()
		together(enqueue, claim, end)
		if c := d.wq.commits.Load() - commits; c != 1 {
			b.Fatalf("%d commits, want 1", c)
		}
		shared += frames() - f
	}
	b.StopTimer()
	if p := os.Getenv("ZZKEEP"); p != "" {
		for _, x := range []string{"", "-wal"} {
			bs, _ := os.ReadFile(d.path + x)
			os.WriteFile(p+x, bs, 0o644)
		}
	}
	per := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(per(alone[0]), "enqueue-frames")
	b.ReportMetric(per(alone[1]), "claim-frames")
	b.ReportMetric(per(alone[2]), "end-frames")
	b.ReportMetric(per(shared), "one-commit-frames")
}
