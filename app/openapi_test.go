package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"sheetq/app/exports"
	"sheetq/internal/apptest"
	"sheetq/store"
)

// contract checks real exchanges with the test server against the OpenAPI document the
// server itself serves, with libopenapi-validator: the route and method must be
// documented, the status code declared for the operation, the Content-Type declared
// for that status, the body valid against its schema (JSON Schema 2020-12, formats
// asserted) and required response headers present.
type contract struct {
	t  *testing.T
	ts *testServer
	v  validator.Validator
	// seen records "METHOD /template" of every operation exercised.
	seen map[string]bool
	doc  map[string]map[string]any // paths -> method -> operation, from the raw JSON
}

func newContract(t *testing.T, ts *testServer) *contract {
	t.Helper()
	res := ts.Get("/api/v1/openapi.json")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: status %d", res.StatusCode)
	}
	if !bytes.Equal(res.Body, openAPIFile(t)) {
		t.Fatal("the served document is not the embedded one")
	}
	doc, err := libopenapi.NewDocument(res.Body)
	if err != nil {
		t.Fatalf("parse the OpenAPI document: %v", err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("OpenAPI version %q, want 3.1.0", v)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("build validator: %v", errs)
	}
	// The document itself must be valid OpenAPI 3.1 (the spec's own JSON Schema).
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the OpenAPI document is invalid:\n%s", describe(verrs))
	}
	var raw struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(res.Body, &raw); err != nil {
		t.Fatal(err)
	}
	c := &contract{t: t, ts: ts, v: v, seen: map[string]bool{}, doc: map[string]map[string]any{}}
	for p, item := range raw.Paths {
		c.doc[p] = map[string]any{}
		for m := range item {
			if m != "parameters" {
				c.doc[p][strings.ToUpper(m)] = true
			}
		}
	}
	return c
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  - " + e.Message + ": " + e.Reason)
		for _, se := range e.SchemaValidationErrors {
			b.WriteString("\n      " + se.FieldPath + " (" + se.KeywordLocation + "): " + se.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// exchange is one request to make and what its answer must be.
type exchange struct {
	op     string            // "METHOD /template", as in the document
	vars   map[string]string // template variables
	query  string            // "?a=b", or ""
	header http.Header
	body   []byte
	status int
	code   string // the problem code of an error answer
	// checkRequest also validates the request against the document (for the requests
	// a client is meant to send; error cases send invalid ones on purpose).
	checkRequest bool
}

// do makes the request, requires the status (and problem code), and validates the
// response against the document.
func (c *contract) do(x exchange) apptest.Response {
	c.t.Helper()
	method, tmpl, _ := strings.Cut(x.op, " ")
	path := tmpl
	for k, v := range x.vars {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	newReq := func() *http.Request {
		req, err := http.NewRequest(method, c.ts.URL+path+x.query, bytes.NewReader(x.body))
		if err != nil {
			c.t.Fatal(err)
		}
		for k, vs := range x.header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		if host := x.header.Get("Host"); host != "" {
			req.Host = host
		}
		return req
	}
	var body io.Reader
	if x.body != nil {
		body = bytes.NewReader(x.body)
	}
	res := c.ts.Request(method, path+x.query, body, x.header)
	if res.StatusCode != x.status {
		c.t.Fatalf("%s %s: status %d, want %d; body %s", method, path+x.query, res.StatusCode, x.status, res.Body)
	}
	if x.code != "" {
		apptest.CheckProblem(c.t, res, x.status, x.code)
	}
	c.validate(x.op, newReq(), res, x.checkRequest)
	return res
}

// validate checks a finished exchange against the document.
func (c *contract) validate(op string, req *http.Request, res apptest.Response, checkRequest bool) {
	c.t.Helper()
	c.seen[op] = true
	if checkRequest {
		if ok, errs := c.v.ValidateHttpRequestSync(req); !ok {
			c.t.Errorf("%s: the request does not match the document:\n%s", op, describe(errs))
		}
	}
	hr := *res.Response
	hr.Body = io.NopCloser(bytes.NewReader(res.Body))
	if ok, errs := c.v.ValidateHttpResponse(req, &hr); !ok {
		c.t.Errorf("%s -> %d %s: the response does not match the document:\n%s\nbody: %s",
			op, res.StatusCode, res.Header.Get("Content-Type"), describe(errs), res.Body)
	}
}

// TestOpenAPIMatchesTheServer runs every documented operation against the real server,
// through its happy paths and main error paths, and validates each answer against the
// served document; then it checks that every operation was exercised and that every
// route registered on the mux is documented.
func TestOpenAPIMatchesTheServer(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	c := newContract(t, ts)
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	withKey := func(key string) http.Header {
		h := jsonHeader.Clone()
		h.Set("Idempotency-Key", key)
		return h
	}
	demo := []byte(`{"report":"demo","params":{"rows":25}}`)

	c.do(exchange{op: "GET /healthz", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /readyz", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/openapi.json", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/reports", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/stats", status: 200, checkRequest: true})

	// Create: a job with a key, its replays, and the refusals.
	created := apptest.DecodeJob(t, c.do(exchange{op: "POST /api/v1/exports", header: withKey("k-1"), body: demo, status: 202, checkRequest: true}))
	id := map[string]string{"id": created.ID}
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: id, status: 200, checkRequest: true}) // PENDING or PROCESSING
	ts.WaitStatus(created.ID, store.StatusSucceeded)
	c.do(exchange{op: "POST /api/v1/exports", header: withKey("k-1"), body: demo, status: 200, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/exports", header: withKey("k-1"), body: []byte(`{"report":"demo","params":{"rows":26}}`),
		status: 422, code: "idempotency_key_reused"})
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader, body: []byte(`{"report":`), status: 400, code: "malformed_json"})
	c.do(exchange{op: "POST /api/v1/exports", header: http.Header{"Idempotency-Key": {"a", "b"}}, body: demo,
		status: 400, code: "bad_idempotency_key"})
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader,
		body: []byte(`{"report":"demo","params":{"x":"` + strings.Repeat("y", exports.MaxBody) + `"}}`), status: 413, code: "body_too_large"})
	c.do(exchange{op: "POST /api/v1/exports", header: http.Header{"Content-Type": {"text/plain"}}, body: demo,
		status: 415, code: "unsupported_media_type"})
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader, body: []byte(`{"report":"nope"}`), status: 422, code: "unknown_report"})
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader, body: []byte(`{"params":{}}`), status: 422, code: "missing_report"})
	p := apptest.CheckProblem(t, c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader,
		body: []byte(`{"report":"demo","params":{"rows":-1}}`), status: 422, code: "invalid_param"}), 422, "invalid_param")
	if p["param"] != "rows" {
		t.Errorf("invalid_param names %v, want rows", p["param"])
	}

	// Show, list and download.
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: id, status: 200, checkRequest: true}) // SUCCEEDED, with its file
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: map[string]string{"id": "nope"}, status: 404, code: "not_found"})
	second := c.ts.Create(string(demo))
	ts.WaitStatus(second.ID, store.StatusSucceeded)
	page := c.do(exchange{op: "GET /api/v1/exports", query: "?status=SUCCEEDED&limit=1", status: 200, checkRequest: true})
	var list struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(page.Body, &list); err != nil || list.NextCursor == "" {
		t.Fatalf("a full page has no next_cursor: %v, %s", err, page.Body)
	}
	c.do(exchange{op: "GET /api/v1/exports", query: "?cursor=" + list.NextCursor, status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/exports", query: "?limit=0", status: 400, code: "bad_limit"})
	c.do(exchange{op: "GET /api/v1/exports", query: "?status=DONE", status: 400, code: "bad_status"})
	c.do(exchange{op: "GET /api/v1/exports", query: "?cursor=%21", status: 400, code: "bad_cursor"})
	file := c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: id, status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: id, header: http.Header{"Range": {"bytes=0-9"}}, status: 206})
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: id, header: http.Header{"If-None-Match": {file.Header.Get("ETag")}}, status: 304})
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: map[string]string{"id": "nope"}, status: 404, code: "not_found"})
	c.do(exchange{op: "POST /api/v1/exports/{id}/file", vars: id, header: jsonHeader, body: []byte(`{"password":"pw"}`), status: 200, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/exports/{id}/file", vars: id, header: jsonHeader, body: []byte(`{"password":""}`), status: 422, code: "invalid_password"})
	c.do(exchange{op: "POST /api/v1/exports/{id}/file", vars: id, header: jsonHeader, body: []byte(`{"pass`), status: 400, code: "malformed_json"})
	// A csv export: its request, the job (format, bom), its file (text/csv), and a bad format.
	csvJob := apptest.DecodeJob(t, c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader,
		body: []byte(`{"report":"demo","params":{"rows":3},"format":"csv","bom":true}`), status: 202, checkRequest: true}))
	cid := map[string]string{"id": csvJob.ID}
	ts.WaitStatus(csvJob.ID, store.StatusSucceeded)
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: cid, status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: cid, status: 200, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader, body: []byte(`{"report":"demo","format":"pdf"}`), status: 422, code: "invalid_format"})
	// Formulas kept: the request, and the job that says so; "keep" with xlsx is refused.
	kept := apptest.DecodeJob(t, c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader,
		body: []byte(`{"report":"demo","params":{"rows":3},"format":"csv","csv_formulas":"keep"}`), status: 202, checkRequest: true}))
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: map[string]string{"id": kept.ID}, status: 200, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/exports", header: jsonHeader, body: []byte(`{"report":"demo","csv_formulas":"keep"}`), status: 422, code: "invalid_format"})

	// A slow job: not finished, cancelled, retried, cancelled again, deleted.
	slow := c.ts.Create(`{"report":"demo","params":{"rows":1000,"seconds":600}}`)
	sid := map[string]string{"id": slow.ID}
	ts.WaitStatus(slow.ID, store.StatusProcessing)
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: sid, status: 409, code: "not_finished"})
	c.do(exchange{op: "DELETE /api/v1/exports/{id}", vars: sid, status: 409, code: "not_finished"})
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: sid, status: 200, checkRequest: true}) // running, with progress
	c.do(exchange{op: "POST /api/v1/exports/{id}/cancel", vars: sid, status: 202, checkRequest: true})
	ts.WaitStatus(slow.ID, store.StatusCanceled)
	c.do(exchange{op: "POST /api/v1/exports/{id}/cancel", vars: sid, status: 409, code: "already_finished"})
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: sid, status: 409, code: "no_file"})
	c.do(exchange{op: "POST /api/v1/exports/{id}/retry", vars: id, status: 409, code: "not_retryable"})
	c.do(exchange{op: "POST /api/v1/exports/{id}/retry", vars: map[string]string{"id": "nope"}, status: 404, code: "not_found"})
	// A job that runs out of attempts: FAILED with its error, and no file.
	failed := c.ts.Create(`{"report":"demo","params":{"rows":5,"fail_first":9}}`)
	fid := map[string]string{"id": failed.ID}
	ts.WaitStatus(failed.ID, store.StatusFailed)
	if j := apptest.DecodeJob(t, c.do(exchange{op: "GET /api/v1/exports/{id}", vars: fid, status: 200, checkRequest: true})); j.Error == nil {
		t.Errorf("a FAILED job without its error: %+v", j)
	}
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: fid, status: 409, code: "no_file"})
	c.do(exchange{op: "GET /api/v1/exports", query: "?report=demo&status=failed", status: 200, checkRequest: true})

	// Stop the dispatcher from claiming the retried job at once, so the cancel below
	// finds it PENDING: the 200 answer.
	ts.engine.Stop()
	c.do(exchange{op: "POST /api/v1/exports/{id}/retry", vars: sid, status: 202, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/exports/{id}/cancel", vars: sid, status: 200, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/exports/{id}/cancel", vars: map[string]string{"id": "nope"}, status: 404, code: "not_found"})
	c.do(exchange{op: "DELETE /api/v1/exports/{id}", vars: sid, status: 204, checkRequest: true})
	c.do(exchange{op: "DELETE /api/v1/exports/{id}", vars: sid, status: 404, code: "not_found"})

	// Retention took the file: 410.
	if _, err := ts.store.Expire(context.Background(), second.ID); err != nil {
		t.Fatal(err)
	}
	c.do(exchange{op: "GET /api/v1/exports/{id}/file", vars: map[string]string{"id": second.ID}, status: 410, code: "expired"})
	c.do(exchange{op: "GET /api/v1/exports/{id}", vars: map[string]string{"id": second.ID}, status: 200, checkRequest: true})

	// The event stream: its head is checked, then the client hangs up.
	c.streamHead("GET /api/v1/events", "?job="+created.ID)
	c.do(exchange{op: "GET /api/v1/events", query: "?job=nope", status: 404, code: "not_found"})
	c.do(exchange{op: "GET /api/v1/events", header: http.Header{"Last-Event-ID": {"x"}}, status: 400, code: "bad_last_event_id"})

	c.do(exchange{op: "GET /api/v1/exports", query: "?limit=1000", status: 200, checkRequest: true}) // every state seen
	c.do(exchange{op: "GET /metrics", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/stats", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/exports", status: 421, header: http.Header{"Host": {"evil.example"}}, code: "bad_host"})

	// Schedules: create (and its refusals), read, list, preview, change, pause, resume,
	// their exports, delete.
	sched := []byte(`{"report":"demo","params":{"rows":5},"cron":"0 6 1 * *","timezone":"Europe/Berlin"}`)
	var sc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(c.do(exchange{op: "POST /api/v1/schedules", header: jsonHeader, body: sched, status: 201, checkRequest: true}).Body, &sc); err != nil || sc.ID == "" {
		t.Fatalf("created schedule: %v %+v", err, sc)
	}
	scid := map[string]string{"id": sc.ID}
	p = apptest.CheckProblem(t, c.do(exchange{op: "POST /api/v1/schedules", header: jsonHeader,
		body: []byte(`{"report":"demo","cron":"61 * * * *","timezone":"UTC"}`), status: 422, code: "invalid_schedule"}), 422, "invalid_schedule")
	if p["field"] != "cron" {
		t.Errorf("a bad cron expression: field %v", p["field"])
	}
	p = apptest.CheckProblem(t, c.do(exchange{op: "POST /api/v1/schedules", header: jsonHeader,
		body: []byte(`{"report":"demo","params":{"rows":-1},"cron":"@daily","timezone":"UTC"}`), status: 422, code: "invalid_schedule"}), 422, "invalid_schedule")
	if p["field"] != "params.rows" || p["param"] != "rows" {
		t.Errorf("a bad parameter: field %v, param %v", p["field"], p["param"])
	}
	c.do(exchange{op: "POST /api/v1/schedules", header: jsonHeader, body: []byte(`{"report":"nope","cron":"@daily","timezone":"UTC"}`), status: 422, code: "unknown_report"})
	c.do(exchange{op: "POST /api/v1/schedules", header: jsonHeader, body: []byte(`{"report":"demo","cron":"@daily","timezone":"Mars/Base"}`), status: 422, code: "invalid_schedule"})
	c.do(exchange{op: "POST /api/v1/schedules", header: jsonHeader, body: []byte(`{"report":"demo","crontab":"@daily"}`), status: 400, code: "malformed_json"})
	c.do(exchange{op: "GET /api/v1/schedules", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/schedules/{id}", vars: scid, status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/schedules/{id}", vars: map[string]string{"id": "nope"}, status: 404, code: "not_found"})
	c.do(exchange{op: "POST /api/v1/schedules/preview", header: jsonHeader, body: sched, status: 200, checkRequest: true})
	c.do(exchange{op: "PATCH /api/v1/schedules/{id}", vars: scid, header: jsonHeader, body: []byte(`{"cron":"30 7 * * MON"}`), status: 200, checkRequest: true})
	c.do(exchange{op: "PATCH /api/v1/schedules/{id}", vars: scid, header: jsonHeader, body: []byte(`{"timezone":"Nowhere"}`), status: 422, code: "invalid_schedule"})
	c.do(exchange{op: "POST /api/v1/schedules/{id}/pause", vars: scid, status: 200, checkRequest: true})
	c.do(exchange{op: "POST /api/v1/schedules/{id}/resume", vars: scid, status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/schedules/{id}/exports", vars: scid, status: 200, checkRequest: true})
	c.do(exchange{op: "DELETE /api/v1/schedules/{id}", vars: scid, status: 204, checkRequest: true})
	c.do(exchange{op: "DELETE /api/v1/schedules/{id}", vars: scid, status: 404, code: "not_found"})

	// The audit log, which the local admin reads: a page, its csv, a refusal.
	c.do(exchange{op: "GET /api/v1/audit", query: "?actor=local&limit=10", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/audit", query: "?format=csv", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/audit", query: "?action=dance", status: 400, code: "bad_action"})

	// Every documented operation was exercised above.
	for p, methods := range c.doc {
		for m := range methods {
			if !c.seen[m+" "+p] {
				t.Errorf("documented operation %s %s is never exercised by this test", m, p)
			}
		}
	}
}

// TestOpenAPIUnauthorized checks the 401 answers of a server with an access token.
func TestOpenAPIUnauthorized(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Token: "s3cret-token-0123"})
	c := newContractAuthorized(t, ts, "s3cret-token-0123")
	c.do(exchange{op: "GET /api/v1/exports", status: 401, code: "unauthorized"})
	c.do(exchange{op: "GET /metrics", status: 401, code: "unauthorized"})
	c.do(exchange{op: "GET /healthz", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /readyz", status: 200, checkRequest: true})
	c.do(exchange{op: "GET /api/v1/stats", header: http.Header{"Authorization": {"Bearer s3cret-token-0123"}}, status: 200, checkRequest: true})
}

// newContractAuthorized fetches the document with the token.
func newContractAuthorized(t *testing.T, ts *testServer, token string) *contract {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/openapi.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := ts.HC.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json with the token: %d", res.StatusCode)
	}
	// The document is the embedded one (newContract checks that when it can fetch it).
	doc, err := libopenapi.NewDocument(openAPIFile(t))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("build validator: %v", errs)
	}
	return &contract{t: t, ts: ts, v: v, seen: map[string]bool{}}
}

