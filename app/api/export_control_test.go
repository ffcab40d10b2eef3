package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// never is a demo export that runs until it is canceled: one row, due after a day.
const never = `{"report":"demo","params":{"rows":1,"seconds":86400}}`

// busyWorkers fills every worker slot with an export that runs until it is canceled (at
// the latest when the test ends), so that jobs created afterwards stay PENDING for as
// long as the test needs. It returns the blocking jobs' ids.
func (ts *testServer) busyWorkers() []string {
	ts.t.Helper()
	var ids []string
	for range ts.engine.Config().Workers {
		ids = append(ids, ts.Create(never).ID)
	}
	ts.t.Cleanup(func() {
		for _, id := range ids {
			if j, err := ts.store.Get(context.Background(), id); err == nil && !j.Status.Final() {
				ts.cancel(id)
			}
		}
	})
	for _, id := range ids {
		ts.WaitStatus(id, store.StatusProcessing)
	}
	return ids
}

// action sends POST /api/v1/exports/{id}/{verb} without a body.
func (ts *testServer) action(id, verb string) apptest.Response {
	ts.t.Helper()
	return ts.Request(http.MethodPost, "/api/v1/exports/"+id+"/"+verb, nil, nil)
}

// eventTypes lists a job's event types in order, read from the store.
func (ts *testServer) eventTypes(id string) []string { return apptest.EventTypes(ts.t, ts.store, id) }

// TestCancelPending: a queued job is CANCELED at once (200); cancelling it again is a
// conflict; an unknown job is 404.
func TestCancelPending(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ts.busyWorkers()
	j := ts.Create(`{"report":"demo","params":{"rows":10}}`)
	if store.Status(j.Status) != store.StatusPending {
		t.Fatalf("job created with every worker busy is %s, want PENDING", j.Status)
	}

	res := ts.action(j.ID, "cancel")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("cancel: status %d, want 200; body %s", res.StatusCode, res.Body)
	}
	c := apptest.DecodeJob(t, res)
	if c.ID != j.ID || store.Status(c.Status) != store.StatusCanceled || c.FinishedAt == nil || c.CancelRequested {
		t.Errorf("canceled job: %+v", c)
	}
	if res.Header.Get("Location") != "" || res.Header.Get("Retry-After") != "" {
		t.Errorf("a finished cancel has Location %q, Retry-After %q", res.Header.Get("Location"), res.Header.Get("Retry-After"))
	}
	if got, _ := ts.Job(j.ID); store.Status(got.Status) != store.StatusCanceled {
		t.Errorf("GET after cancel: %s", got.Status)
	}

	p := apptest.CheckProblem(t, ts.action(j.ID, "cancel"), http.StatusConflict, "already_finished")
	if p["job"] != j.ID {
		t.Errorf("problem job %v, want %s", p["job"], j.ID)
	}
	apptest.CheckProblem(t, ts.action("nosuchjob", "cancel"), http.StatusNotFound, "not_found")
	if got := ts.eventTypes(j.ID); !slices.Equal(got, []string{store.EventAccepted, store.EventCanceled}) {
		t.Errorf("events %v", got)
	}
}

// TestCancelRunning: a running job is asked to stop (202, cancel_requested) and ends
// CANCELED without a file.
func TestCancelRunning(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(never)
	ts.WaitStatus(j.ID, store.StatusProcessing)

	res := ts.action(j.ID, "cancel")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: status %d, want 202; body %s", res.StatusCode, res.Body)
	}
	c := apptest.DecodeJob(t, res)
	if store.Status(c.Status) != store.StatusProcessing || !c.CancelRequested {
		t.Errorf("cancel answer: status %s, cancel_requested %v; want PROCESSING, true", c.Status, c.CancelRequested)
	}
	if loc := res.Header.Get("Location"); loc != "/api/v1/exports/"+j.ID {
		t.Errorf("Location %q", loc)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Error("202 without Retry-After")
	}

	done, _ := ts.WaitStatus(j.ID, store.StatusCanceled)
	if done.CancelRequested || done.FinishedAt == nil || done.Attempt != 1 {
		t.Errorf("canceled job: %+v", done)
	}
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusConflict, "no_file")
	apptest.CheckProblem(t, ts.action(j.ID, "cancel"), http.StatusConflict, "already_finished")
	want := []string{store.EventAccepted, store.EventStarted, store.EventCancelRequested, store.EventCanceled}
	if got := ts.eventTypes(j.ID); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// TestRetryFailed: a failed job runs again with a fresh budget on top of the attempts it
