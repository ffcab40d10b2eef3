package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"sheetq/app/metrics"
	"sheetq/internal/apptest"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// metricFamilies is a scrape of GET /metrics, parsed with the Prometheus text parser.
type metricFamilies map[string]*dto.MetricFamily

// scrape fetches and parses /metrics from the running server.
func (ts *testServer) scrape() metricFamilies {
	ts.t.Helper()
	res := ts.Get("/metrics")
	if res.StatusCode != http.StatusOK {
		ts.t.Fatalf("GET /metrics: status %d; body %s", res.StatusCode, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		ts.t.Fatalf("GET /metrics: Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(res.Body))
	if err != nil {
		ts.t.Fatalf("parse /metrics: %v\n%s", err, res.Body)
	}
	return fams
}

// series returns the one series of name whose labels include labels, or nil.
func (f metricFamilies) series(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	fam := f[name]
	if fam == nil {
		return nil
	}
	var found *dto.Metric
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		match := true
		for k, v := range labels {
			if got[k] != v {
				match = false
			}
		}
		if match {
			if found != nil {
				t.Fatalf("%s%v matches more than one series", name, labels)
			}
			found = m
		}
	}
	return found
}

// value is a counter's or gauge's value, or a histogram's sample count; it fails the
// test when the series does not exist.
func (f metricFamilies) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m := f.series(t, name, labels)
	if m == nil {
		t.Fatalf("no series %s%v", name, labels)
	}
	switch f[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("%s has type %v", name, f[name].GetType())
	return 0
}

// want checks each name{labels} == value.
func (f metricFamilies) want(t *testing.T, checks []metricCheck) {
	t.Helper()
	for _, c := range checks {
		if got := f.value(t, c.name, c.labels); got != c.value {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.value)
		}
	}
}

type metricCheck struct {
	name   string
	labels map[string]string
	value  float64
}

func kindLabel(extra ...string) map[string]string {
	l := map[string]string{"kind": "export"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// runDemoExports runs three demo exports to SUCCEEDED, the second failing its first
// attempt, the first sent with an Idempotency-Key and then replayed once it finished.
// It returns the jobs' ids once no worker is busy.
func (ts *testServer) runDemoExports() []string {
	ts.t.Helper()
	first := `{"report":"demo","params":{"rows":10}}`
	res := ts.Post(first, "metrics-key")
	if res.StatusCode != http.StatusAccepted {
		ts.t.Fatalf("POST: status %d; body %s", res.StatusCode, res.Body)
	}
	ids := []string{apptest.DecodeJob(ts.t, res).ID}
	ids = append(ids, ts.Create(`{"report":"demo","params":{"rows":10,"fail_first":1}}`).ID)
	ids = append(ids, ts.Create(`{"report":"demo","params":{"rows":20}}`).ID)
	for _, id := range ids {
		ts.WaitStatus(id, store.StatusSucceeded)
	}
	replay := ts.Post(first, "metrics-key")
	if replay.StatusCode != http.StatusOK || replay.Header.Get("Idempotent-Replayed") != "true" {
		ts.t.Fatalf("replay: status %d, Idempotent-Replayed %q", replay.StatusCode, replay.Header.Get("Idempotent-Replayed"))
	}
	// A job is SUCCEEDED a moment before its worker's slot is free again.
	apptest.WaitFor(ts.t, 10*time.Second, func() (bool, string) {
		n := ts.engine.Running()
		return n == 0, fmt.Sprintf("%d workers still busy", n)
	})
	return ids
}

func TestMetricsCountTheJobsThatRan(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})

	before := ts.scrape()
	before.want(t, []metricCheck{
		{"sheetq_jobs_accepted_total", kindLabel(), 0},
		{"sheetq_jobs_succeeded_total", kindLabel(), 0},
		{"sheetq_jobs_deduplicated_total", nil, 0},
		{"sheetq_job_run_seconds", kindLabel("status", "SUCCEEDED"), 0},
		{"sheetq_jobs_by_state", kindLabel("state", "SUCCEEDED"), 0},
		{"sheetq_workers", nil, 2},
	})

	ids := ts.runDemoExports()
	ts.Get("/api/v1/no-such-route")
	ts.Request("BREW", "/api/v1/exports", nil, nil)
	ts.Get("/no-such-page")

	f := ts.scrape()
	f.want(t, []metricCheck{
		{"sheetq_jobs_accepted_total", kindLabel(), 3},
		{"sheetq_jobs_started_total", kindLabel(), 4},
		{"sheetq_jobs_succeeded_total", kindLabel(), 3},
		{"sheetq_jobs_retried_total", kindLabel(), 1},
		{"sheetq_jobs_failed_total", kindLabel(), 0},
		{"sheetq_jobs_canceled_total", kindLabel(), 0},
		{"sheetq_jobs_recovered_total", kindLabel(), 0},
		{"sheetq_jobs_deduplicated_total", nil, 1},
		{"sheetq_jobs_accepted_total", map[string]string{"kind": webhook.Name}, 0},

		{"sheetq_job_queue_wait_seconds", kindLabel(), 4}, // one per attempt
		{"sheetq_job_run_seconds", kindLabel("status", "SUCCEEDED"), 3},
		{"sheetq_job_run_seconds", kindLabel("status", "FAILED"), 0},
		{"sheetq_job_end_to_end_seconds", kindLabel("status", "SUCCEEDED"), 3},
		{"sheetq_job_end_to_end_seconds", kindLabel("status", "CANCELED"), 0},

		{"sheetq_jobs_by_state", kindLabel("state", "SUCCEEDED"), 3},
		{"sheetq_jobs_by_state", kindLabel("state", "PENDING"), 0},
		{"sheetq_jobs_by_state", kindLabel("state", "PROCESSING"), 0},
		{"sheetq_oldest_pending_age_seconds", kindLabel(), 0},
		{"sheetq_jobs_heartbeat_late", kindLabel(), 0},
		{"sheetq_workers", nil, 2},
		{"sheetq_workers_busy", nil, 0},

		{"sheetq_http_requests_total", map[string]string{"route": "/api/v1/exports", "method": "POST", "code": "202"}, 3},
		{"sheetq_http_requests_total", map[string]string{"route": "/api/v1/exports", "method": "POST", "code": "200"}, 1},
		{"sheetq_http_requests_total", map[string]string{"route": "/api/", "method": "GET", "code": "404"}, 1},
		{"sheetq_http_requests_total", map[string]string{"route": "/api/", "method": "OTHER", "code": "405"}, 1},
		{"sheetq_http_requests_total", map[string]string{"route": "unmatched", "method": "GET", "code": "404"}, 1},
		{"sheetq_http_requests_total", map[string]string{"route": "/metrics", "method": "GET", "code": "200"}, 1},
		{"sheetq_http_request_duration_seconds", map[string]string{"route": "/api/v1/exports", "method": "POST"}, 4},
	})
	if got := f.value(t, "sheetq_http_requests_total", map[string]string{"route": "/api/v1/exports/{id}", "method": "GET", "code": "200"}); got < 3 {
		t.Errorf("GET /api/v1/exports/{id} counted %v times, want at least one per job", got)
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if f[name] == nil {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}
	// Labels stay bounded: no job id, no raw path.
	for name, fam := range f {
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				for _, id := range ids {
					if strings.Contains(lp.GetValue(), id) {
						t.Errorf("%s has a label with a job id: %s=%q", name, lp.GetName(), lp.GetValue())
					}
				}
			}
		}
	}
	// The run histogram's sum is the time the final attempts ran, so it is positive.
	if m := f.series(t, "sheetq_job_run_seconds", kindLabel("status", "SUCCEEDED")); m.GetHistogram().GetSampleSum() <= 0 {
		t.Errorf("run seconds sum = %v, want > 0", m.GetHistogram().GetSampleSum())
	}

	// A second scrape counts nothing twice.
	again := ts.scrape()
	again.want(t, []metricCheck{
		{"sheetq_jobs_accepted_total", kindLabel(), 3},
		{"sheetq_jobs_started_total", kindLabel(), 4},
		{"sheetq_job_end_to_end_seconds", kindLabel("status", "SUCCEEDED"), 3},
	})
}