// streamHead opens an SSE stream, reads up to its first blank line, hangs up, and
// validates the status, Content-Type and what was read.
func (c *contract) streamHead(op, query string) {
	c.t.Helper()
	method, path, _ := strings.Cut(op, " ")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.ts.URL+path+query, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	res, err := c.ts.HC.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: status %d", op, res.StatusCode)
	}
	var head bytes.Buffer
	br := bufio.NewReader(res.Body)
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			c.t.Fatalf("%s: read the stream: %v (read %q)", op, err, head.String())
		}
		if line == "\n" {
			break
		}
	}
	cancel()
	vreq, _ := http.NewRequest(method, c.ts.URL+path+query, nil)
	c.validate(op, vreq, apptest.Response{Response: res, Body: head.Bytes()}, true)
}

// routePattern finds the patterns registered on a ServeMux in the package's code.
var routePattern = regexp.MustCompile(`mux\.Handle(?:Func)?\(\s*"([A-Z]+) (/[^"]*)"`)

// TestOpenAPIDocumentsEveryRoute: every METHOD route registered in the package's source
// is in the document, and every documented operation is registered. Routes outside
// /api/, /healthz and /metrics are pages and static files, not the API.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	var files []string
	for _, dir := range []string{".", "api", "web"} { // the packages whose handlers routes.go composes
		more, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	registered := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
			registered[m[1]+" "+openAPIPath(m[2])] = true
		}
	}
	if !registered["POST /api/v1/exports"] {
		t.Fatalf("found no routes (the pattern no longer matches routes.go?): %v", registered)
	}
	var raw struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIFile(t), &raw); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, item := range raw.Paths {
		for m := range item {
			if m != "parameters" {
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	for r := range registered {
		_, path, _ := strings.Cut(r, " ")
		isAPI := strings.HasPrefix(path, "/api/") || path == "/healthz" || path == "/readyz" || path == "/metrics"
		if isAPI && !documented[r] {
			t.Errorf("route %s is registered but not in app/api/openapi.json", r)
		}
		if !isAPI {
			t.Logf("not documented, not API: %s", r)
		}
	}
	for d := range documented {
		if !registered[d] {
			t.Errorf("app/api/openapi.json documents %s, which no mux registers", d)
		}
	}
	t.Logf("documented: %v", slices.Sorted(maps.Keys(documented)))
}

// openAPIPath turns a ServeMux path pattern into an OpenAPI path template.
func openAPIPath(p string) string {
	p = strings.TrimSuffix(p, "{$}")
	return strings.ReplaceAll(p, "...}", "}")
}

// TestOpenAPIValidationCatchesMismatches guards the contract test against passing
// vacuously: documents that each get one detail wrong must fail on real answers.
func TestOpenAPIValidationCatchesMismatches(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	body := []byte(`{"report":"demo","params":{"rows":5}}`)
	accepted := ts.Post(string(body), "") // the job as committed: PENDING, not started
	notFound := ts.Get("/api/v1/exports/nope")
	health := ts.Get("/healthz")
	ts.WaitStatus(apptest.DecodeJob(t, accepted).ID, store.StatusSucceeded)

	type answer struct {
		method, path string
		res          apptest.Response
	}
	post := answer{http.MethodPost, "/api/v1/exports", accepted}
	if j := apptest.DecodeJob(t, accepted); store.Status(j.Status) != store.StatusPending || j.FinishedAt != nil {
		t.Fatalf("a new job is %s, finished at %v", j.Status, j.FinishedAt)
	}
	for _, tc := range []struct {
		name   string
		mutate func(doc map[string]any)
		answer answer
	}{
		{"a job member the server does not send", func(d map[string]any) {
			job := schema(d, "job")
			job["required"] = append(job["required"].([]any), "owner")
		}, post},
		{"a member the server sends is not declared", func(d map[string]any) {
			delete(schema(d, "job")["properties"].(map[string]any), "max_attempts")
		}, post},
		{"a nullable time declared non-null", func(d map[string]any) {
			schema(d, "job")["properties"].(map[string]any)["finished_at"] = map[string]any{"type": "string", "format": "date-time"}
		}, post},
		{"a status code not declared", func(d map[string]any) {
			delete(operation(d, "/api/v1/exports/{id}", "get")["responses"].(map[string]any), "404")
		}, answer{http.MethodGet, "/api/v1/exports/nope", notFound}},
		{"the problem schema's code pattern", func(d map[string]any) {
			schema(d, "problem")["properties"].(map[string]any)["code"] = map[string]any{"type": "string", "pattern": "^[A-Z]+$"}
		}, answer{http.MethodGet, "/api/v1/exports/nope", notFound}},
		{"another content type", func(d map[string]any) {
			r := operation(d, "/healthz", "get")["responses"].(map[string]any)["200"].(map[string]any)
			r["content"] = map[string]any{"text/html": map[string]any{"schema": map[string]any{"type": "string"}}}
		}, answer{http.MethodGet, "/healthz", health}},
		{"a required header the server does not send", func(d map[string]any) {
			r := operation(d, "/healthz", "get")["responses"].(map[string]any)["200"].(map[string]any)
			r["headers"] = map[string]any{"X-Missing": map[string]any{"required": true, "schema": map[string]any{"type": "string"}}}
		}, answer{http.MethodGet, "/healthz", health}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(openAPIFile(t), &d); err != nil {
				t.Fatal(err)
			}
			tc.mutate(d)
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := libopenapi.NewDocument(b)
			if err != nil {
				t.Fatal(err)
			}
			v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			req, err := http.NewRequest(tc.answer.method, ts.URL+tc.answer.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			hr := *tc.answer.res.Response
			hr.Body = io.NopCloser(bytes.NewReader(tc.answer.res.Body))
			if ok, _ := v.ValidateHttpResponse(req, &hr); ok {
				t.Fatalf("a document with %s accepts %s %s -> %d %s", tc.name, tc.answer.method, tc.answer.path,
					tc.answer.res.StatusCode, tc.answer.res.Body)
			}
		})
	}
}

func schema(doc map[string]any, name string) map[string]any {
	return doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
}

func operation(doc map[string]any, path, method string) map[string]any {
	return doc["paths"].(map[string]any)[path].(map[string]any)[method].(map[string]any)
}

// openAPIFile is the OpenAPI document as the server embeds it (app/api/openapi.json).
func openAPIFile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("api", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
