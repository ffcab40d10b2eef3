// Package metrics owns what sheetq counts and measures: the Prometheus registry served
// at GET /metrics (job counters and histograms from the job_events log, queue gauges,
// HTTP requests by route), and the queue's figures of GET /api/v1/stats and the Queue
// page (ARCHITECTURE.md, "Parts").
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// jobBuckets spans what an export can take, from a few milliseconds to six hours.
var jobBuckets = []float64{
	0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 21600,
}

// httpBuckets spans API answers; an SSE stream is observed when it closes and lands in +Inf.
var httpBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// finalStatuses label the histograms of finished jobs.
var finalStatuses = []store.Status{store.StatusSucceeded, store.StatusFailed, store.StatusCanceled}

// metricKinds are the job kinds whose series exist from the start, at zero; a kind
// found in the store later gets its series when it is first seen.
var metricKinds = []string{export.Name, webhook.Name}

// Metrics is what GET /metrics serves, on its own registry.
//
// Job counters and histograms follow the job_events log: each engine state change
// (jobs.Config.OnChange) and each scrape read the events committed since the last
// ones seen, so every transition is counted exactly once, whichever goroutine notices
// it. Only events committed after this process started count (one process owns a data
// directory): counters restart from zero with the process, as Prometheus expects.
// Gauges of the queue are read from the store at scrape time.
type Metrics struct {
	reg *prometheus.Registry
	st  Store
	log *slog.Logger

	mu     sync.Mutex // serialises catching up with the event log
	cursor string     // the store's cursor after the last job event counted

	pending  atomic.Bool    // a background catch-up is scheduled (onChange)
	bg       sync.WaitGroup // background catch-ups
	stopping chan struct{}  // closed by Stop: a scheduled catch-up is dropped
	// bgMu orders bg.Add before Stop's bg.Wait: a WaitGroup must not gain work while
	// it is being waited for, and OnChange may still be called after Stop (a
	// PostgreSQL node's listener outlives the services it wakes).
	bgMu    sync.Mutex
	stopped bool

	// By job kind.
	accepted, started, succeeded, failed, retried, recovered, canceled *prometheus.CounterVec
	queueWait, runTime, endToEnd                                       *prometheus.HistogramVec

	deduplicated prometheus.Counter

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	// depth is the queue depth sampled since Start (depth.go).
	depth Depth
}