// spent; attempt numbers keep climbing and the history is kept.
func TestRetryFailed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	// Attempts 1 and 2 fail; with a budget of one, it takes two retries to succeed.
	j := ts.Create(`{"report":"demo","params":{"rows":5,"fail_first":2}}`)
	if f, _ := ts.WaitStatus(j.ID, store.StatusFailed, store.StatusSucceeded); store.Status(f.Status) != store.StatusFailed || f.Attempt != 1 {
		t.Fatalf("first run ended %s at attempt %d, want FAILED at 1", f.Status, f.Attempt)
	}

	for attempt := 2; attempt <= 3; attempt++ {
		res := ts.action(j.ID, "retry")
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("retry: status %d, want 202; body %s", res.StatusCode, res.Body)
		}
		if loc := res.Header.Get("Location"); loc != "/api/v1/exports/"+j.ID {
			t.Errorf("Location %q", loc)
		}
		if res.Header.Get("Retry-After") == "" {
			t.Error("202 without Retry-After")
		}
		r := apptest.DecodeJob(t, res)
		if store.Status(r.Status) != store.StatusPending || r.Attempt != attempt-1 || r.MaxAttempts != attempt ||
			r.Error != nil || r.FinishedAt != nil || r.StartedAt != nil {
			t.Errorf("retried job: status %s, attempt %d/%d, error %+v, started %v, finished %v; want PENDING, %d/%d, cleared",
				r.Status, r.Attempt, r.MaxAttempts, r.Error, r.StartedAt, r.FinishedAt, attempt-1, attempt)
		}
		done, _ := ts.WaitStatus(j.ID, store.StatusFailed, store.StatusSucceeded)
		if done.Attempt != attempt {
			t.Fatalf("run after retry ended at attempt %d, want %d", done.Attempt, attempt)
		}
	}
	done, _ := ts.Job(j.ID)
	if store.Status(done.Status) != store.StatusSucceeded || done.DownloadURL == "" || done.Error != nil {
		t.Fatalf("job after two retries: %s, download %q, error %+v", done.Status, done.DownloadURL, done.Error)
	}
	want := []string{
		store.EventAccepted, store.EventStarted, store.EventFailed,
		store.EventRetried, store.EventStarted, store.EventFailed,
		store.EventRetried, store.EventStarted, store.EventSucceeded,
	}
	if got := ts.eventTypes(j.ID); !slices.Equal(got, want) {
		t.Errorf("events %v\nwant %v", got, want)
	}

	p := apptest.CheckProblem(t, ts.action(j.ID, "retry"), http.StatusConflict, "not_retryable")
	if p["job"] != j.ID {
		t.Errorf("problem job %v, want %s", p["job"], j.ID)
	}
	apptest.CheckProblem(t, ts.action("nosuchjob", "retry"), http.StatusNotFound, "not_found")
}

// TestRetryCanceled: a canceled job runs again under a new attempt number; a running
// one cannot be retried.
func TestRetryCanceled(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(never)
	ts.WaitStatus(j.ID, store.StatusProcessing)
	apptest.CheckProblem(t, ts.action(j.ID, "retry"), http.StatusConflict, "not_retryable")
	ts.cancel(j.ID)

	res := ts.action(j.ID, "retry")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: status %d, want 202; body %s", res.StatusCode, res.Body)
	}
	if r := apptest.DecodeJob(t, res); r.Attempt != 1 || r.MaxAttempts != 1+store.DefaultMaxAttempts {
		t.Errorf("retried: attempt %d of %d, want 1 of %d", r.Attempt, r.MaxAttempts, 1+store.DefaultMaxAttempts)
	}
	again, _ := ts.WaitStatus(j.ID, store.StatusProcessing)
	if again.Attempt != 2 || again.CancelRequested {
		t.Errorf("rerun: attempt %d, cancel_requested %v; want 2, false", again.Attempt, again.CancelRequested)
	}
	ts.cancel(j.ID)
}

