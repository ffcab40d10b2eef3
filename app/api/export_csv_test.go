package api_test

import (
	"bytes"
	"encoding/csv"
	"mime"
	"net/http"
	"os"
	"strings"
	"testing"

	"sheetq/internal/apptest"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// A csv export through the API: the job says its format, the file is published as
// <id>.csv and downloaded as text/csv with a .csv name, starts with the BOM asked for,
// and holds a header and one CRLF-ended record per row. An xlsx export stays as it was.
func TestCSVExportDownload(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	for _, tc := range []struct {
		body string
		bom  bool
	}{
		{`{"report":"demo","params":{"rows":5},"format":"csv","bom":true}`, true},
		{`{"report":"demo","params":{"rows":5},"format":"csv"}`, false},
	} {
		j := ts.Create(tc.body)
		if j.Format != "csv" || j.BOM != tc.bom {
			t.Fatalf("%s: accepted job has format %q, bom %v", tc.body, j.Format, j.BOM)
		}
		done, _ := ts.WaitStatus(j.ID, store.StatusSucceeded)
		if done.File == nil || !strings.HasSuffix(done.File.Name, ".csv") {
			t.Fatalf("%s: file %+v, want a .csv name", tc.body, done.File)
		}
		onDisk, err := os.ReadFile(jobs.FilePath(ts.dir.Exports(), j.ID+".csv"))
		if err != nil {
			t.Fatalf("%s: not published as <id>.csv: %v", tc.body, err)
		}

		res := ts.Get("/api/v1/exports/" + j.ID + "/file")
		if res.StatusCode != http.StatusOK || !bytes.Equal(res.Body, onDisk) {
			t.Fatalf("%s: download status %d, %d bytes; want 200 with the %d published", tc.body, res.StatusCode, len(res.Body), len(onDisk))
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", tc.body, ct)
		}
		_, cd, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
		if err != nil || cd["filename"] != done.File.Name {
			t.Errorf("%s: Content-Disposition %q, want filename %s", tc.body, res.Header.Get("Content-Disposition"), done.File.Name)
		}
		body, hasBOM := bytes.CutPrefix(res.Body, []byte("\uFEFF"))
		if hasBOM != tc.bom {
			t.Errorf("%s: file starts with a BOM: %v", tc.body, hasBOM)
		}
		if lines := strings.Split(string(body), "\r\n"); len(lines) != 7 || lines[6] != "" ||
			lines[0] != "id,customer,amount,paid,order_date,created_at,note" {
			t.Errorf("%s: want a header, 5 CRLF-ended records; got %q", tc.body, lines)
		}
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil || len(recs) != 6 || recs[1][0] != "1" {
			t.Errorf("%s: csv records %q, %v", tc.body, recs, err)
		}
	}

	x := ts.Create(`{"report":"demo","params":{"rows":2}}`)
	if x.Format != "xlsx" || x.BOM {
		t.Errorf("xlsx job shows format %q, bom %v", x.Format, x.BOM)
	}
	ts.WaitStatus(x.ID, store.StatusSucceeded)
	res := ts.Get("/api/v1/exports/" + x.ID + "/file")
	if ct := res.Header.Get("Content-Type"); ct != export.XLSXContentType || !strings.Contains(res.Header.Get("Content-Disposition"), ".xlsx") {
		t.Errorf("xlsx download: Content-Type %q, Content-Disposition %q", ct, res.Header.Get("Content-Disposition"))
	}
}

// A format the server does not write, or a BOM without csv, is a 422 invalid_format that
// says what to send; a format of the wrong JSON type is a malformed body. None makes a job.
func TestCSVBadFormat(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	for _, tc := range []struct {
		body, code, detail string
		status             int
	}{
		{`{"report":"demo","format":"pdf"}`, "invalid_format", `format "pdf": want "xlsx" or "csv"`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"CSV"}`, "invalid_format", `want "xlsx" or "csv"`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"xlsx","bom":true}`, "invalid_format", `"bom" applies to csv files only`, http.StatusUnprocessableEntity},
		{`{"report":"demo","bom":true}`, "invalid_format", `"bom" applies to csv files only`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":5}`, "malformed_json", "", http.StatusBadRequest},
		{`{"report":"demo","format":"csv","bom":"yes"}`, "malformed_json", "", http.StatusBadRequest},
	} {
		p := apptest.CheckProblem(t, ts.Post(tc.body, ""), tc.status, tc.code)
		if d, _ := p["detail"].(string); !strings.Contains(d, tc.detail) {
			t.Errorf("%s: detail %q, want it to say %q", tc.body, d, tc.detail)
		}
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("bad formats made %d jobs", n)
	}
}

// The format and the BOM are part of a request's idempotency hash: the same key asking
// for another format is a 422 naming the first job; naming the default, xlsx, is the
// same request as naming none.
func TestCSVIdempotencyCoversFormat(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	first := apptest.DecodeJob(t, ts.Post(`{"report":"demo","params":{"rows":3}}`, "key-x"))
	same := ts.Post(`{"report":"demo","params":{"rows":3},"format":"xlsx"}`, "key-x")
	if same.StatusCode != http.StatusAccepted || apptest.DecodeJob(t, same).ID != first.ID {
		t.Fatalf("format xlsx named: status %d, body %s; want a replay of %s", same.StatusCode, same.Body, first.ID)
	}
	p := apptest.CheckProblem(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv"}`, "key-x"), http.StatusUnprocessableEntity, "idempotency_key_reused")
	if p["job"] != first.ID {
		t.Errorf("reused key names job %v, want %s", p["job"], first.ID)
	}

	csvJob := apptest.DecodeJob(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv"}`, "key-c"))
	apptest.CheckProblem(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv","bom":true}`, "key-c"), http.StatusUnprocessableEntity, "idempotency_key_reused")
	again := ts.Post(`{"format":"csv","report":"demo","params":{"rows":"3"}}`, "key-c")
	if again.StatusCode != http.StatusAccepted || apptest.DecodeJob(t, again).ID != csvJob.ID {
		t.Fatalf("the same csv request: status %d, body %s; want a replay of %s", again.StatusCode, again.Body, csvJob.ID)
	}
	if n := ts.jobCount(); n != 2 {
		t.Fatalf("%d jobs, want 2", n)
	}
}