// New builds the registry with the Go and process collectors and the job and HTTP
// metrics. Call WatchQueue once the engine exists to add the queue gauges, and Start
// before the engine starts.
func New(st Store, log *slog.Logger) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), st: st, log: log, stopping: make(chan struct{})}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sheetq", Name: name, Help: help + ", by kind."},
			[]string{"kind"})
	}
	m.accepted = counter("jobs_accepted_total", "Jobs accepted (committed as PENDING) in this process")
	m.started = counter("jobs_started_total", "Attempts started (claimed by a worker) in this process")
	m.succeeded = counter("jobs_succeeded_total", "Jobs that ended SUCCEEDED in this process, orphans completed from their published file included")
	m.failed = counter("jobs_failed_total", "Jobs that ended FAILED in this process")
	m.retried = counter("jobs_retried_total", "Failed attempts put back to PENDING for an automatic retry (attempt_failed events)")
	m.recovered = counter("jobs_recovered_total", "Orphaned attempts (lost heartbeat, crash) taken back by the reaper, whatever became of the job")
	m.canceled = counter("jobs_canceled_total", "Jobs that ended CANCELED in this process")
	m.deduplicated = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sheetq", Name: "jobs_deduplicated_total",
		Help: "Export requests answered with their existing job because of their Idempotency-Key."})

	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sheetq", Name: "job_queue_wait_seconds", Buckets: jobBuckets,
		Help: "Time from acceptance to the start of an attempt (started_at - created_at), observed as each attempt starts, by kind.",
	}, []string{"kind"})
	m.runTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sheetq", Name: "job_run_seconds", Buckets: jobBuckets,
		Help: "Run time of a finished job's final attempt (finished_at - started_at), by kind and final status; cancelled jobs are left out.",
	}, []string{"kind", "status"})
	m.endToEnd = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sheetq", Name: "job_end_to_end_seconds", Buckets: jobBuckets,
		Help: "Time from acceptance to the end of a job (finished_at - created_at), by kind and final status.",
	}, []string{"kind", "status"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sheetq", Name: "http_requests_total",
		Help: "HTTP requests by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "sheetq", Name: "http_request_duration_seconds", Buckets: httpBuckets,
		Help: "HTTP request duration by route pattern and method, until the handler returns.",
	}, []string{"route", "method"})
	for _, k := range metricKinds {
		for _, c := range []*prometheus.CounterVec{m.accepted, m.started, m.succeeded, m.failed, m.retried, m.recovered, m.canceled} {
			c.WithLabelValues(k)
		}
		m.queueWait.WithLabelValues(k)
		for _, st := range finalStatuses {
			m.endToEnd.WithLabelValues(k, string(st))
			if st != store.StatusCanceled {
				m.runTime.WithLabelValues(k, string(st))
			}
		}
	}
	m.reg.MustRegister(m.accepted, m.started, m.succeeded, m.failed, m.retried, m.recovered, m.canceled,
		m.deduplicated, m.queueWait, m.runTime, m.endToEnd, m.httpRequests, m.httpDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Start counts from the events committed from now on: events already in the store are
// not counted (one process owns a data directory, and counters start at zero with it).
// Counting itself runs on OnChange and on each scrape; Start spawns only the sampler of
// the queue depth (depth.go), which Stop ends.
func (m *Metrics) Start(ctx context.Context) error {
	head, err := m.st.EventHead(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.cursor = head
	m.mu.Unlock()
	if err := m.sampleDepth(ctx); err != nil {
		m.log.WarnContext(ctx, "sample the queue depth", "err", err)
	}
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if !m.stopped {
		m.bg.Add(1)
		go m.runDepth()
	}
	return nil
}

// WatchStreams adds the event streams' figures, read at scrape time from stats (the
// hub's): open streams, and streams dropped for falling behind.
func (m *Metrics) WatchStreams(stats func() (clients int, dropped int64)) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sheetq", Name: "event_streams",
			Help: "Open event streams (GET /api/v1/events)."},
			func() float64 { c, _ := stats(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "event_streams_dropped_total",
			Help: "Event streams disconnected because their client fell behind; it replays what it missed on reconnect."},
			func() float64 { _, d := stats(); return float64(d) }),
	)
}

// WatchBodies adds the number of request bodies being read now, read at scrape time
// from reading (the middleware's): handlers waiting on a client's bytes.
func (m *Metrics) WatchBodies(reading func() int64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sheetq", Name: "request_bodies_reading",
		Help: "Request bodies being read now: handlers waiting for a client's bytes (each has a 10 s deadline)."},
		func() float64 { return float64(reading()) }))
}

// WatchGate adds the number of requests being accepted now, read at scrape time from
// active (the engine's gate): while it is above zero, running exports yield to them.
func (m *Metrics) WatchGate(active func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sheetq", Name: "foreground_requests",
		Help: "Requests being accepted now (body read, answer not yet decided); while any is, running exports yield to them."},
		func() float64 { return float64(active()) }))
}

// WatchGroupCommit adds the store's group commit figures (store.BatchStats): how many
// transactions carried how many accepted jobs, and how many wait for the next one.
func (m *Metrics) WatchGroupCommit() {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "group_commits_total",
			Help: "Write transactions that accepted jobs (one group commit carries every request that arrived while the one before committed)."},
			func() float64 { return float64(m.st.BatchStats().Commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "group_commit_jobs_total",
			Help: "Jobs carried by group commits; divided by sheetq_group_commits_total, the mean batch size."},
			func() float64 { return float64(m.st.BatchStats().Calls) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sheetq", Name: "group_commit_waiting",
			Help: "Requests queued for the next group commit."},
			func() float64 { return float64(m.st.BatchStats().Waiting) }),
	)
}

