package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/xuri/excelize/v2"

	"sheetq/app/exports"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/store"
)

// TestCreateExportBadInputs: every bad request gets its 4xx as problem+json and creates
// no job.
func TestCreateExportBadInputs(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	big := `{"report":"demo","params":{"rows":1},"pad":"` + strings.Repeat("x", exports.MaxBody) + `"}`
	tests := []struct {
		name   string
		body   string
		header http.Header // replaces the default Content-Type: application/json
		status int
		code   string
		param  string
	}{
		{name: "empty body", body: ``, status: 400, code: "malformed_json"},
		{name: "malformed JSON", body: `{"report":"demo",`, status: 400, code: "malformed_json"},
		{name: "not an object", body: `"demo"`, status: 400, code: "malformed_json"},
		{name: "trailing garbage", body: `{"report":"demo"} xyz`, status: 400, code: "malformed_json"},
		{name: "second object", body: `{"report":"demo"}{"report":"demo"}`, status: 400, code: "malformed_json"},
		{name: "trailing close brace", body: `{"report":"demo"}}`, status: 400, code: "malformed_json"},
		{name: "trailing close bracket", body: `{"report":"demo"}]`, status: 400, code: "malformed_json"},
		{name: "unknown field", body: `{"kind":"x","report":"demo"}`, status: 400, code: "malformed_json"},
		{name: "missing report", body: `{"params":{"rows":1}}`, status: 422, code: "missing_report"},
		{name: "unknown report", body: `{"report":"nope"}`, status: 422, code: "unknown_report"},
		{name: "bad param type", body: `{"report":"demo","params":{"rows":"abc"}}`, status: 422, code: "invalid_param", param: "rows"},
		{name: "fractional int", body: `{"report":"demo","params":{"rows":1.5}}`, status: 422, code: "invalid_param", param: "rows"},
		{name: "unknown param", body: `{"report":"demo","params":{"rows":1,"colour":"red"}}`, status: 422, code: "invalid_param", param: "colour"},
		{name: "below range", body: `{"report":"demo","params":{"rows":-1}}`, status: 422, code: "invalid_param", param: "rows"},
		{name: "above range", body: `{"report":"demo","params":{"seconds":86401}}`, status: 422, code: "invalid_param", param: "seconds"},
		{name: "oversized body", body: big, status: 413, code: "body_too_large"},
		{name: "text/plain", body: `{"report":"demo"}`, header: http.Header{"Content-Type": {"text/plain"}},
			status: 415, code: "unsupported_media_type"},
		{name: "bad Content-Type", body: `{"report":"demo"}`, header: http.Header{"Content-Type": {"application/"}},
			status: 415, code: "unsupported_media_type"},
		{name: "key too long", body: `{"report":"demo"}`, header: withKey(strings.Repeat("k", 256)),
			status: 400, code: "bad_idempotency_key"},
		{name: "key of 300 chars", body: `{"report":"demo"}`, header: withKey(strings.Repeat("k", 300)),
			status: 400, code: "bad_idempotency_key"},
		{name: "two keys", body: `{"report":"demo"}`, header: withKey("a", "b"),
			status: 400, code: "bad_idempotency_key"},
		{name: "empty quoted key", body: `{"report":"demo"}`, header: withKey(`""`),
			status: 400, code: "bad_idempotency_key"},
		{name: "non-ASCII key", body: `{"report":"demo"}`, header: withKey("clé"),
			status: 400, code: "bad_idempotency_key"},
		{name: "quote inside quoted key", body: `{"report":"demo"}`, header: withKey(`"a"b"`),
			status: 400, code: "bad_idempotency_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{"Content-Type": {"application/json"}}
			}
			res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(tt.body), h)
			p := apptest.CheckProblem(t, res, tt.status, tt.code)
			if tt.param != "" && p["param"] != tt.param {
				t.Errorf("problem param %v, want %q", p["param"], tt.param)
			}
			if loc := res.Header.Get("Location"); loc != "" {
				t.Errorf("a refused request has Location %q", loc)
			}
			if n := ts.jobCount(); n != 0 {
				t.Fatalf("%d jobs in the store after a refused request, want 0", n)
			}
		})
	}
	res := ts.Get("/api/v1/exports")
	if res.StatusCode != 200 || !bytes.Contains(res.Body, []byte(`"exports": []`)) {
		t.Errorf("list after refused requests: %d %s", res.StatusCode, res.Body)
	}
}

// withKey is a JSON Content-Type with one Idempotency-Key header line per key.
func withKey(keys ...string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": keys}
}

// TestCreateExportAcceptsJSONMediaTypes: a charset parameter, a +json type and no
// Content-Type at all are all JSON.
func TestCreateExportAcceptsJSONMediaTypes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	for i, ct := range []string{"application/json; charset=utf-8", "application/vnd.sheetq+json", ""} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		res := ts.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(`{"report":"demo","params":{"rows":1}}`), h)
		if res.StatusCode != http.StatusAccepted {
			t.Errorf("Content-Type %q: status %d, want 202; body %s", ct, res.StatusCode, res.Body)
		}
		if n := ts.jobCount(); n != i+1 {
			t.Errorf("Content-Type %q: %d jobs, want %d", ct, n, i+1)
		}
	}
}

