package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/app/metrics"
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// TestQueuesConfig: [queues.NAME] workers = N makes lanes (rule 27). The webhooks and
// deliveries lanes have 2 workers each unless the file says otherwise, [queues.exports]
// sizes the exports lane unless --workers was given, and bad names or sizes stop the
// start.
func TestQueuesConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sheetq.toml")
	for _, tc := range []struct {
		name       string
		conf       string
		workersSet bool
		workers    int
		queues     map[string]int
		err        string
	}{
		{"none", "", false, 3, map[string]int{"webhooks": 2, "deliveries": 2}, ""},
		{"a heavy lane", "[queues.heavy]\nworkers = 1\n", false, 3, map[string]int{"webhooks": 2, "deliveries": 2, "heavy": 1}, ""},
		{"webhooks overridden", "[queues.webhooks]\nworkers = 8\n", false, 3, map[string]int{"webhooks": 8, "deliveries": 2}, ""},
		{"deliveries overridden", "[queues.deliveries]\nworkers = 5\n", false, 3, map[string]int{"webhooks": 2, "deliveries": 5}, ""},
		{"exports from the file", "[queues.exports]\nworkers = 6\n", false, 6, map[string]int{"webhooks": 2, "deliveries": 2}, ""},
		{"--workers beats the file", "[queues.exports]\nworkers = 6\n", true, 3, map[string]int{"webhooks": 2, "deliveries": 2}, ""},
		{"no workers", "[queues.heavy]\n", false, 0, nil, "[queues.heavy] workers must be from 1 to 256, not 0"},
		{"too many workers", "[queues.heavy]\nworkers = 257\n", false, 0, nil, "from 1 to 256, not 257"},
		{"bad name", "[queues.Heavy]\nworkers = 1\n", false, 0, nil, "[queues.Heavy]: a queue name is 1-64 lowercase letters"},
		{"misspelt key", "[queues.heavy]\nworker = 1\n", false, 0, nil, "unknown key queues.heavy.worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.conf), 0o644); err != nil {
				t.Fatal(err)
			}
			fc, err := LoadFileConfig(path, false)
			eng := jobs.Config{Workers: 3}
			if err == nil {
				err = fc.lanes(&eng, tc.workersSet)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if eng.Workers != tc.workers || !maps.Equal(eng.Queues, tc.queues) {
				t.Fatalf("workers %d, queues %v; want %d, %v", eng.Workers, eng.Queues, tc.workers, tc.queues)
			}
			if err := eng.Validate(); err != nil {
				t.Fatalf("the engine refuses the lanes: %v", err)
			}
		})
	}
}

// TestReportQueue: an export of a report with "-- queue: heavy" is accepted into the
// heavy lane that [queues.heavy] defines, and the engine runs that lane with its own
// workers beside the exports, webhooks and deliveries lanes.
func TestReportQueue(t *testing.T) {
	t.Parallel()
	dir := heavyLaneDir(t, 1)
	ts := newTestServer(t, testOpts{DataDir: dir.Root, Idle: true})
	j := ts.Create(`{"report":"big"}`)
	got, err := ts.store.Get(context.Background(), j.ID)
	if err != nil || got.Queue != "heavy" {
		t.Fatalf("queue of an export of big = %q, %v; want heavy", got.Queue, err)
	}
	if j.Queue != "heavy" {
		t.Fatalf("the API shows the export's queue as %q, want heavy", j.Queue)
	}
	demo := ts.Create(`{"report":"demo","params":{"rows":1}}`)
	if got, err := ts.store.Get(context.Background(), demo.ID); err != nil || got.Queue != store.DefaultQueue {
		t.Fatalf("queue of a report without one = %q, %v; want %q", got.Queue, err, store.DefaultQueue)
	}
	lanes := map[string]int{}
	for _, l := range ts.engine.Lanes() {
		lanes[l.Queue] = l.Workers
	}
	if want := map[string]int{"exports": 2, "deliveries": 2, "heavy": 1, "webhooks": 2}; !maps.Equal(lanes, want) {
		t.Fatalf("lanes = %v, want %v", lanes, want)
	}
}