// WatchWrites adds the histogram of write transactions on SQLite's one writer and
// returns what observes one (store.Store.ObserveWrites takes it): how long each accepted
// group, claim, end and change held the writer, its fsync and any WAL checkpoint
// included. Buckets go from half a millisecond, about one commit with its fsync on a
// quiet disk, to seconds, a disk that stalls.
func (m *Metrics) WatchWrites() (observe func(time.Duration)) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sheetq", Name: "store_write_seconds",
		Help:    "Write transactions on SQLite's one writer, from BEGIN until COMMIT or ROLLBACK returned: waiting for the writer, the commit's fsync and any WAL checkpoint included.",
		Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}})
	m.reg.MustRegister(h)
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// WatchBatches adds the engine's batching figures (jobs.BatchStats), read at scrape time
// from stats: claim transactions and the jobs they took, and the transactions that
// recorded attempts' ends and the ends they carried (ARCHITECTURE.md, rule 28).
func (m *Metrics) WatchBatches(stats func() jobs.BatchStats) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "claim_transactions_total",
			Help: "Claim transactions that took jobs (each takes up to its lane's free slots)."},
			func() float64 { return float64(stats().ClaimCommits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "claimed_jobs_total",
			Help: "Jobs taken by claim transactions; divided by sheetq_claim_transactions_total, the mean claim batch."},
			func() float64 { return float64(stats().Claimed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "end_transactions_total",
			Help: "Transactions that recorded attempts' ends (one group commit carries every end that arrived while the one before committed)."},
			func() float64 { return float64(stats().FinishCommits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sheetq", Name: "attempt_ends_total",
			Help: "Attempts' ends (succeeded, failed, cancelled, requeued) those transactions carried."},
			func() float64 { return float64(stats().Finished) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sheetq", Name: "attempt_ends_waiting",
			Help: "Attempts' ends queued for the next end transaction."},
			func() float64 { return float64(stats().FinishWaiting) }),
	)
}

// WatchQueue adds the gauges read from the store and the engine at scrape time.
func (m *Metrics) WatchQueue(eng *jobs.Engine) {
	m.reg.MustRegister(&queueCollector{st: m.st, eng: eng, log: m.log, kinds: metricKinds})
}

// OnChange is the engine's state-change hook: it counts the events the change appended.
// The counting runs in the background: the engine calls this hook on the request path
// of every accepted export, and a store query under m.mu there serialised every 202
// behind the one before (a tenth of the server's CPU under load). Changes that arrive
// while a catch-up is scheduled share it; a scrape catches up itself, so /metrics never
// lags what is committed.
func (m *Metrics) OnChange() {
	if m.pending.Swap(true) {
		return // the scheduled catch-up has not started reading yet: it will see this change
	}
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if m.stopped {
		return // the counters end with the process
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		// Changes come in bursts (a group commit is hundreds of them a second): let them
		// gather, then count them all with one read.
		t := time.NewTimer(metricsGather)
		defer t.Stop()
		select {
		case <-t.C:
		case <-m.stopping:
			return // the counters end with the process
		}
		m.pending.Store(false) // before reading, so a later change schedules another run
		// No request bounds this.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.catchUp(ctx)
	}()
}

// metricsGather is how long a catch-up waits for more changes before it reads them. A
// scrape catches up by itself, so the background one only keeps the backlog short: once
// a second is plenty, and at 20 ms a burst of requests paid for fifty reads a second
// (6% of the server's CPU while accepting 1,200 requests a second).
const metricsGather = time.Second

// Stop ends background catch-ups and waits for them, before the store closes; it may be
// called more than once.
func (m *Metrics) Stop() {
	m.bgMu.Lock()
	if !m.stopped {
		m.stopped = true
		close(m.stopping)
	}
	m.bgMu.Unlock()
	m.bg.Wait()
}

// Dedup counts an idempotent replay; m may be nil.
func (m *Metrics) Dedup() {
	if m != nil {
		m.deduplicated.Inc()
	}
}

// catchUp counts the job events committed since the last ones counted.
func (m *Metrics) catchUp(ctx context.Context) {
	const batch = 500
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		// The store's cursor, not "id > last id": on PostgreSQL ids commit out of order,
		// and a transition committed late would never be counted.
		ts, next, err := m.st.TransitionsSince(ctx, m.cursor, batch)
		if err != nil {
			m.log.WarnContext(ctx, "metrics: read job events", "err", err)
			return
		}
		for _, t := range ts {
			m.count(t)
		}
		m.cursor = next
		if len(ts) < batch {
			return
		}
	}
}