func TestMetricsCountCancels(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	slow := ts.Create(`{"report":"demo","params":{"rows":1000,"seconds":600}}`)
	ts.WaitStatus(slow.ID, store.StatusProcessing)
	res := ts.Request(http.MethodPost, "/api/v1/exports/"+slow.ID+"/cancel", nil, nil)
	if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("cancel: status %d; body %s", res.StatusCode, res.Body)
	}
	ts.WaitStatus(slow.ID, store.StatusCanceled)

	ts.scrape().want(t, []metricCheck{
		{"sheetq_jobs_accepted_total", kindLabel(), 1},
		{"sheetq_jobs_started_total", kindLabel(), 1},
		{"sheetq_jobs_canceled_total", kindLabel(), 1},
		{"sheetq_jobs_succeeded_total", kindLabel(), 0},
		{"sheetq_job_end_to_end_seconds", kindLabel("status", "CANCELED"), 1},
		{"sheetq_jobs_by_state", kindLabel("state", "CANCELED"), 1},
	})
}

// TestMetricsCountOnlyThisProcess: events already in the store when the server starts
// are not counted again.
func TestMetricsCountOnlyThisProcess(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ts.runDemoExports()
	m := metrics.New(ts.store, ts.log)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	// A scrape counts the events committed up to now.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, fams, "sheetq_jobs_accepted_total"); got != 0 {
		t.Fatalf("a new process counted %v earlier acceptances", got)
	}
}

