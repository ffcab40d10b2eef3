package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sheetq/app/exports"
	"sheetq/app/problem"
	"sheetq/internal/apiv1"
)

// The API's input fuzzers post arbitrary bodies, headers and query strings to the real
// app (store, catalog, routes; the engine idle, so accepted jobs only queue). Whatever
// comes in: never a 5xx, never a panic, an error is problem+json with its code, a 202
// only for a request that is valid by an independent reading of the contract, and a
// refused request creates no job.
//
// Run one for longer with: go test -run '^$' -fuzz '^FuzzCreateExport$' -fuzztime 1m ./app/

// validHeader reports whether the HTTP client can send v as a header value at all
// (net/http refuses control characters before anything reaches the server).
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func jobTotal(t *testing.T, s *App) int {
	t.Helper()
	counts, err := s.store.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// checkProblemBody requires an RFC 9457 body that matches the status.
func checkProblemBody(t *testing.T, res *http.Response, body []byte) {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%d with Content-Type %q, want application/problem+json; body %s", res.StatusCode, ct, body)
	}
	var p problem.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" || p.Status != res.StatusCode {
		t.Fatalf("problem %s (%v): want a code and status %d", body, err, res.StatusCode)
	}
}

// acceptable reports whether body is a request the contract says may be accepted: one
// JSON object with a known report and only that report's parameter names. (Whether the
// values are in range is the validator's business; this only catches a 202 for what
// no reading of the contract allows.)
func acceptable(body []byte, reports map[string]map[string]bool) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		return false
	}
	// The request's field names match without regard to case, as encoding/json matches
	// them (a name given twice in two cases is refused: duplicateKey); a report's
	// parameter names are exact.
	req := map[string]json.RawMessage{}
	for k, v := range raw {
		k = strings.ToLower(k)
		if k != "report" && k != "params" { // webhook: refused, the test server has no secret
			return false
		}
		req[k] = v
	}
	var id string
	if err := json.Unmarshal(req["report"], &id); err != nil {
		return false
	}
	params, ok := reports[id]
	if !ok {
		return false
	}
	if raw, ok := req["params"]; ok && string(raw) != "null" {
		var ps map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ps); err != nil {
			return false
		}
		for k := range ps {
			if !params[k] {
				return false
			}
		}
	}
	return true
}

func FuzzCreateExport(f *testing.F) {
	s, hs := startTestApp(f, testOpts{Idle: true})
	hc := hs.Client()

	reports := map[string]map[string]bool{}
	for _, r := range s.kind.catalog.Entries() {
		ri := exports.ReportOf(r)
		names := map[string]bool{}
		for _, p := range ri.Params {
			names[p.Name] = true
		}
		reports[ri.ID] = names
	}

	for _, seed := range []struct{ body, key, ct string }{
		{`{"report":"demo","params":{"rows":10}}`, "", "application/json"},
		{`{"report":"demo","params":{"rows":3000,"seconds":4}}`, "k-1", "application/json"},
		{`{"report":"demo","params":{"rows":500,"fail_first":1}}`, `"k-2"`, ""},
		{`{"report":"demo"}`, "", "application/merge-patch+json; charset=utf-8"},
		{`{"report":"demo","params":{"rows":"ten"}}`, "", "application/json"},
		{`{"report":"demo","params":{"rows":-1}}`, "", "application/json"},
		{`{"report":"demo","params":{"rows":1e400}}`, "", "application/json"},
		{`{"report":"demo","params":{"nope":1}}`, "", "application/json"},
		{`{"report":"orders","params":{"from":"2024-01-01","to":"2024-02-01"}}`, "", "application/json"},
		{`{"report":"demo","webhook":{"url":"https://example.com/hook"}}`, "", "application/json"},
		{`{"report":"demo","extra":true}`, "", "application/json"},
		{`{"report":"demo"}}`, "", "application/json"},
		{`[]`, "", "application/json"},
		{`null`, "", "text/plain"},
		{``, "", ""},
	} {
		f.Add(seed.body, seed.key, seed.ct)
	}

	f.Fuzz(func(t *testing.T, body, key, ct string) {
		if !validHeader(key) || !validHeader(ct) {
			return
		}
		before := jobTotal(t, s)
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/api/v1/exports", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		after := jobTotal(t, s)
		replay := res.Header.Get("Idempotent-Replayed") == "true"
		switch {
		case res.StatusCode >= 500:
			t.Fatalf("%d for body %q key %q type %q: %s", res.StatusCode, body, key, ct, b)
		case res.StatusCode == http.StatusAccepted:
			if !acceptable([]byte(body), reports) {
				t.Fatalf("202 for a request the contract does not allow: %q", body)
			}
			var j apiv1.Job
			if err := json.Unmarshal(b, &j); err != nil || j.ID == "" {
				t.Fatalf("202 without a job: %s (%v)", b, err)
			}
			if _, err := s.store.Get(context.Background(), j.ID); err != nil {
				t.Fatalf("202 for job %s, which the store does not hold: %v", j.ID, err)
			}
			if want := before + 1; !replay && after != want {
				t.Fatalf("202 (new job) but %d jobs, want %d", after, want)
			}
			if replay && after != before {
				t.Fatalf("a replayed 202 created a job: %d -> %d", before, after)
			}
		case res.StatusCode == http.StatusOK && replay:
			// A replay of a finished job; none finish here, the engine is idle.
			t.Fatalf("200 replay of a job that cannot have finished: %s", b)
		default:
			if res.StatusCode < 400 {
				t.Fatalf("unexpected %d: %s", res.StatusCode, b)
			}
			checkProblemBody(t, res, b)
			if after != before {
				t.Fatalf("a refused request (%d) changed the job count %d -> %d", res.StatusCode, before, after)
			}
		}
	})
}

// The list's query parameters: any query string is a 200 list or a 400 problem.
func FuzzListExports(f *testing.F) {
	_, hs := startTestApp(f, testOpts{Idle: true})
	hc := hs.Client()
	for range 3 {
		res, err := hc.Post(hs.URL+"/api/v1/exports", "application/json", strings.NewReader(`{"report":"demo"}`))
		if err != nil {
			f.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			f.Fatalf("seed job: %s", res.Status)
		}
	}
	for _, q := range []string{"", "status=pending", "status=SUCCEEDED&limit=2", "limit=0", "limit=-1",
		"limit=99999999999999999999", "cursor=abc", "cursor=%ff", "status=nope", "limit=1&cursor=eyJ9"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(hs.URL + "/api/v1/exports")
		if err != nil {
			t.Fatal(err)
		}
		u.RawQuery = url.PathEscape(raw) // any bytes, sent as a well-formed query
		u.RawQuery = strings.NewReplacer("%3D", "=", "%26", "&").Replace(u.RawQuery)
		res, err := hc.Get(u.String())
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		switch res.StatusCode {
		case http.StatusOK:
			var list struct {
				Exports []apiv1.Job `json:"exports"`
			}
			if err := json.Unmarshal(b, &list); err != nil {
				t.Fatalf("200 that is not a list: %s (%v)", b, err)
			}
		case http.StatusBadRequest:
			checkProblemBody(t, res, b)
		default:
			t.Fatalf("GET ?%s: %d %s", u.RawQuery, res.StatusCode, b)
		}
	})
}