// count turns one job event into counter increments and histogram observations.
// Events of other types (cancel_requested, requeued, retried on request, webhook
// timeline entries) change no metric.
func (m *Metrics) count(t store.Transition) {
	k := t.Kind
	switch t.Type {
	case store.EventAccepted:
		m.accepted.WithLabelValues(k).Inc()
	case store.EventStarted:
		m.started.WithLabelValues(k).Inc()
		m.queueWait.WithLabelValues(k).Observe(seconds(t.At.Sub(t.CreatedAt)))
	case store.EventAttemptFailed:
		m.retried.WithLabelValues(k).Inc()
	case store.EventRecovered:
		m.recovered.WithLabelValues(k).Inc()
	case store.EventCompletedFromFile:
		m.recovered.WithLabelValues(k).Inc()
		m.succeeded.WithLabelValues(k).Inc()
		m.finished(t, store.StatusSucceeded)
	case store.EventSucceeded:
		m.succeeded.WithLabelValues(k).Inc()
		m.finished(t, store.StatusSucceeded)
	case store.EventFailed, store.EventCanceled:
		// The reaper's recoveries that end the job carry the code "lost".
		if t.Code == "lost" {
			m.recovered.WithLabelValues(k).Inc()
		}
		if t.Type == store.EventFailed {
			m.failed.WithLabelValues(k).Inc()
			m.finished(t, store.StatusFailed)
		} else {
			m.canceled.WithLabelValues(k).Inc()
			m.finished(t, store.StatusCanceled)
		}
	}
}

func (m *Metrics) finished(t store.Transition, status store.Status) {
	m.endToEnd.WithLabelValues(t.Kind, string(status)).Observe(seconds(t.At.Sub(t.CreatedAt)))
	// A job retried on request may have started again by the time its event is read;
	// then its started_at is not this attempt's and there is nothing to observe.
	if status != store.StatusCanceled && !t.StartedAt.IsZero() && !t.StartedAt.After(t.At) {
		m.runTime.WithLabelValues(t.Kind, string(status)).Observe(seconds(t.At.Sub(t.StartedAt)))
	}
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// Handler serves the registry in the Prometheus text format, after counting the events
// committed up to now, so that a scrape sees every finished transition.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			problem.Write(w, http.StatusNotFound, "no_metrics", "this server keeps no metrics")
		})
	}
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError, // a failed store query leaves out its gauges, not the rest
		Registry:      m.reg,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.catchUp(r.Context())
		h.ServeHTTP(w, r)
	})
}

// Instrument returns the middleware that counts requests and their duration by the
// ServeMux pattern that routes them (never the raw path, which would make a series per
// job id), method and code. Requests refused before routing (auth, host check) still
// count under their pattern. A nil m counts nothing.
func (m *Metrics) Instrument(mux *http.ServeMux) func(http.Handler) http.Handler {
	if m == nil {
		return nil
	}
	return func(next http.Handler) http.Handler { return m.instrument(mux, next) }
}

func (m *Metrics) instrument(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &middleware.StatusRecorder{ResponseWriter: w}
		start := time.Now()
		next.ServeHTTP(rec, r)
		took := time.Since(start)
		pattern := r.Pattern // set by the mux on this request, unless a middleware copied it
		if pattern == "" {
			_, pattern = mux.Handler(r)
		}
		route := routeLabel(pattern)
		method := methodLabel(r.Method)
		m.httpRequests.WithLabelValues(route, method, strconv.Itoa(max(rec.Status, 200))).Inc()
		m.httpDuration.WithLabelValues(route, method).Observe(took.Seconds())
	})
}

// routeLabel is a pattern without its method ("GET /api/v1/exports/{id}" becomes
// "/api/v1/exports/{id}"), or "unmatched" for a request no route took: no pattern, or
// the pages' catch-all "/" (its not-found page).
func routeLabel(pattern string) string {
	if pattern == "" || pattern == "/" {
		return "unmatched"
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		return pattern[i+1:]
	}
	return pattern
}

// methodLabel bounds the method label: a client may send any token as a method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

// queueCollector reads the queue's gauges from the store and the engine at scrape time.
type queueCollector struct {
	st    Store
	eng   *jobs.Engine
	log   *slog.Logger
	kinds []string // always reported, at zero when they have no job
}