func counterValue(t *testing.T, fams metricFamilies, name string) float64 {
	t.Helper()
	fam := fams[name]
	if fam == nil {
		t.Fatalf("no %s", name)
	}
	sum := 0.0
	for _, s := range fam.GetMetric() {
		sum += s.GetCounter().GetValue()
	}
	return sum
}

func TestStatsAfterExports(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ts.runDemoExports()

	res := ts.Get("/api/v1/stats")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/v1/stats: status %d, Content-Type %q; body %s", res.StatusCode, res.Header.Get("Content-Type"), res.Body)
	}
	var s metrics.Stats
	if err := json.Unmarshal(res.Body, &s); err != nil {
		t.Fatal(err)
	}
	wantCounts := map[store.Status]int{}
	for _, st := range store.AllStatuses {
		wantCounts[st] = 0
	}
	wantCounts[store.StatusSucceeded] = 3
	if !maps.Equal(s.Counts, wantCounts) {
		t.Errorf("counts = %v, want %v", s.Counts, wantCounts)
	}
	if s.Workers != (metrics.Workers{Busy: 0, Total: 2}) || s.LateHeartbeats != 0 || s.OldestPendingAgeSeconds != 0 ||
		s.Stalled.Count != 0 || len(s.Stalled.Jobs) != 0 {
		t.Errorf("queue now = workers %+v, late %d, oldest %v, stalled %+v", s.Workers, s.LateHeartbeats,
			s.OldestPendingAgeSeconds, s.Stalled)
	}
	if s.Stalled.LateHeartbeatSeconds != 0.1 { // twice the test server's 50 ms heartbeat
		t.Errorf("late heartbeat threshold = %v s, want 0.1", s.Stalled.LateHeartbeatSeconds)
	}
	for _, w := range []struct {
		name  string
		tp    metrics.Throughput
		width int
		n     int
		dur   metrics.WaitRun
	}{
		{"last hour", s.Throughput.LastHour, 300, 12, s.Durations.LastHour},
		{"last day", s.Throughput.LastDay, 3600, 24, s.Durations.LastDay},
	} {
		if w.tp.BucketSeconds != w.width || len(w.tp.Buckets) != w.n {
			t.Errorf("%s: %d buckets of %d s, want %d of %d", w.name, len(w.tp.Buckets), w.tp.BucketSeconds, w.n, w.width)
			continue
		}
		finished, succeeded := 0, 0
		for i, b := range w.tp.Buckets {
			finished += b.Finished
			succeeded += b.Succeeded
			if i > 0 && b.Start.Sub(w.tp.Buckets[i-1].Start).Seconds() != float64(w.width) {
				t.Errorf("%s: bucket %d starts at %v after %v", w.name, i, b.Start, w.tp.Buckets[i-1].Start)
			}
		}
		if last := w.tp.Buckets[w.n-1].Start; s.GeneratedAt.Before(last) || s.GeneratedAt.Sub(last).Seconds() >= float64(w.width) {
			t.Errorf("%s: last bucket starts at %v, generated at %v", w.name, last, s.GeneratedAt)
		}
		if finished != 3 || succeeded != 3 {
			t.Errorf("%s: %d finished, %d succeeded, want 3 and 3", w.name, finished, succeeded)
		}
		for _, p := range []struct {
			what string
			p    metrics.Percentiles
		}{{"wait", w.dur.Wait}, {"run", w.dur.Run}} {
			if p.p.Count != 3 || p.p.P50 == nil || p.p.P95 == nil || *p.p.P50 < 0 || *p.p.P50 > *p.p.P95 {
				t.Errorf("%s %s = %+v, want 3 jobs with 0 <= p50 <= p95", w.name, p.what, p.p)
			}
		}
	}
}

