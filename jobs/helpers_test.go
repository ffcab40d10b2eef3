package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/store/storetest"
)

// waitTimeout bounds every wait on a condition; generous, because -race on a busy machine
// is slow, and a passing test never waits for it.
const waitTimeout = 15 * time.Second

// harness is a data directory with a migrated store, as the app lays it out.
type harness struct {
	dir, dbPath, tmp, exports string
	st                        *store.Store
	// st2, when set, is the store the engine gets instead of st: st wrapped by a test.
	st2 jobs.Store
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{
		dir:     dir,
		dbPath:  filepath.Join(dir, "sheetq.db"),
		tmp:     filepath.Join(dir, "tmp"),
		exports: filepath.Join(dir, "exports"),
	}
	h.st = h.openStore(t)
	return h
}

// openStore opens another store on the harness's file, as another process would.
func (h *harness) openStore(t testing.TB) *store.Store {
	t.Helper()
	return h.openStoreWith(t, sqlite.Options{})
}

// openStoreWith is openStore with options, such as a clock the test moves: staleness,
// backoff and retention are measured by the store's clock.
func (h *harness) openStoreWith(t testing.TB, opts sqlite.Options) *store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), h.dbPath, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// config is a fast engine configuration. PollInterval is an hour so that every test also
// proves the engine does not lean on polling: a lost wake-up hangs the test. StaleAfter
// is far above the heartbeat so that a slow -race machine never recovers a live job;
// tests about recovery shorten it.
func (h *harness) config() jobs.Config {
	return jobs.Config{
		Workers:       2,
		Heartbeat:     20 * time.Millisecond,
		StaleAfter:    10 * time.Second,
		ShutdownGrace: 200 * time.Millisecond,
		PollInterval:  time.Hour,
		BackoffBase:   10 * time.Millisecond,
		BackoffMax:    time.Second,
		TmpDir:        h.tmp,
		ExportsDir:    h.exports,
		WorkerID:      "test-worker",
		Logger:        testLogger(),
	}
}

// testLogger discards engine logs unless SHEETQ_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("SHEETQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start builds an engine with handlers, starts it and stops it at cleanup.
func (h *harness) start(t testing.TB, cfg jobs.Config, handlers map[string]jobs.Handler) *jobs.Engine {
	t.Helper()
	var st jobs.Store = h.st
	if h.st2 != nil {
		st = h.st2
	}
	e := jobs.New(st, cfg)
	for kind, hd := range handlers {
		e.Register(kind, hd)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start engine: %v", err)
	}
	t.Cleanup(e.Stop)
	return e
}

func enqueue(t testing.TB, e *jobs.Engine, kind string, maxAttempts int) store.Job {
	t.Helper()
	j, existed, err := e.Enqueue(context.Background(), store.NewJob{Kind: kind, Args: json.RawMessage(`{}`), MaxAttempts: maxAttempts})
	if err != nil || existed {
		t.Fatalf("enqueue %s: existed %v, %v", kind, existed, err)
	}
	return j
}

// enqueueStore puts a job in through the store alone, waking no engine.
func enqueueStore(t testing.TB, st *store.Store, kind string, nj store.NewJob) store.Job {
	t.Helper()
	nj.Kind = kind
	if nj.ID == "" {
		nj.ID = jobs.NewID()
	}
	if nj.Args == nil {
		nj.Args = json.RawMessage(`{}`)
	}
	j, _, err := st.Enqueue(context.Background(), nj)
	if err != nil {
		t.Fatalf("enqueue %s: %v", kind, err)
	}
	return j
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitStatus waits until the job reaches status and returns it.
func (h *harness) waitStatus(t testing.TB, id string, status store.Status) store.Job {
	t.Helper()
	var j store.Job
	waitFor(t, "job "+id+" to be "+string(status), func() bool {
		var err error
		j, err = h.st.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if j.Status.Final() && j.Status != status {
			t.Fatalf("job %s ended %s (%s: %s), want %s", id, j.Status, j.ErrorCode, j.ErrorMessage, status)
		}
		return j.Status == status
	})
	return j
}

// recv waits for a signal on ch.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func (h *harness) events(t testing.TB, id string) []store.Event {
	t.Helper()
	ev, err := h.st.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func eventTypes(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

var eventData = storetest.EventData

// partFiles lists part files left in the harness's tmp dir.
func (h *harness) partFiles(t testing.TB) []string {
	t.Helper()
	parts, err := filepath.Glob(filepath.Join(h.tmp, "*.part"))
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

func (h *harness) noFile(t testing.TB, id string) {
	t.Helper()
	if _, err := os.Stat(jobs.FilePath(h.exports, id)); !os.IsNotExist(err) {
		t.Fatalf("job %s has a published file (stat err %v)", id, err)
	}
	if parts := h.partFiles(t); len(parts) > 0 {
		t.Fatalf("part files left: %v", parts)
	}
}

// calls counts handler invocations per job, with the attempt each saw.
type calls struct {
	mu sync.Mutex
	m  map[string][]int
}

func (c *calls) add(run *jobs.Run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]int{}
	}
	c.m[run.JobID] = append(c.m[run.JobID], run.Attempt)
}

func (c *calls) of(id string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.m[id]...)
}

// payload is what test handlers write as a job's file.
func payload(id string) []byte { return []byte("xlsx bytes for " + id) }

// blocker is a handler that signals when it starts and returns on its context,
// optionally writing a part file first.
func blocker(write bool, started chan<- string) jobs.HandlerFunc {
	return func(ctx context.Context, run *jobs.Run) error {
		if write {
			w, err := run.Output()
			if err != nil {
				return err
			}
			if _, err := w.Write(payload(run.JobID)); err != nil {
				return err
			}
		}
		started <- run.JobID
		<-ctx.Done()
		return ctx.Err()
	}
}

// gated is a handler that writes a part file, reports rows, signals when it starts and
// returns ret once release is closed, whatever its context says. c, if set, records
// each call.
func gated(rows int64, started chan<- string, release <-chan struct{}, ret error, c *calls) jobs.HandlerFunc {
	return func(ctx context.Context, run *jobs.Run) error {
		if c != nil {
			c.add(run)
		}
		w, err := run.Output()
		if err != nil {
			return err
		}
		if _, err := w.Write(payload(run.JobID)); err != nil {
			return err
		}
		run.Progress(rows, rows)
		started <- run.JobID
		<-release
		return ret
	}
}

// logRecorder is a slog.Handler that keeps every record, for tests about what the engine
// logs and at which level.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	seen    chan struct{} // capacity 1: poked on every record
}

func newLogRecorder() *logRecorder { return &logRecorder{seen: make(chan struct{}, 1)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	l.mu.Unlock()
	select {
	case l.seen <- struct{}{}:
	default:
	}
	return nil
}

// find returns the records whose message contains msg.
func (l *logRecorder) find(msg string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.records {
		if strings.Contains(r.Message, msg) {
			out = append(out, r)
		}
	}
	return out
}

// atLeast returns the records at level or above.
func (l *logRecorder) atLeast(level slog.Level) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.records {
		if r.Level >= level {
			out = append(out, r)
		}
	}
	return out
}

// wait waits until a record whose message contains msg has been logged.
func (l *logRecorder) wait(t testing.TB, msg string) slog.Record {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		if rs := l.find(msg); len(rs) > 0 {
			return rs[0]
		}
		select {
		case <-l.seen:
		case <-deadline:
			t.Fatalf("timed out waiting for a log record %q", msg)
		}
	}
}
