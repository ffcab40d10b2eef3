package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/internal/apptest"
	"sheetq/jobs"
	"sheetq/store"
)

// A handler that does not stop when its export is cancelled is abandoned by the engine;
// /metrics and the Queue page show it while it still runs, and the count of all so far.
func TestAbandonedHandlerIsShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	started, unblock := make(chan struct{}), make(chan struct{})
	ts := newTestServer(t, testOpts{
		Engine: &jobs.Config{
			Workers: 1, Heartbeat: 20 * time.Millisecond, StaleAfter: time.Hour, PollInterval: time.Hour,
			ShutdownGrace: 100 * time.Millisecond, AbandonAfter: 20 * time.Millisecond,
		},
		// Blocks until the test lets it go, deaf to its context, like a read of a FIFO
		// that never delivers.
		Kinds: map[string]jobs.Handler{"deaf": jobs.HandlerFunc(func(context.Context, *jobs.Run) error {
			close(started)
			<-unblock
			return nil
		})},
	})
	st, eng := ts.store, ts.engine

	// shown returns the Queue page's abandoned entry and the two metrics.
	shown := func() (text string, warn bool, alive, total float64) {
		res := ts.Get("/queue")
		doc, err := goquery.NewDocumentFromReader(bytes.NewReader(res.Body))
		if err != nil {
			t.Fatal(err)
		}
		sel := apptest.TID(doc, "abandoned-handlers")
		fams := ts.scrape()
		alive = fams["sheetq_handlers_abandoned"].GetMetric()[0].GetGauge().GetValue()
		total = fams["sheetq_handlers_abandoned_total"].GetMetric()[0].GetCounter().GetValue()
		return strings.Join(strings.Fields(sel.Text()), " "), sel.HasClass("warn-text"), alive, total
	}
	if text, warn, alive, total := shown(); !strings.HasPrefix(text, "0 still running (0 since start") || warn || alive != 0 || total != 0 {
		t.Fatalf("before: page %q (warn %v), metrics %v alive %v total", text, warn, alive, total)
	}

	j, _, err := eng.Enqueue(ctx, store.NewJob{Kind: "deaf", Args: json.RawMessage(`{}`), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := eng.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		got, err := st.Get(ctx, j.ID)
		return err == nil && got.Status == store.StatusCanceled && eng.Running() == 0,
			fmt.Sprintf("job %s, %d running; want CANCELED and the worker free", got.Status, eng.Running())
	})
	if text, warn, alive, total := shown(); !strings.HasPrefix(text, "1 still running (1 since start") || !warn || alive != 1 || total != 1 {
		t.Fatalf("abandoned: page %q (warn %v), metrics %v alive %v total", text, warn, alive, total)
	}

	close(unblock)
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		alive, _ := eng.Abandoned()
		return alive == 0, "the abandoned handler is still counted as running"
	})
	if text, warn, alive, total := shown(); !strings.HasPrefix(text, "0 still running (1 since start") || warn || alive != 0 || total != 1 {
		t.Fatalf("returned: page %q (warn %v), metrics %v alive %v total", text, warn, alive, total)
	}
}