// TestDeleteExport: a finished job goes with its events and file; its idempotency key
// can then be used again. An unfinished job is refused.
func TestDeleteExport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	body := `{"report":"demo","params":{"rows":3}}`
	j := apptest.DecodeJob(t, ts.Post(body, "delete-me"))
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	path := jobs.FilePath(ts.dir.Exports(), j.ID+export.FileExt)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("file of a succeeded job: %v", err)
	}

	res := ts.Request(http.MethodDelete, "/api/v1/exports/"+j.ID, nil, nil)
	if res.StatusCode != http.StatusNoContent || len(res.Body) != 0 {
		t.Fatalf("delete: status %d, want 204; body %q", res.StatusCode, res.Body)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file after delete: %v, want gone", err)
	}
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID), http.StatusNotFound, "not_found")
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusNotFound, "not_found")
	apptest.CheckProblem(t, ts.Request(http.MethodDelete, "/api/v1/exports/"+j.ID, nil, nil), http.StatusNotFound, "not_found")
	if got := ts.eventTypes(j.ID); len(got) != 0 {
		t.Errorf("events left after delete: %v", got)
	}

	// The key went with the job: the same request now makes a new one.
	res = ts.Post(body, "delete-me")
	if res.StatusCode != http.StatusAccepted || res.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("reuse of a deleted job's key: status %d, replayed %q", res.StatusCode, res.Header.Get("Idempotent-Replayed"))
	}
	if n := apptest.DecodeJob(t, res); n.ID == j.ID {
		t.Errorf("new job has the deleted job's id")
	}

	// A FAILED job has no file; that is fine.
	f := ts.Create(`{"report":"demo","params":{"rows":3,"fail_first":1}}`)
	ts.WaitStatus(f.ID, store.StatusFailed)
	if res := ts.Request(http.MethodDelete, "/api/v1/exports/"+f.ID, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Errorf("delete of a failed job: status %d; body %s", res.StatusCode, res.Body)
	}

	r := ts.Create(never)
	p := apptest.CheckProblem(t, ts.Request(http.MethodDelete, "/api/v1/exports/"+r.ID, nil, nil), http.StatusConflict, "not_finished")
	if p["job"] != r.ID {
		t.Errorf("problem job %v, want %s", p["job"], r.ID)
	}
	if got, _ := ts.Job(r.ID); store.Status(got.Status).Final() {
		t.Errorf("refused delete left the job %s", got.Status)
	}
	ts.cancel(r.ID)
	if res := ts.Request(http.MethodDelete, "/api/v1/exports/"+r.ID, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Errorf("delete after cancel: status %d; body %s", res.StatusCode, res.Body)
	}
}

// TestExpiredExport: once retention removed the file and expired the job, the file is
// 410 expired and the job no longer offers a download.
func TestExpiredExport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	// What the retention janitor does: remove the file, then expire the job.
	if err := os.Remove(jobs.FilePath(ts.dir.Exports(), j.ID+export.FileExt)); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.Expire(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}

	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusGone, "expired")
	e, res := ts.Job(j.ID)
	if store.Status(e.Status) != store.StatusExpired || e.DownloadURL != "" || e.File != nil {
		t.Errorf("expired job: status %s, download_url %q, file %+v", e.Status, e.DownloadURL, e.File)
	}
	if res.Header.Get("Retry-After") != "" {
		t.Error("an expired job has Retry-After")
	}
	var raw map[string]any
	if err := json.Unmarshal(res.Body, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["download_url"]; ok {
		t.Errorf("expired job JSON has download_url: %s", res.Body)
	}
	if got := ts.eventTypes(j.ID); got[len(got)-1] != store.EventExpired {
		t.Errorf("events %v, want the last to be %s", got, store.EventExpired)
	}

	apptest.CheckProblem(t, ts.action(j.ID, "cancel"), http.StatusConflict, "already_finished")
	apptest.CheckProblem(t, ts.action(j.ID, "retry"), http.StatusConflict, "not_retryable")
	if res := ts.Request(http.MethodDelete, "/api/v1/exports/"+j.ID, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Errorf("delete of an expired job: status %d; body %s", res.StatusCode, res.Body)
	}
}

