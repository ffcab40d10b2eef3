package pg_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/pg"
)

// The JSON documents the store refuses are exactly those whose strings the server cannot
// read as text: each is compared with the server's own reading (json to jsonb reads every
// string).
func TestUnreadableJSONAgreesWithTheServer(t *testing.T) {
	conn := rawConn(t, freshSchema(t))
	for _, doc := range []string{
		`{}`, `{"a":"b"}`, `{"a":"\u0000"}`, `{"a":"x\u0000y"}`, `{"\u0000":1}`,
		`{"a":"\\u0000"}`, `{"a":"\\\u0000"}`, `{"a":"\\\\u0000"}`, `["\"\u0000"]`,
		`{"a":"\u0001\u001f\u00e9\uffff"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\uD83D\uDE00"}`,
		`{"a":"\ud800"}`, `{"a":"\udc00"}`, `{"a":"\ud800x"}`, `{"a":"\ud800\u0041"}`,
		`{"a":"\ud800\ud800\udc00"}`, `{"a":"\udc00\ud800"}`, `{"a":"\ud800\udc00\udc00"}`,
		`{"a":"\\ud800"}`, `{"a":"\\\ud800"}`, `{"report":"r","params":{"p":"\u0000"}}`,
		"{\"a\":\"\x00\"}",
	} {
		var srvErr error
		if strings.IndexByte(doc, 0) >= 0 {
			srvErr = errors.New("a raw NUL is refused as a parameter")
		} else {
			var out string
			srvErr = conn.QueryRow(ctx, `SELECT $1::json::jsonb::text`, doc).Scan(&out)
		}
		if got := pg.UnreadableJSON([]byte(doc)); got != (srvErr != nil) {
			t.Errorf("UnreadableJSON(%s) = %v; the server's reading: %v", doc, got, srvErr)
		}
	}
}

// poisonedArgs are export args as versions before issue 36 stored them: a text parameter
// holding a NUL (issue 36's request), and a schedule's delivery path with half a
// surrogate pair (a schedule's deliver is copied into its firings' args).
const (
	poisonedArgs      = `{"report":"notes","params":{"note":"a\u0000b"}}`
	surrogateArgs     = `{"report":"notes","params":{"note":"ok"},"deliver":[{"type":"folder","path":"/srv/\ud800"}]}`
	repairedNUL       = `{"report":"notes","params":{"note":"a\ufffdb"}}`
	repairedSurrogate = `{"report":"notes","params":{"note":"ok"},"deliver":[{"type":"folder","path":"/srv/\ufffd"}]}`
	escapedBackslash  = `{"report":"notes","params":{"note":"\\u0000 is how JSON writes a NUL"}}`
)