// TestMetricsGroupCommitAndStreams: the group commit's figures and the event streams'
// count are exported (store.BatchStats and events.Hub.Stats, read at scrape time).
func TestMetricsGroupCommitAndStreams(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	before := ts.scrape()
	before.want(t, []metricCheck{
		{"sheetq_event_streams", nil, 0},
		{"sheetq_event_streams_dropped_total", nil, 0},
		{"sheetq_group_commit_waiting", nil, 0},
		{"sheetq_request_bodies_reading", nil, 0},
		{"sheetq_foreground_requests", nil, 0},
	})
	commits := before.value(t, "sheetq_group_commits_total", nil)
	jobs := before.value(t, "sheetq_group_commit_jobs_total", nil)
	writes := before.value(t, "sheetq_store_write_seconds", nil)

	ts.Create(`{"report":"demo","params":{"rows":1}}`)
	ts.Create(`{"report":"demo","params":{"rows":2}}`)
	c := openEvents(t, ts, "", "")
	defer c.close()
	after := ts.scrape()
	if got := after.value(t, "sheetq_group_commit_jobs_total", nil); got != jobs+2 {
		t.Errorf("group commit jobs %v, want %v", got, jobs+2)
	}
	if got := after.value(t, "sheetq_group_commits_total", nil); got < commits+1 || got > commits+2 {
		t.Errorf("group commits %v, want 1 or 2 more than %v", got, commits)
	}
	after.want(t, []metricCheck{{"sheetq_event_streams", nil, 1}})
	// Each group commit is a write transaction on the writer, timed in the histogram.
	if got := after.value(t, "sheetq_store_write_seconds", nil); got < writes+1 {
		t.Errorf("write transactions %v, want at least one more than %v", got, writes)
	}
	h := after.series(t, "sheetq_store_write_seconds", nil).GetHistogram()
	if b := h.GetBucket(); len(b) != 15 || b[0].GetUpperBound() != 0.0005 || !math.IsInf(b[14].GetUpperBound(), 1) || h.GetSampleSum() <= 0 {
		t.Errorf("write histogram: buckets %v, sum %v; want 0.5 ms to 10 s and +Inf (15) and a positive sum", b, h.GetSampleSum())
	}
}

// TestBatchMetrics: the engine's claim and end transactions are exported with the jobs
// they carried (jobs.BatchStats, rule 28). Three exports, one failing its first attempt,
// are four attempts: four claimed, four ends, in at most four transactions of each.
func TestBatchMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ts.runDemoExports()
	fams := ts.scrape()
	fams.want(t, []metricCheck{
		{"sheetq_claimed_jobs_total", nil, 4},
		{"sheetq_attempt_ends_total", nil, 4},
		{"sheetq_attempt_ends_waiting", nil, 0},
	})
	for _, name := range []string{"sheetq_claim_transactions_total", "sheetq_end_transactions_total"} {
		if got := fams.value(t, name, nil); got < 1 || got > 4 {
			t.Errorf("%s = %v, want 1 to 4", name, got)
		}
	}
	s := ts.engine.BatchStats()
	if float64(s.ClaimCommits) != fams.value(t, "sheetq_claim_transactions_total", nil) ||
		float64(s.FinishCommits) != fams.value(t, "sheetq_end_transactions_total", nil) {
		t.Errorf("metrics disagree with the engine's %+v", s)
	}
}
