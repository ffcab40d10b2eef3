package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sheetq/app/api"
	"sheetq/app/exports"
	"sheetq/app/problem"
	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// Downloads from the file store (jobs.Files): streamed from a bucket with the headers a
// local file gets, or redirected to a presigned URL that names and types the file.

const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// served is one export run to SUCCEEDED by a real engine and store onto files, and the
// API serving it.
type served struct {
	srv   *httptest.Server
	svc   *exports.Service
	files jobs.Files
	job   store.Job
	data  []byte
}

func serveOneExport(t *testing.T, files func(exportsDir string) jobs.Files, mode api.Download) served {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := apptest.OpenStore(t, openStore, datadir.Dir{Root: dir}, nil)
	exportsDir := filepath.Join(dir, "exports")
	f := files(exportsDir)
	data := make([]byte, 300<<10)
	_, _ = rand.Read(data)
	e := jobs.New(st, jobs.Config{TmpDir: filepath.Join(dir, "tmp"), ExportsDir: exportsDir, Files: f, Logger: log})
	e.Register(export.Name, jobs.HandlerFunc(func(ctx context.Context, run *jobs.Run) error {
		w, err := run.Output()
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	j, _, err := e.Enqueue(ctx, store.NewJob{Kind: export.Name, Args: json.RawMessage(`{"report":"sales"}`)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for j.Status != store.StatusSucceeded {
		if time.Now().After(deadline) || j.Status.Final() {
			t.Fatalf("export is %s (%s), want SUCCEEDED", j.Status, j.ErrorMessage)
		}
		time.Sleep(5 * time.Millisecond)
		if j, err = st.Get(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	}
	svc := &exports.Service{Store: st, Engine: e}
	a := api.New(api.Config{Exports: svc, Files: f, Download: mode,
		ExportsDir: exportsDir, Log: log, Problems: problem.Reporter{Log: log}})
	mux := http.NewServeMux()
	a.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return served{srv: srv, svc: svc, files: f, job: j, data: data}
}

// s3 is the file store of a bucket of the test's own.
func s3(t *testing.T) func(string) jobs.Files {
	env := objstoretest.Bucket(t)
	return func(exportsDir string) jobs.Files {
		f, err := jobs.OpenFiles(env.URL("team"), exportsDir, env.AccessKey, env.SecretKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}

func local(exportsDir string) jobs.Files { return jobs.NewLocalFiles(exportsDir) }

// noRedirects is a client that shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func fetch(t *testing.T, c *http.Client, method, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return do(t, c, req)
}

// do sends req and reads the whole answer.
func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// checkAttachment checks that res names the download as the export's file of type xlsx.
func checkAttachment(t *testing.T, res *http.Response, job store.Job) {
	t.Helper()
	disp, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
	if want := export.DownloadName(export.Args{Report: "sales"}, job); err != nil || disp != "attachment" || params["filename"] != want {
		t.Errorf("Content-Disposition %q; want attachment with filename %q", res.Header.Get("Content-Disposition"), want)
	}
	if ct := res.Header.Get("Content-Type"); ct != xlsxType {
		t.Errorf("Content-Type %q; want %q", ct, xlsxType)
	}
}

// Streamed from the bucket: the same bytes, length, name, type and ETag as a local file,
// Range and If-None-Match answered, and a missing object is 410 as a missing file is.
func TestS3DownloadStreams(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, s3(t), api.DownloadStream)
	url := s.srv.URL + "/api/v1/exports/" + s.job.ID + "/file"

	res, body := fetch(t, noRedirects, http.MethodGet, url, nil)
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, s.data) || res.ContentLength != int64(len(s.data)) {
		t.Fatalf("GET: %d, %d bytes (Content-Length %d); want 200 with the %d bytes", res.StatusCode, len(body), res.ContentLength, len(s.data))
	}
	checkAttachment(t, res, s.job)
	if etag := res.Header.Get("ETag"); etag != `"`+s.job.FileSHA256+`"` {
		t.Errorf("ETag %q; want the sha256", etag)
	}

	res, body = fetch(t, noRedirects, http.MethodGet, url, http.Header{"Range": {"bytes=100000-100999"}})
	if res.StatusCode != http.StatusPartialContent || !bytes.Equal(body, s.data[100000:101000]) {
		t.Fatalf("Range: %d, %d bytes; want 206 with bytes 100000-100999", res.StatusCode, len(body))
	}
	res, _ = fetch(t, noRedirects, http.MethodGet, url, http.Header{"If-None-Match": {`"` + s.job.FileSHA256 + `"`}})
	if res.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d; want 304", res.StatusCode)
	}

	// Gone from the bucket behind the server's back: 410, as a file gone from the disk.
	if _, err := s.files.Delete(context.Background(), s.job.FileName); err != nil {
		t.Fatal(err)
	}
	res, body = fetch(t, noRedirects, http.MethodGet, url, nil)
	var p struct{ Code string }
	if _ = json.Unmarshal(body, &p); res.StatusCode != http.StatusGone || p.Code != "file_missing" {
		t.Fatalf("missing object: %d %s; want 410 file_missing", res.StatusCode, body)
	}
}

// Redirected: a 302 to a presigned URL that the bucket answers, without credentials,
// with the bytes, the download's name and the xlsx type; the redirect is not cached. A
// HEAD is answered by the node (a presigned URL is signed for GET only).
func TestS3DownloadRedirects(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, s3(t), api.DownloadRedirect)
	url := s.srv.URL + "/api/v1/exports/" + s.job.ID + "/file"

	res, _ := fetch(t, noRedirects, http.MethodGet, url, nil)
	link := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || link == "" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET: %d, Location %q, Cache-Control %q; want 302 to a presigned URL, not cached",
			res.StatusCode, link, res.Header.Get("Cache-Control"))
	}
	res, body := fetch(t, http.DefaultClient, http.MethodGet, link, nil)
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, s.data) {
		t.Fatalf("presigned GET: %d, %d bytes; want 200 with the %d bytes", res.StatusCode, len(body), len(s.data))
	}
	checkAttachment(t, res, s.job)

	res, body = fetch(t, noRedirects, http.MethodHead, url, nil)
	if res.StatusCode != http.StatusOK || res.ContentLength != int64(len(s.data)) || len(body) != 0 {
		t.Fatalf("HEAD: %d, Content-Length %d; want 200 and the file's length", res.StatusCode, res.ContentLength)
	}
	checkAttachment(t, res, s.job)
}

