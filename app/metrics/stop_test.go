package metrics_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"sheetq/app/metrics"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// OnChange may come after Stop, or while it runs: a PostgreSQL node's listener outlives
// the services it wakes. Neither panics nor races with Stop's wait (run with -race: a
// WaitGroup gaining work while it is waited for is a race the detector reports), and a
// change after Stop schedules nothing.
func TestOnChangeDuringAndAfterStop(t *testing.T) {
	st := storetest.Open(t, filepath.Join(t.TempDir(), "sheetq.db"), sqlite.Options{})
	for range 20 {
		m := metrics.New(st, slog.New(slog.DiscardHandler))
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 200 {
					m.OnChange()
				}
			})
		}
		m.Stop()
		wg.Wait()
		m.OnChange()
		m.Stop() // idempotent, and returns: nothing was scheduled after the first
	}
}
