package pg_test

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"sheetq/store"
	"sheetq/store/pg"
)

// BenchmarkEnqueueNotify is what migration 0003's triggers cost an enqueue: the same
// enqueues with the triggers and with them dropped, one at a time and from 16
// goroutines, each case on a fresh schema. A Listener on the channels reads the
// notifications, as on a node: a queue nobody reads costs the server nothing to fill.
func BenchmarkEnqueueNotify(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		for _, triggers := range []string{"triggers", "none"} {
			b.Run(mode+"/"+triggers, func(b *testing.B) {
				dsn := freshSchema(b)
				st, err := pg.Open(ctx, dsn, pg.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				if triggers == "none" {
					conn, err := pgx.Connect(ctx, dsn)
					if err != nil {
						b.Fatal(err)
					}
					_, err = conn.Exec(ctx, `DROP TRIGGER jobs_notify_inserted ON jobs; DROP TRIGGER job_events_notify ON job_events`)
					conn.Close(ctx)
					if err != nil {
						b.Fatal(err)
					}
				}
				l, err := pg.Listen(ctx, dsn, slog.New(slog.DiscardHandler), pg.Callbacks{Ready: func(string) {}, Events: func() {}})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Stop()
				enq := func() {
					if _, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "bench", Args: json.RawMessage(`{}`)}); err != nil {
						b.Error(err)
					}
				}
				b.ResetTimer()
				if mode == "serial" {
					for b.Loop() {
						enq()
					}
					return
				}
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						enq()
					}
				})
			})
		}
	}
}