var (
	jobsByStateDesc = prometheus.NewDesc("sheetq_jobs_by_state",
		"Jobs in the store by kind and state (retention removes old ones).", []string{"kind", "state"}, nil)
	oldestPendingDesc = prometheus.NewDesc("sheetq_oldest_pending_age_seconds",
		"How long the oldest runnable PENDING job of a kind has waited since it became runnable (run_at); 0 when none waits.",
		[]string{"kind"}, nil)
	lateHeartbeatsDesc = prometheus.NewDesc("sheetq_jobs_heartbeat_late",
		"PROCESSING jobs of a kind whose last heartbeat is older than twice the heartbeat interval.", []string{"kind"}, nil)
	workersBusyDesc = prometheus.NewDesc("sheetq_workers_busy",
		"Jobs of the exports queue this process is running now (sheetq_queue_workers_busy has every queue).", nil, nil)
	workersDesc = prometheus.NewDesc("sheetq_workers",
		"Workers of the exports queue (--workers); sheetq_queue_workers has every queue.", nil, nil)
	queueWorkersDesc = prometheus.NewDesc("sheetq_queue_workers",
		"Workers of a queue (lane): how many of its jobs may run at once; 0 for a queue with jobs but no lane.", []string{"queue"}, nil)
	queueBusyDesc = prometheus.NewDesc("sheetq_queue_workers_busy",
		"Jobs of a queue (lane) this process is running now.", []string{"queue"}, nil)
	queuePendingDesc = prometheus.NewDesc("sheetq_queue_pending",
		"PENDING jobs of a queue (lane), runnable or waiting for their run_at.", []string{"queue"}, nil)
	abandonedDesc = prometheus.NewDesc("sheetq_handlers_abandoned",
		"Export handlers that did not stop when told to (stall, cancel, lost lease, shutdown) and were abandoned, still running in this process; each freed its worker.", nil, nil)
	abandonedTotalDesc = prometheus.NewDesc("sheetq_handlers_abandoned_total",
		"Export handlers abandoned in this process because they did not stop when told to.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsByStateDesc, oldestPendingDesc, lateHeartbeatsDesc, workersBusyDesc, workersDesc,
		queueWorkersDesc, queueBusyDesc, queuePendingDesc, abandonedDesc, abandonedTotalDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	cfg := c.eng.Config()
	// The unlabelled series keep their meaning from before lanes: the --workers pool,
	// now the exports lane (always Lanes()[0]).
	exports := c.eng.Lanes()[0]
	ch <- prometheus.MustNewConstMetric(workersBusyDesc, prometheus.GaugeValue, float64(exports.Busy))
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(exports.Workers))
	alive, total := c.eng.Abandoned()
	ch <- prometheus.MustNewConstMetric(abandonedDesc, prometheus.GaugeValue, float64(alive))
	ch <- prometheus.MustNewConstMetric(abandonedTotalDesc, prometheus.CounterValue, float64(total))

	// Collect has no request context; a scrape must not hang on a stuck database.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if queues, err := ReadQueues(ctx, c.st, c.eng); err != nil {
		c.log.WarnContext(ctx, "metrics: queues", "err", err)
		for _, d := range []*prometheus.Desc{queueWorkersDesc, queueBusyDesc, queuePendingDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
	} else {
		for _, q := range queues {
			ch <- prometheus.MustNewConstMetric(queueWorkersDesc, prometheus.GaugeValue, float64(q.Workers), q.Name)
			ch <- prometheus.MustNewConstMetric(queueBusyDesc, prometheus.GaugeValue, float64(q.Busy), q.Name)
			ch <- prometheus.MustNewConstMetric(queuePendingDesc, prometheus.GaugeValue, float64(q.Pending), q.Name)
		}
	}
	now := c.st.Now()
	qs, err := c.st.QueueStats(ctx, now, now.Add(-lateAfter(cfg)), c.kinds...)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: queue stats", "err", err)
		for _, d := range []*prometheus.Desc{jobsByStateDesc, oldestPendingDesc, lateHeartbeatsDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for kind, ks := range qs {
		for st, n := range ks.Counts {
			ch <- prometheus.MustNewConstMetric(jobsByStateDesc, prometheus.GaugeValue, float64(n), kind, string(st))
		}
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, oldestPendingAge(ks, now).Seconds(), kind)
		ch <- prometheus.MustNewConstMetric(lateHeartbeatsDesc, prometheus.GaugeValue, float64(ks.LateHeartbeats), kind)
	}
}

// lateAfter is the heartbeat age after which a running job's heartbeat counts as late:
// two intervals, so one slow stamp is not reported.
func lateAfter(cfg jobs.Config) time.Duration { return 2 * cfg.Heartbeat }

func oldestPendingAge(ks store.KindStats, now time.Time) time.Duration {
	if ks.OldestPendingRunAt.IsZero() {
		return 0
	}
	return max(now.Sub(ks.OldestPendingRunAt), 0)
}