// TestExportHappyPath: accept, poll to SUCCEEDED, download and open the file.
func TestExportHappyPath(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	res := ts.Post(`{"report":"demo","params":{"rows":2000}}`, "")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202; body %s", res.StatusCode, res.Body)
	}
	j := apptest.DecodeJob(t, res)
	if loc := res.Header.Get("Location"); loc != "/api/v1/exports/"+j.ID {
		t.Errorf("Location %q, want /api/v1/exports/%s", loc, j.ID)
	}
	if ra := res.Header.Get("Retry-After"); ra == "" {
		t.Error("202 without Retry-After")
	}
	if store.Status(j.Status) != store.StatusPending && store.Status(j.Status) != store.StatusProcessing {
		t.Errorf("accepted job is %s, want PENDING or PROCESSING", j.Status)
	}
	if j.Report != "demo" {
		t.Errorf("report %q, want demo", j.Report)
	}
	// Params come back normalised: every declared one, defaults applied.
	wantParams := map[string]any{"rows": 2000.0, "seconds": 0.0, "fail_first": 0.0}
	if !reflect.DeepEqual(j.Params, wantParams) {
		t.Errorf("params %v, want %v", j.Params, wantParams)
	}
	if j.MaxAttempts != 3 {
		t.Errorf("max_attempts %d, want the default 3", j.MaxAttempts)
	}
	if j.CreatedAt == nil || j.DownloadURL != "" || j.File != nil {
		t.Errorf("accepted job: created_at %v, download_url %q, file %v", j.CreatedAt, j.DownloadURL, j.File)
	}

	done, res := ts.WaitStatus(j.ID, store.StatusSucceeded, store.StatusFailed)
	if store.Status(done.Status) != store.StatusSucceeded {
		t.Fatalf("job ended %s: %+v", done.Status, done.Error)
	}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		t.Errorf("finished job has Retry-After %q", ra)
	}
	if done.Attempt != 1 || done.Error != nil || done.FinishedAt == nil || done.StartedAt == nil {
		t.Errorf("finished job: attempt %d, error %+v, started %v, finished %v",
			done.Attempt, done.Error, done.StartedAt, done.FinishedAt)
	}
	if done.Progress.Rows != 2000 {
		t.Errorf("progress rows %d, want 2000", done.Progress.Rows)
	}
	if done.DownloadURL != "/api/v1/exports/"+j.ID+"/file" || done.File == nil {
		t.Fatalf("download_url %q, file %+v", done.DownloadURL, done.File)
	}

	file := ts.Get(done.DownloadURL)
	if file.StatusCode != http.StatusOK {
		t.Fatalf("download: status %d; body %s", file.StatusCode, file.Body)
	}
	if ct := file.Header.Get("Content-Type"); ct != "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" {
		t.Errorf("download Content-Type %q, want the xlsx type", ct)
	}
	disp, dparams, err := mime.ParseMediaType(file.Header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" {
		t.Fatalf("Content-Disposition %q: %v", file.Header.Get("Content-Disposition"), err)
	}
	name := dparams["filename"]
	wantName := fmt.Sprintf("demo-%s-%s.xlsx", done.FinishedAt.UTC().Format("2006-01-02"), j.ID[:8])
	if !regexp.MustCompile(`^demo-\d{4}-\d{2}-\d{2}-[a-z0-9]{8}\.xlsx$`).MatchString(name) || name != wantName {
		t.Errorf("filename %q, want %q", name, wantName)
	}
	if done.File.Name != name {
		t.Errorf("file.name %q, but the download is named %q", done.File.Name, name)
	}
	sum := sha256.Sum256(file.Body)
	if got := hex.EncodeToString(sum[:]); got != done.File.SHA256 {
		t.Errorf("sha256 of the download %s, job says %s", got, done.File.SHA256)
	}
	if int64(len(file.Body)) != done.File.Size {
		t.Errorf("download is %d bytes, job says %d", len(file.Body), done.File.Size)
	}

	f, err := excelize.OpenReader(bytes.NewReader(file.Body))
	if err != nil {
		t.Fatalf("open xlsx: %v", err)
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) == 0 {
		t.Fatal("xlsx has no sheets")
	}
	rows, err := f.GetRows(sheets[0])
	if err != nil {
		t.Fatalf("read sheet %q: %v", sheets[0], err)
	}
	if len(rows) != 2001 {
		t.Errorf("sheet %q has %d rows, want 2001 (header + 2000)", sheets[0], len(rows))
	}
	if len(rows) > 0 && (len(rows[0]) == 0 || rows[0][0] != "id") {
		t.Errorf("header row %v, want it to start with id", rows[0])
	}
}