// Enqueue refuses, with store.ErrUnstorable, a job whose args hold a string the server
// cannot read as text, or whose text holds a NUL, before it joins a group: the good jobs
// that share its group commit, and no row is stored that could never end.
func TestEnqueueRefusesUnstorableValues(t *testing.T) {
	st := openStore(t, freshSchema(t), pg.Options{})
	bad := []store.NewJob{
		{Kind: "export", Args: json.RawMessage(poisonedArgs)},
		{Kind: "export", Args: json.RawMessage(surrogateArgs)},
		{Kind: "export", Args: json.RawMessage(`{}`), NotifyURL: "https://example.com/\x00"},
		{Kind: "export", Args: json.RawMessage(`{}`), CreatedBy: "ci\x00"},
		{Kind: "export", Args: json.RawMessage(`{}`), IdempotencyKey: "k\x00", RequestHash: "h"},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(bad))
	good := make([]error, 20)
	for i, nj := range bad {
		wg.Go(func() {
			nj.ID = store.NewID()
			_, _, errs[i] = st.Enqueue(ctx, nj)
		})
	}
	for i := range good {
		wg.Go(func() {
			_, _, good[i] = st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: json.RawMessage(escapedBackslash)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, store.ErrUnstorable) {
			t.Errorf("job %d (args %s, notify %q, created by %q, key %q): err = %v, want store.ErrUnstorable",
				i, bad[i].Args, bad[i].NotifyURL, bad[i].CreatedBy, bad[i].IdempotencyKey, err)
		}
	}
	for i, err := range good {
		if err != nil {
			t.Errorf("good job %d: %v", i, err)
		}
	}
	counts, err := st.Counts(ctx)
	if err != nil || counts[store.StatusPending] != len(good) {
		t.Fatalf("counts = %v, %v; want the %d good jobs only", counts, err, len(good))
	}
}

// An attempt's error message, its warnings or a recovery's reason may quote a value with
// a NUL (a source's error about a row): the end is recorded, with U+FFFD in its place,
// instead of being refused by the server every time it is tried; and the follow-ups that
// copy the job into their args (a webhook's payload) are readable.
func TestEndsRecordTextWithNUL(t *testing.T) {
	hook := func(j store.Job) ([]store.FollowUp, error) {
		args, err := json.Marshal(map[string]any{"error": j.ErrorMessage, "warnings": j.Warnings})
		return []store.FollowUp{{ID: store.NewID(), Kind: "hook", Args: args}}, err
	}
	st := openStore(t, freshSchema(t), pg.Options{FollowUps: hook})
	failed, succeeded, published, recovered := enqueue(t, st), enqueue(t, st), enqueue(t, st), enqueue(t, st)
	if got, err := st.ClaimBatch(ctx, "w", store.DefaultQueue, 4); err != nil || len(got) != 4 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	warned := store.FileResult{Name: "f", Warnings: []string{"column \"a\x00b\": not a number"}}
	res := st.FinishBatch(ctx, []store.Finish{
		{ID: failed.ID, Attempt: 1, Outcome: store.Failed,
			Error: store.AttemptError{Code: "source\x00", Message: "bad value \"a\x00b\"", Permanent: true}},
		{ID: succeeded.ID, Attempt: 1, Outcome: store.Succeeded, Result: warned},
		{ID: published.ID, Attempt: 1, Outcome: store.Succeeded, Result: warned, Publish: func() error { return nil }},
	})
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("end %d with a NUL in its text: %v", i, r.Err)
		}
	}
	if j := res[0].Job; j.Status != store.StatusFailed || j.ErrorMessage != "bad value \"a\uFFFDb\"" || j.ErrorCode != "source\uFFFD" {
		t.Errorf("failed job = %s %q %q", j.Status, j.ErrorCode, j.ErrorMessage)
	}
	for _, r := range res[1:] {
		if j := r.Job; j.Status != store.StatusSucceeded || len(j.Warnings) != 1 || j.Warnings[0] != "column \"a\uFFFDb\": not a number" {
			t.Errorf("succeeded job = %s %q", j.Status, j.Warnings)
		}
	}
	j, err := st.Recover(ctx, recovered.ID, 1, "worker w\x00 gone", 0)
	if err != nil || j.ErrorMessage != "worker w\uFFFD gone" {
		t.Fatalf("recover with a NUL in its reason: %+v, %v", j, err)
	}
	if hooks, err := st.List(ctx, store.ListOptions{Kind: "hook"}); err != nil || len(hooks) != 3 {
		t.Errorf("follow-ups: %d, %v; want one per end", len(hooks), err)
	}
}