// TestLanesAreShown: /api/v1/stats, the metrics and the Queue page show each lane with
// its workers, busy workers and waiting jobs (rule 27), and a queue that has jobs but no
// lane (removed from the config since) with 0 workers, so that its stuck jobs show.
func TestLanesAreShown(t *testing.T) {
	t.Parallel()
	dir := heavyLaneDir(t, 3)
	ts := newTestServer(t, testOpts{DataDir: dir.Root, Idle: true})
	ts.Create(`{"report":"big"}`)
	ts.Create(`{"report":"big"}`)
	ts.Create(`{"report":"demo","params":{"rows":1}}`)
	if _, _, err := ts.store.Enqueue(context.Background(), store.NewJob{ID: store.NewID(), Kind: "export", Queue: "gone",
		Args: []byte(`{"report":"demo"}`)}); err != nil {
		t.Fatal(err)
	}
	want := []metrics.Queue{
		{Name: "exports", Workers: 2, Pending: 1},
		{Name: "deliveries", Workers: 2},
		{Name: "heavy", Workers: 3, Pending: 2},
		{Name: "webhooks", Workers: 2},
		{Name: "gone", Pending: 1},
	}

	res := ts.Get("/api/v1/stats")
	var s metrics.Stats
	if err := json.Unmarshal(res.Body, &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Queues, want) || s.Workers != (metrics.Workers{Total: 2}) {
		t.Fatalf("stats queues = %+v, workers %+v; want %+v and the exports lane's 2", s.Queues, s.Workers, want)
	}

	f := ts.scrape()
	var checks []metricCheck
	for _, q := range want {
		l := map[string]string{"queue": q.Name}
		checks = append(checks, metricCheck{"sheetq_queue_workers", l, float64(q.Workers)},
			metricCheck{"sheetq_queue_workers_busy", l, float64(q.Busy)}, metricCheck{"sheetq_queue_pending", l, float64(q.Pending)})
	}
	f.want(t, append(checks, metricCheck{"sheetq_workers", nil, 2}, metricCheck{"sheetq_workers_busy", nil, 0}))

	doc := apptest.Page(t, ts.Get("/queue"), http.StatusOK)
	for q, text := range map[string]string{"exports": "exports|0 of 2|1", "deliveries": "deliveries|0 of 2|0", "heavy": "heavy|0 of 3|2", "webhooks": "webhooks|0 of 2|0",
		"gone": "gone|no lane: add [queues.gone] to the config file|1"} {
		var cells []string
		apptest.TID(doc, "lane-"+q).Find("td").Each(func(_ int, td *goquery.Selection) {
			cells = append(cells, strings.Join(strings.Fields(td.Text()), " "))
		})
		if got := strings.Join(cells, "|"); got != text {
			t.Errorf("lane-%s row = %q, want %q", q, got, text)
		}
	}
}

// heavyLaneDir is a data directory whose config file defines the lane "heavy" with
// workers workers, and whose reports folder holds big.sql, a report in that lane.
func heavyLaneDir(t *testing.T, workers int) datadir.Dir {
	t.Helper()
	dir := datadir.Dir{Root: t.TempDir()}
	if err := os.WriteFile(dir.Config(), []byte(fmt.Sprintf("[queues.heavy]\nworkers = %d\n", workers)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir.Reports(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir.Reports(), "big.sql"), []byte("-- source: demo\n-- queue: heavy\nSELECT 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStartWarnsOfAQueueWithoutALane: jobs left in a queue whose lane is gone from the
// config file are named in the log at start, with how to run them; a queue with a lane
// is not.
func TestStartWarnsOfAQueueWithoutALane(t *testing.T) {
	t.Parallel()
	dir := datadir.Dir{Root: t.TempDir()}
	st, err := sqlite.Open(context.Background(), dir.DB(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"gone", "gone", store.DefaultQueue} {
		if _, _, err := st.Enqueue(context.Background(), store.NewJob{ID: store.NewID(), Kind: "export", Queue: q,
			Args: []byte(`{"report":"demo"}`), RunAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	var logs apptest.SyncBuffer
	newTestServer(t, testOpts{DataDir: dir.Root, Log: &logs})
	out := logs.String()
	if !strings.Contains(out, "queue has waiting jobs but no workers here") || !strings.Contains(out, "queue=gone pending=2") ||
		!strings.Contains(out, `config="[queues.gone] workers = N"`) {
		t.Fatalf("no warning for the queue without a lane in:\n%s", out)
	}
	if strings.Contains(out, "queue=exports pending") {
		t.Fatalf("a queue with a lane was warned of:\n%s", out)
	}
}