// TestIdempotency: one key, one job; another body under the key is refused.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	// A slow job stays unfinished for the whole test, so replays answer 202.
	slow := `{"report":"demo","params":{"rows":100,"seconds":30}}`

	first := ts.Post(slow, "key-1")
	if first.StatusCode != http.StatusAccepted || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: status %d, Idempotent-Replayed %q; body %s",
			first.StatusCode, first.Header.Get("Idempotent-Replayed"), first.Body)
	}
	j := apptest.DecodeJob(t, first)
	defer ts.cancel(j.ID)

	// The same request, written differently (a string int, an explicit default), is the
	// same request once normalised.
	for _, body := range []string{slow, `{"params":{"seconds":"30","rows":"100","fail_first":0},"report":"demo"}`} {
		again := ts.Post(body, "key-1")
		if again.StatusCode != http.StatusAccepted {
			t.Fatalf("replay %s: status %d, want 202; body %s", body, again.StatusCode, again.Body)
		}
		if got := apptest.DecodeJob(t, again).ID; got != j.ID {
			t.Errorf("replay %s: job %s, want %s", body, got, j.ID)
		}
		if again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay %s: no Idempotent-Replayed: true", body)
		}
		if loc := again.Header.Get("Location"); loc != "/api/v1/exports/"+j.ID {
			t.Errorf("replay %s: Location %q", body, loc)
		}
	}

	reused := ts.Post(`{"report":"demo","params":{"rows":101,"seconds":30}}`, "key-1")
	p := apptest.CheckProblem(t, reused, http.StatusUnprocessableEntity, "idempotency_key_reused")
	if p["job"] != j.ID || !strings.Contains(p["detail"].(string), j.ID) {
		t.Errorf("reused key problem names job %v (detail %q), want %s", p["job"], p["detail"], j.ID)
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("%d jobs, want 1", n)
	}
}

// TestIdempotencyQuotedKey: a structured-field string key is the same key as its bare form.
func TestIdempotencyQuotedKey(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	body := `{"report":"demo","params":{"rows":10}}`
	a := apptest.DecodeJob(t, ts.Post(body, `"abc"`))
	res := ts.Post(body, "abc")
	if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("bare key: status %d; body %s", res.StatusCode, res.Body)
	}
	if b := apptest.DecodeJob(t, res); b.ID != a.ID || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf(`key abc gave job %s (replayed %q); key "abc" gave %s`, b.ID, res.Header.Get("Idempotent-Replayed"), a.ID)
	}
	// A finished job replays as 200 with the job, without Location.
	ts.WaitStatus(a.ID, store.StatusSucceeded)
	res = ts.Post(body, "abc")
	if res.StatusCode != http.StatusOK || apptest.DecodeJob(t, res).ID != a.ID || res.Header.Get("Location") != "" {
		t.Errorf("replay of a finished job: status %d, Location %q; body %s", res.StatusCode, res.Header.Get("Location"), res.Body)
	}
	if n := ts.jobCount(); n != 1 {
		t.Errorf("%d jobs, want 1", n)
	}
}

// TestIdempotencyConcurrent: many simultaneous requests with one key make one job.
func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	const n = 20
	type answer struct {
		status   int
		id       string
		replayed bool
		err      string
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			// Not ts.post: t.Fatal must not run outside the test goroutine.
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/exports",
				strings.NewReader(`{"report":"demo","params":{"rows":10}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "same-key")
			res, err := ts.HC.Do(req)
			if err != nil {
				answers[i].err = err.Error()
				return
			}
			defer res.Body.Close()
			var j apiv1.Job
			if err := json.NewDecoder(res.Body).Decode(&j); err != nil {
				answers[i].err = err.Error()
			}
			answers[i] = answer{status: res.StatusCode, id: j.ID, replayed: res.Header.Get("Idempotent-Replayed") == "true",
				err: answers[i].err}
		})
	}
	close(start)
	wg.Wait()

	created := 0
	for i, a := range answers {
		if a.err != "" || (a.status != http.StatusAccepted && a.status != http.StatusOK) {
			t.Fatalf("request %d: status %d, err %s", i, a.status, a.err)
		}
		if a.id != answers[0].id {
			t.Errorf("request %d got job %s, request 0 got %s", i, a.id, answers[0].id)
		}
		if !a.replayed {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d answers created a job (no Idempotent-Replayed), want 1", created)
	}
	if c := ts.jobCount(); c != 1 {
		t.Errorf("%d jobs in the store, want 1", c)
	}
	ts.WaitStatus(answers[0].id, store.StatusSucceeded)
}

// TestRetryThenSucceed: retryable failures within the attempt budget end in SUCCEEDED,
// with the last attempt's error cleared.
func TestRetryThenSucceed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":5,"fail_first":2}}`)
	done, _ := ts.WaitStatus(j.ID, store.StatusSucceeded, store.StatusFailed)
	if store.Status(done.Status) != store.StatusSucceeded || done.Attempt != 3 || done.Error != nil {
		t.Errorf("job ended %s at attempt %d with error %+v, want SUCCEEDED at attempt 3", done.Status, done.Attempt, done.Error)
	}
}
