package api_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// burst sends n copies of one request at once and returns every answer. It runs off the
// test goroutine, so it reports transport errors instead of failing the test.
func (ts *testServer) burst(n int, method, path, body string, header http.Header) ([]apptest.Response, []error) {
	answers := make([]apptest.Response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header = header.Clone()
			res, err := ts.HC.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			answers[i], errs[i] = apptest.Response{Response: res, Body: b}, err
		})
	}
	close(start)
	wg.Wait()
	return answers, errs
}

// sameAnswers requires every answer to have want's status, Location, Retry-After and
// Content-Type, the job id id, and, when bodies is set, want's exact body.
func sameAnswers(t *testing.T, phase string, answers []apptest.Response, errs []error, want apptest.Response, id string, bodies bool) {
	t.Helper()
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("%s: request %d: %v", phase, i, errs[i])
		}
		for _, h := range []string{"Location", "Retry-After", "Content-Type"} {
			if got := a.Header.Get(h); got != want.Header.Get(h) {
				t.Errorf("%s: request %d: %s %q, want %q", phase, i, h, got, want.Header.Get(h))
			}
		}
		if a.StatusCode != want.StatusCode {
			t.Fatalf("%s: request %d: status %d, want %d; body %s", phase, i, a.StatusCode, want.StatusCode, a.Body)
		}
		if got := apptest.DecodeJob(t, a).ID; got != id {
			t.Errorf("%s: request %d: job %s, want %s", phase, i, got, id)
		}
		if bodies && !bytes.Equal(a.Body, want.Body) {
			t.Errorf("%s: request %d: body\n%s\nwant\n%s", phase, i, a.Body, want.Body)
		}
	}
}

// TestIdempotencyProof is the proof of rule 11. 100 simultaneous requests with
// one key make one job and 100 identical answers. The setup is deterministic: every
// worker is busy, so the job stays PENDING and unchanged through the burst, and "identical"
// can mean byte for byte: status, Location, Retry-After and body. A replay returns the job
// as it is now, not a recording of the first answer, so once the job runs the replays
// still agree on status code, job and Location, and show its current state; once it
// ended they are 200 without Location. A different body with the key is 422, a malformed
// key 400, and neither makes a job.
func TestIdempotencyProof(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	blockers := ts.busyWorkers()
	const n = 100
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"proof-key"}}

	answers, errs := ts.burst(n, http.MethodPost, "/api/v1/exports", never, h)
	var created []int
	for i, a := range answers {
		if errs[i] == nil && a.Header.Get("Idempotent-Replayed") != "true" {
			created = append(created, i)
		}
	}
	if len(created) != 1 {
		t.Fatalf("%d answers created a job (no Idempotent-Replayed), want exactly 1", len(created))
	}
	first := answers[created[0]]
	j := apptest.DecodeJob(t, first)
	if first.StatusCode != http.StatusAccepted || store.Status(j.Status) != store.StatusPending ||
		first.Header.Get("Location") != "/api/v1/exports/"+j.ID {
		t.Fatalf("creating answer: status %d, job %s, Location %q", first.StatusCode, j.Status, first.Header.Get("Location"))
	}
	sameAnswers(t, "pending", answers, errs, first, j.ID, true)
	if c := ts.jobCount(); c != len(blockers)+1 {
		t.Fatalf("%d jobs, want the %d blockers and one", c, len(blockers))
	}

	// Same key, different request: refused, naming the job, whatever else runs.
	reused := ts.Post(`{"report":"demo","params":{"rows":2,"seconds":86400}}`, "proof-key")
	if p := apptest.CheckProblem(t, reused, http.StatusUnprocessableEntity, "idempotency_key_reused"); p["job"] != j.ID {
		t.Errorf("reused key names job %v, want %s", p["job"], j.ID)
	}
	for _, bad := range []string{strings.Repeat("k", 256), "clé", `"a"b"`, `""`} {
		res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(never), withKey(bad))
		apptest.CheckProblem(t, res, http.StatusBadRequest, "bad_idempotency_key")
	}
	res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(never), withKey("proof-key", "proof-key"))
	apptest.CheckProblem(t, res, http.StatusBadRequest, "bad_idempotency_key")
	if c := ts.jobCount(); c != len(blockers)+1 {
		t.Fatalf("%d jobs after refused requests, want %d", c, len(blockers)+1)
	}

	// Free a worker: the job runs, and replays show it running under the same answer.
	ts.cancel(blockers[0])
	ts.WaitStatus(j.ID, store.StatusProcessing)
	answers, errs = ts.burst(n, http.MethodPost, "/api/v1/exports", never, h)
	sameAnswers(t, "processing", answers, errs, first, j.ID, false)
	for i, a := range answers {
		if a.Header.Get("Idempotent-Replayed") != "true" || store.Status(apptest.DecodeJob(t, a).Status) != store.StatusProcessing {
			t.Errorf("processing: request %d: replayed %q, status %s", i, a.Header.Get("Idempotent-Replayed"), apptest.DecodeJob(t, a).Status)
		}
	}

	// Ended: replays are 200 with the final job, identical again since it no longer changes.
	ts.cancel(j.ID)
	final := ts.Post(never, "proof-key")
	if final.StatusCode != http.StatusOK || final.Header.Get("Location") != "" || store.Status(apptest.DecodeJob(t, final).Status) != store.StatusCanceled {
		t.Fatalf("replay of an ended job: status %d, Location %q; body %s", final.StatusCode, final.Header.Get("Location"), final.Body)
	}
	answers, errs = ts.burst(n, http.MethodPost, "/api/v1/exports", never, h)
	sameAnswers(t, "canceled", answers, errs, final, j.ID, true)
	if c := ts.jobCount(); c != len(blockers)+1 {
		t.Errorf("%d jobs at the end, want %d", c, len(blockers)+1)
	}
}