// The local folder has no presigned URLs: with redirect configured, its files are
// streamed as before.
func TestLocalDownloadIgnoresRedirect(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, local, api.DownloadRedirect)
	res, body := fetch(t, noRedirects, http.MethodGet, s.srv.URL+"/api/v1/exports/"+s.job.ID+"/file", nil)
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, s.data) {
		t.Fatalf("GET: %d, %d bytes; want 200 with the %d bytes", res.StatusCode, len(body), len(s.data))
	}
	checkAttachment(t, res, s.job)
}

func TestParseDownload(t *testing.T) {
	for in, want := range map[string]api.Download{"": api.DownloadStream, "stream": api.DownloadStream, "redirect": api.DownloadRedirect} {
		if got, err := api.ParseDownload(in); err != nil || got != want {
			t.Errorf("ParseDownload(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := api.ParseDownload("presign"); err == nil {
		t.Error("ParseDownload(presign) accepted")
	}
}

// A bucket that does not answer (down, unreachable) is 503 files_unavailable with
// Retry-After for the download, in both modes: the file is not lost and a retry may work,
// so neither a 410 nor a 500.
func TestS3DownloadFromABucketThatDoesNotAnswer(t *testing.T) {
	s := serveOneExport(t, s3(t), api.DownloadStream)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: every request is refused
	env := objstoretest.Server(t)
	q := url.Values{"endpoint": {dead}, "region": {env.Region}}
	down, err := jobs.OpenFiles("s3://sheetq-down/team?"+q.Encode(), t.TempDir(), env.AccessKey, env.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, mode := range []api.Download{api.DownloadStream, api.DownloadRedirect} {
		a := api.New(api.Config{Exports: s.svc, Files: down, Download: mode, Log: log, Problems: problem.Reporter{Log: log}})
		mux := http.NewServeMux()
		a.Routes(mux)
		srv := httptest.NewServer(mux)
		res, body := fetch(t, noRedirects, http.MethodGet, srv.URL+"/api/v1/exports/"+s.job.ID+"/file", nil)
		srv.Close()
		var p struct{ Code string }
		_ = json.Unmarshal(body, &p)
		if res.StatusCode != http.StatusServiceUnavailable || p.Code != "files_unavailable" || res.Header.Get("Retry-After") == "" {
			t.Errorf("%s: status %d, code %q, Retry-After %q; want 503 files_unavailable with Retry-After: %s",
				mode, res.StatusCode, p.Code, res.Header.Get("Retry-After"), body)
		}
	}
}

// wantProblem checks that res is a problem+json answer with status and code.
func wantProblem(t *testing.T, what string, res *http.Response, body []byte, status int, code string) {
	t.Helper()
	var p struct {
		Status int
		Code   string
	}
	err := json.Unmarshal(body, &p)
	if ct := res.Header.Get("Content-Type"); res.StatusCode != status || ct != "application/problem+json" || err != nil ||
		p.Status != status || p.Code != code {
		t.Errorf("%s: %d %q %s; want %d problem+json %s", what, res.StatusCode, ct, body, status, code)
	}
}

// A list query that cannot be read (a bad escape, a ';', which url.Values drops), or
// that repeats a parameter (of which Get keeps the first), is a 400, not a 200 listing
// what the client did not ask for.
func TestListExportsRefusesAQueryItCannotRead(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, local, api.DownloadStream)
	list := s.srv.URL + "/api/v1/exports"
	for _, q := range []string{"?limit=%zz", "?limit=5;status=FAILED", "?status=%", "?status=FAILED&status=CANCELED",
		"?limit=1&limit=1000", "?report=a&report=b", "?cursor=MQ&cursor=Mg"} {
		res, body := fetch(t, http.DefaultClient, http.MethodGet, list+q, nil)
		wantProblem(t, q, res, body, http.StatusBadRequest, "bad_query")
	}
	// What it can read is still answered, unknown parameters ignored.
	for _, q := range []string{"", "?limit=05", "?status=succeeded&report=sales", "?status=&x=1&x=2"} {
		res, body := fetch(t, http.DefaultClient, http.MethodGet, list+q, nil)
		if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(s.job.ID)) {
			t.Errorf("%s: %d %s; want 200 listing %s", q, res.StatusCode, body, s.job.ID)
		}
	}
}

// The answers http.ServeContent writes by itself for a download's failed precondition
// (412) or unsatisfiable Range (416) are problem+json, without the attachment's name, so
// that no client saves the error as the spreadsheet; what is satisfiable is still served.
func TestDownloadPreconditionAndRangeProblems(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, local, api.DownloadStream)
	file := s.srv.URL + "/api/v1/exports/" + s.job.ID + "/file"
	size := strconv.Itoa(len(s.data))
	for _, tt := range []struct {
		header       http.Header
		status       int
		code         string
		contentRange string
	}{
		{http.Header{"If-Match": {`"other"`}}, http.StatusPreconditionFailed, "precondition_failed", ""},
		{http.Header{"If-Unmodified-Since": {"Mon, 01 Jan 2001 00:00:00 GMT"}}, http.StatusPreconditionFailed, "precondition_failed", ""},
		{http.Header{"Range": {"bytes=" + size + "-"}}, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", "bytes */" + size},
		{http.Header{"Range": {"bytes=abc"}}, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", ""},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			what := fmt.Sprintf("%s %v", method, tt.header)
			res, body := fetch(t, noRedirects, method, file, tt.header)
			if method == http.MethodGet {
				wantProblem(t, what, res, body, tt.status, tt.code)
			} else if ct := res.Header.Get("Content-Type"); res.StatusCode != tt.status || ct != "application/problem+json" {
				t.Errorf("%s: %d %q; want %d problem+json", what, res.StatusCode, ct, tt.status)
			}
			if d := res.Header.Get("Content-Disposition"); d != "" {
				t.Errorf("%s: Content-Disposition %q on an error", what, d)
			}
			if cr := res.Header.Get("Content-Range"); cr != tt.contentRange {
				t.Errorf("%s: Content-Range %q; want %q", what, cr, tt.contentRange)
			}
		}
	}
	res, body := fetch(t, noRedirects, http.MethodGet, file, http.Header{"Range": {"bytes=10-19"}, "If-Match": {`"` + s.job.FileSHA256 + `"`}})
	if res.StatusCode != http.StatusPartialContent || !bytes.Equal(body, s.data[10:20]) {
		t.Errorf("satisfiable Range with a matching If-Match: %d, %d bytes; want 206 with bytes 10-19", res.StatusCode, len(body))
	}
}

// names is a report library with one report over the demo source and a text parameter.
type names struct{}

func (names) Report(id string) (export.Report, error) {
	if id != "names" {
		return export.Report{}, export.ErrUnknownReport
	}
	return export.Report{ID: "names", Source: "demo", Sheet: "names", Params: []export.Param{{Name: "who", Type: export.TypeText}}}, nil
}

// A request body that is not UTF-8 (Latin-1 "Müller") is a 400 that creates nothing,
// not an export of "M\ufffdller", and so is one that gives a key twice; the same text in
// UTF-8 is accepted as sent.
func TestCreateExportRefusesABodyThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, local, api.DownloadStream)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &exports.Service{Store: s.svc.Store, Engine: s.svc.Engine, Kind: export.New(export.Config{Library: names{}})}
	mux := http.NewServeMux()
	api.New(api.Config{Exports: svc, Gate: jobs.NewGate(nil, nil), Log: log, Problems: problem.Reporter{Log: log}}).Routes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/exports", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return do(t, http.DefaultClient, req)
	}
	count := func() int {
		jobs, err := s.svc.Store.List(context.Background(), store.ListOptions{Kind: export.Name, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	before := count()
	res, body := post("{\"report\":\"names\",\"params\":{\"who\":\"M\xfcller\"}}")
	wantProblem(t, "Latin-1 body", res, body, http.StatusBadRequest, "malformed_json")
	if n := count(); n != before {
		t.Fatalf("%d exports after a refused request, want %d", n, before)
	}
	// A key given twice is refused too: encoding/json would keep the last without a word.
	for _, dup := range []string{
		`{"report":"names","params":{"who":"Ann","who":"Bob"}}`,
		`{"report":"names","Report":"other","params":{"who":"Ann"}}`,
	} {
		res, body = post(dup)
		wantProblem(t, dup, res, body, http.StatusBadRequest, "malformed_json")
		if !bytes.Contains(body, []byte("more than once")) {
			t.Errorf("%s: %s", dup, body)
		}
	}
	if n := count(); n != before {
		t.Fatalf("%d exports after refused requests, want %d", n, before)
	}
	res, body = post(`{"report":"names","params":{"who":"Müller"}}`)
	if res.StatusCode != http.StatusAccepted || !bytes.Contains(body, []byte(`"who": "Müller"`)) {
		t.Fatalf("UTF-8 body: %d %s; want 202 with who Müller", res.StatusCode, body)
	}
}

// A compressed request body (Content-Encoding, which the server does not decode) is a
// 415 naming the encoding, with Accept-Encoding: identity, not a 400 about stray bytes.
func TestCreateExportRefusesACompressedBody(t *testing.T) {
	t.Parallel()
	s := serveOneExport(t, local, api.DownloadStream)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"report":"sales"}`))
	_ = zw.Close()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/api/v1/exports", &gz)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	wantProblem(t, "gzip body", res, body, http.StatusUnsupportedMediaType, "unsupported_media_type")
	if ae := res.Header.Get("Accept-Encoding"); ae != "identity" {
		t.Errorf("Accept-Encoding %q; want identity", ae)
	}
}