// TestListExportsByReport: ?report= keeps one report's jobs, and combines with ?status=.
func TestListExportsByReport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Now: apptest.TickClock()})
	ts.busyWorkers()  // the demo jobs below stay PENDING
	var demo []string // newest first
	for range 3 {
		demo = slices.Insert(demo, 0, ts.Create(`{"report":"demo","params":{"rows":1}}`).ID)
	}
	// Another report's export, put straight into the store: only its args matter here,
	// and it stays PENDING behind the busy workers.
	other, _, err := ts.store.Enqueue(context.Background(), store.NewJob{ID: jobs.NewID(), Kind: export.Name,
		Args: json.RawMessage(`{"report":"orders","params":{}}`)})
	if err != nil {
		t.Fatal(err)
	}

	busy := ids(ts.List("?status=PROCESSING").Exports)
	if got := ids(ts.List("?report=demo").Exports); !slices.Equal(got, append(slices.Clone(demo), busy...)) {
		t.Errorf("?report=demo lists %v, want %v then the busy ones %v", got, demo, busy)
	}
	if got := ids(ts.List("?report=demo&status=pending").Exports); !slices.Equal(got, demo) {
		t.Errorf("?report=demo&status=pending lists %v, want %v", got, demo)
	}
	if got := ids(ts.List("?report=orders").Exports); !slices.Equal(got, []string{other.ID}) {
		t.Errorf("?report=orders lists %v, want [%s]", got, other.ID)
	}
	if got := ts.List("?report=nosuch").Exports; len(got) != 0 {
		t.Errorf("?report=nosuch lists %v", ids(got))
	}
	first := ts.List("?report=demo&status=pending&limit=2")
	rest := ts.List("?report=demo&status=pending&limit=2&cursor=" + first.NextCursor)
	if got := append(ids(first.Exports), ids(rest.Exports)...); !slices.Equal(got, demo) {
		t.Errorf("paged ?report=demo lists %v, want %v", got, demo)
	}
}

// TestMethodNotAllowed: a known API path with another method is 405 with Allow, as
// problem+json; an unknown path stays 404.
func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	tests := []struct{ method, path, allow string }{
		{http.MethodDelete, "/api/v1/reports", "GET, HEAD"},
		{http.MethodPut, "/api/v1/exports", "GET, HEAD, POST"},
		{http.MethodDelete, "/api/v1/exports", "GET, HEAD, POST"},
		{http.MethodPatch, "/api/v1/exports/abc", "GET, HEAD, DELETE"},
		{http.MethodPost, "/api/v1/exports/abc", "GET, HEAD, DELETE"},
		{http.MethodGet, "/api/v1/exports/abc/cancel", "POST"},
		{http.MethodDelete, "/api/v1/exports/abc/retry", "POST"},
		{http.MethodPut, "/api/v1/exports/abc/file", "GET, HEAD, POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			res := ts.Request(tt.method, tt.path, nil, nil)
			apptest.CheckProblem(t, res, http.StatusMethodNotAllowed, "method_not_allowed")
			if got := res.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
	for _, path := range []string{"/api/v1/nope", "/api/v1/exports/abc/nope", "/api/v2/exports"} {
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			res := ts.Request(m, path, nil, nil)
			apptest.CheckProblem(t, res, http.StatusNotFound, "no_route")
			if a := res.Header.Get("Allow"); a != "" {
				t.Errorf("%s %s: 404 with Allow %q", m, path, a)
			}
		}
	}
}

// TestControlOnlyExports: cancel, retry and delete answer 404 for a job that is not an
// export (a webhook delivery shares the table) and leave it alone.
func TestControlOnlyExports(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ctx := context.Background()
	j, _, err := ts.store.Enqueue(ctx, store.NewJob{ID: jobs.NewID(), Kind: "elsewhere", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	// No handler takes its kind: the engine fails it at once.
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		cur, err := ts.store.Get(ctx, j.ID)
		return err == nil && cur.Status == store.StatusFailed, fmt.Sprintf("job is %s (%v)", cur.Status, err)
	})
	apptest.CheckProblem(t, ts.action(j.ID, "cancel"), http.StatusNotFound, "not_found")
	apptest.CheckProblem(t, ts.action(j.ID, "retry"), http.StatusNotFound, "not_found")
	apptest.CheckProblem(t, ts.Request(http.MethodDelete, "/api/v1/exports/"+j.ID, nil, nil), http.StatusNotFound, "not_found")
	if cur, err := ts.store.Get(ctx, j.ID); err != nil || cur.Status != store.StatusFailed {
		t.Errorf("the other kind's job after refused actions: %s (%v)", cur.Status, err)
	}
}
