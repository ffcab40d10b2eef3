package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/jobs"
	"sheetq/store"
)

// A handler that does not stop when its export is cancelled is abandoned by the engine;
// /metrics and the Queue page show it while it still runs, and the count of all so far.
func TestAbandonedHandlerIsShown(t *testing.T) {
	ctx := context.Background()
	dir := DataDir{Root: t.TempDir()}
	st, err := store.Open(ctx, dir.DB(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng := jobs.New(st, jobs.Config{
		Workers: 1, Heartbeat: 20 * time.Millisecond, StaleAfter: time.Hour, PollInterval: time.Hour,
		ShutdownGrace: 100 * time.Millisecond, AbandonAfter: 20 * time.Millisecond,
		TmpDir: dir.Tmp(), ExportsDir: dir.Exports(), Logger: log,
	})
	started, unblock := make(chan struct{}), make(chan struct{})
	// Blocks until the test lets it go, deaf to its context, like a read of a FIFO that
	// never delivers.
	eng.Register("deaf", jobs.HandlerFunc(func(context.Context, *jobs.Run) error {
		close(started)
		<-unblock
		return nil
	}))
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Stop)
	m, err := newMetrics(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.wait)
	m.watchQueue(eng)
	s := &server{cfg: Config{Version: "test"}, store: st, engine: eng, dir: dir, log: log, metrics: m}

	// shown returns the Queue page's abandoned entry and the two metrics.
	shown := func() (text string, warn bool, alive, total float64) {
		rec := httptest.NewRecorder()
		s.queuePage(rec, httptest.NewRequest(http.MethodGet, "/queue", nil))
		doc, err := goquery.NewDocumentFromReader(bytes.NewReader(rec.Body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		sel := tid(doc, "abandoned-handlers")
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "sheetq_handlers_abandoned":
				alive = mf.GetMetric()[0].GetGauge().GetValue()
			case "sheetq_handlers_abandoned_total":
				total = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
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
	waitFor(t, 10*time.Second, func() (bool, string) {
		got, err := st.Get(ctx, j.ID)
		return err == nil && got.Status == store.StatusCanceled && eng.Running() == 0,
			fmt.Sprintf("job %s, %d running; want CANCELED and the worker free", got.Status, eng.Running())
	})
	if text, warn, alive, total := shown(); !strings.HasPrefix(text, "1 still running (1 since start") || !warn || alive != 1 || total != 1 {
		t.Fatalf("abandoned: page %q (warn %v), metrics %v alive %v total", text, warn, alive, total)
	}

	close(unblock)
	waitFor(t, 10*time.Second, func() (bool, string) {
		alive, _ := eng.Abandoned()
		return alive == 0, "the abandoned handler is still counted as running"
	})
	if text, warn, alive, total := shown(); !strings.HasPrefix(text, "0 still running (1 since start") || warn || alive != 0 || total != 1 {
		t.Fatalf("returned: page %q (warn %v), metrics %v alive %v total", text, warn, alive, total)
	}
}