// insertPoisoned stores a job as a version before issue 36 did, with raw SQL (the store
// now refuses it), and returns its id.
func insertPoisoned(t *testing.T, conn *pgx.Conn, kind, status, args string, attempt, maxAttempts int) string {
	t.Helper()
	id := store.NewID()
	if _, err := conn.Exec(ctx, `INSERT INTO jobs (id, kind, args, status, run_at, attempt, max_attempts, created_at,
		worker, started_at, heartbeat_at)
		VALUES ($1, $2, $3::json, $4, now(), $5, $6, now(),
			CASE WHEN $4 = 'PROCESSING' THEN 'old-node' END,
			CASE WHEN $4 = 'PROCESSING' THEN now() - interval '1 hour' END,
			CASE WHEN $4 = 'PROCESSING' THEN now() - interval '1 hour' END)`,
		id, kind, args, status, attempt, maxAttempts); err != nil {
		t.Fatalf("insert a poisoned job: %v", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt)
		VALUES ($1, now(), 'accepted', 'PENDING', 0)`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A row stored before issue 36 is refused by the server when it would end; the store
// says so with store.ErrUnstorable, which the engine does not retry and the API answers
// 422, instead of an error that looks passing.
func TestPoisonedRowRefusalIsUnstorable(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	conn := rawConn(t, dsn)
	pending := insertPoisoned(t, conn, "export", "PENDING", poisonedArgs, 0, 3)
	if _, err := st.Cancel(ctx, pending); !errors.Is(err, store.ErrUnstorable) {
		t.Errorf("cancel: %v, want store.ErrUnstorable", err)
	}
	running := insertPoisoned(t, conn, "export", "PROCESSING", surrogateArgs, 1, 1)
	res := st.FinishBatch(ctx, []store.Finish{{ID: running, Attempt: 1, Outcome: store.Succeeded}})
	if !errors.Is(res[0].Err, store.ErrUnstorable) {
		t.Errorf("succeed: %v, want store.ErrUnstorable", res[0].Err)
	}
	if _, err := st.Recover(ctx, running, 1, "lost", 0); !errors.Is(err, store.ErrUnstorable) {
		t.Errorf("recover (out of attempts, so FAILED): %v, want store.ErrUnstorable", err)
	}
	if _, err := st.CompleteFromFile(ctx, running, 1, store.FileResult{Name: running}); !errors.Is(err, store.ErrUnstorable) {
		t.Errorf("complete from file: %v, want store.ErrUnstorable", err)
	}
}

// Issue 36 on PostgreSQL: a job whose args the server cannot read as text can never
// end. The worker that ran it gives its end up instead of retrying forever, so its slot
// is free for other jobs; and a node that starts with it among its orphans starts,
// logging the job it could not recover.
func TestEngineGivesUpAnEndTheStoreRefuses(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	conn := rawConn(t, dsn)
	poisoned := insertPoisoned(t, conn, "test", "PENDING", poisonedArgs, 0, 1)

	var logs syncBuffer
	dir := t.TempDir()
	cfg := jobs.Config{
		Workers:       1,
		PollInterval:  20 * time.Millisecond,
		Heartbeat:     time.Hour,
		StaleAfter:    2 * time.Hour, // no reaper within the test: the worker alone must let go
		ShutdownGrace: time.Second,
		TmpDir:        dir + "/tmp",
		ExportsDir:    dir + "/exports",
		WorkerID:      "node-a",
		Shared:        true,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ran := make(chan string, 10)
	handler := jobs.HandlerFunc(func(_ context.Context, r *jobs.Run) error {
		ran <- r.JobID
		return nil
	})
	e := jobs.New(st, cfg)
	e.Register("test", handler)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	if id := recv(t, "the poisoned job to run", ran); id != poisoned {
		t.Fatalf("ran %s, want %s", id, poisoned)
	}
	// Its success is refused, then its failure: the worker lets go of both.
	waitUntil(t, "the worker to give the end up", func() bool { return e.Running() == 0 })
	if j, err := st.Get(ctx, poisoned); err != nil || j.Status != store.StatusProcessing {
		t.Fatalf("poisoned job = %s, %v; want PROCESSING, left to a reaper", j.Status, err)
	}
	// The slot serves the next job.
	next, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.Stored(store.DefaultQueue)
	if id := recv(t, "the next job to run", ran); id != next.ID {
		t.Fatalf("ran %s, want %s", id, next.ID)
	}
	waitStatus(t, st, next.ID, store.StatusSucceeded)
	e.Stop()

	// A node that owns the store alone (every PROCESSING job an orphan) starts, and names
	// the job it could not recover.
	cfg.Shared = false
	logs.Reset()
	e2 := jobs.New(st, cfg)
	e2.Register("test", handler)
	if err := e2.Start(ctx); err != nil {
		t.Fatalf("start with a job it cannot recover: %v", err)
	}
	t.Cleanup(e2.Stop)
	if out := logs.String(); !strings.Contains(out, poisoned) || !strings.Contains(out, "cannot") {
		t.Errorf("start did not name the job it left: %s", out)
	}
}

// Migration 0011 repairs the rows earlier versions stored: the unfinished exports among
// them end FAILED with the reason (a cancel requested makes one CANCELED), a delivery
// runs on with U+FFFD in place, schedules keep firing; the jobs can then be read,
// listed by report and acted on. An escaped backslash before "u0000" is no NUL and is
// left alone.
func TestMigration0011RepairsUnreadableRows(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	conn := rawConn(t, dsn)
	pending := insertPoisoned(t, conn, "export", "PENDING", poisonedArgs, 0, 3)
	running := insertPoisoned(t, conn, "export", "PROCESSING", surrogateArgs, 1, 3)
	canceling := insertPoisoned(t, conn, "export", "PROCESSING", poisonedArgs, 1, 3)
	if _, err := conn.Exec(ctx, `UPDATE jobs SET cancel_requested = true WHERE id = $1`, canceling); err != nil {
		t.Fatal(err)
	}
	delivery := insertPoisoned(t, conn, "webhook", "PENDING", `{"data":{"params":{"note":"a\u0000b"}}}`, 0, 3)
	clean := insertPoisoned(t, conn, "export", "PENDING", escapedBackslash, 0, 3)
	if _, err := conn.Exec(ctx, `INSERT INTO schedules (id, report, params, cron, timezone, deliver, created_at, updated_at)
		VALUES ('s1', 'notes', '{"note":"x\u0000"}', '0 6 * * *', 'UTC', '[{"type":"folder","path":"/srv/\udc00"}]', now(), now())`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version = 11`); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dsn, pg.Options{}) // migrates

	for id, want := range map[string]struct {
		status store.Status
		args   string
		event  string
	}{
		pending:   {store.StatusFailed, repairedNUL, store.EventFailed},
		running:   {store.StatusFailed, repairedSurrogate, store.EventFailed},
		canceling: {store.StatusCanceled, repairedNUL, store.EventCanceled},
		delivery:  {store.StatusPending, `{"data":{"params":{"note":"a\ufffdb"}}}`, store.EventAccepted},
		clean:     {store.StatusPending, escapedBackslash, store.EventAccepted},
	} {
		j, err := st.Get(ctx, id)
		if err != nil || j.Status != want.status || string(j.Args) != want.args {
			t.Errorf("job %s = %s %s, %v; want %s %s", id, j.Status, j.Args, err, want.status, want.args)
			continue
		}
		if want.status == store.StatusFailed && (j.ErrorCode != "unstorable" || !strings.Contains(j.ErrorMessage, "NUL")) {
			t.Errorf("job %s failed with %q %q", id, j.ErrorCode, j.ErrorMessage)
		}
		evs, err := st.Events(ctx, id)
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Type != want.event {
			t.Errorf("job %s events = %+v, %v; want the last %s", id, evs, err, want.event)
		}
	}
	var data json.RawMessage
	if err := conn.QueryRow(ctx, `SELECT data FROM job_events WHERE job_id = $1 AND type = 'failed'`, pending).Scan(&data); err != nil ||
		!bytes.Contains(data, []byte(`"permanent" : true`)) && !bytes.Contains(data, []byte(`"permanent": true`)) && !bytes.Contains(data, []byte(`"permanent":true`)) {
		t.Errorf("failed event data = %s, %v", data, err)
	}
	sc, err := st.GetSchedule(ctx, "s1")
	if err != nil || string(sc.Params) != `{"note":"x\ufffd"}` || string(sc.Deliver) != `[{"type":"folder","path":"/srv/\ufffd"}]` {
		t.Errorf("schedule = %s %s, %v", sc.Params, sc.Deliver, err)
	}
	// What answered 500 before: a listing by report, a cancel, an end.
	list, err := st.List(ctx, store.ListOptions{Report: "notes"})
	if err != nil || len(list) != 5-1 {
		t.Errorf("list by report: %d jobs, %v; want 4", len(list), err)
	}
	if _, err := st.Cancel(ctx, clean); err != nil {
		t.Errorf("cancel: %v", err)
	}
	if _, err := st.Cancel(ctx, pending); !errors.Is(err, store.ErrFinished) {
		t.Errorf("cancel a failed job: %v, want store.ErrFinished", err)
	}
	claimed, err := st.ClaimBatch(ctx, "w", store.DefaultQueue, 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != delivery {
		t.Fatalf("claim: %+v, %v; want the delivery", claimed, err)
	}
	if res := st.FinishBatch(ctx, []store.Finish{{ID: delivery, Attempt: 1, Outcome: store.Succeeded}}); res[0].Err != nil {
		t.Errorf("the repaired delivery's end: %v", res[0].Err)
	}
}

// syncBuffer is a bytes.Buffer that a logger and a test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// waitUntil polls cond until it holds or waitTimeout passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawConn is a connection of its own to dsn, closed when the test ends, for writing
// rows as an earlier version would have.
func rawConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}
