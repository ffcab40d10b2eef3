package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sheetq/app/metrics"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

// Both job stores serve the metrics.
var (
	_ metrics.Store = (*store.Store)(nil)
	_ metrics.Store = (*store.Store)(nil)
)

// TestMetricsCountATransitionCommittedLate: on PostgreSQL, a transition whose
// transaction took its event id before another's and commits after it is still counted,
// once. A scrape while it is open reads past the later one; a tail by "id > last id"
// would then never count it.
func TestMetricsCountATransitionCommittedLate(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshSchema(t)
	st, err := pg.Open(ctx, dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := metrics.New(st, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	j := enqueue(t, st)
	txA := pgtest.EventInOpenTransaction(t, dsn, j.ID, "canceled", "CANCELED")
	enqueue(t, st)
	scrape(t, srv) // reads what it may while A is open
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{`sheetq_jobs_accepted_total{kind="export"} 2`, `sheetq_jobs_canceled_total{kind="export"} 1`}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		body := scrape(t, srv)
		if hasAll(body, want) {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("after A committed, /metrics lacks %q", want)
		}
	}
	// Once: scraping again counts nothing more.
	if body := scrape(t, srv); !hasAll(body, want) {
		t.Fatalf("a later scrape changed the counts, want %q", want)
	}
}

func enqueue(t *testing.T, st *store.Store) store.Job {
	t.Helper()
	j, _, err := st.Enqueue(context.Background(), store.NewJob{ID: store.NewID(), Kind: export.Name,
		Args: json.RawMessage(`{"report":"demo","params":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// scrape GETs /metrics, which counts the events committed up to now first.
func scrape(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasAll(body string, lines []string) bool {
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			return false
		}
	}
	return true
}
