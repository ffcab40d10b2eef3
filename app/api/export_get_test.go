package api_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

func encodeB64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestUnknownExport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/nosuchjob"), http.StatusNotFound, "not_found")
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/nosuchjob/file"), http.StatusNotFound, "not_found")
}

func TestUnknownAPIRoute(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.CheckProblem(t, ts.Get("/api/v1/nope"), http.StatusNotFound, "no_route")
	// A known path with another method is 405, not 404 (TestMethodNotAllowed).
	apptest.CheckProblem(t, ts.Request(http.MethodDelete, "/api/v1/exports", nil, nil), http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestFileOfUnfinishedJob: 409 not_finished while the job runs; 409 no_file once canceled.
func TestFileOfUnfinishedJob(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":1000,"seconds":30}}`)

	res := ts.Get("/api/v1/exports/" + j.ID + "/file")
	p := apptest.CheckProblem(t, res, http.StatusConflict, "not_finished")
	if p["job"] != j.ID {
		t.Errorf("problem job %v, want %s", p["job"], j.ID)
	}
	if res.Header.Get("Retry-After") == "" {
		t.Error("not_finished without Retry-After")
	}
	cur, curRes := ts.Job(j.ID)
	if store.Status(cur.Status).Final() {
		t.Fatalf("a 30-second job is already %s", cur.Status)
	}
	if curRes.Header.Get("Retry-After") == "" {
		t.Error("GET of an unfinished job without Retry-After")
	}

	// Once it runs, still not finished.
	ts.WaitStatus(j.ID, store.StatusProcessing)
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusConflict, "not_finished")

	ts.cancel(j.ID)
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusConflict, "no_file")
}

// TestFileOfFailedJob: a job out of attempts is FAILED with its error, and has no file.
func TestFileOfFailedJob(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{MaxAttempts: 1})
	j := ts.Create(`{"report":"demo","params":{"rows":10,"fail_first":1}}`)
	if j.MaxAttempts != 1 {
		t.Errorf("max_attempts %d, want the server's 1", j.MaxAttempts)
	}
	done, res := ts.WaitStatus(j.ID, store.StatusFailed, store.StatusSucceeded)
	if store.Status(done.Status) != store.StatusFailed {
		t.Fatalf("job ended %s, want FAILED", done.Status)
	}
	if done.Error == nil || done.Error.Code != "upstream" || done.Error.Message == "" {
		t.Errorf("error %+v, want code upstream with a message", done.Error)
	}
	if done.DownloadURL != "" || done.File != nil || res.Header.Get("Retry-After") != "" {
		t.Errorf("failed job: download_url %q, file %+v, Retry-After %q", done.DownloadURL, done.File, res.Header.Get("Retry-After"))
	}
	p := apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusConflict, "no_file")
	if p["job"] != j.ID {
		t.Errorf("problem job %v, want %s", p["job"], j.ID)
	}
}

// TestFileRemovedFromDisk: a SUCCEEDED job whose file is gone answers 410, not 500.
func TestFileRemovedFromDisk(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	if err := os.Remove(jobs.FilePath(ts.dir.Exports(), j.ID+export.FileExt)); err != nil {
		t.Fatalf("remove file: %v", err)
	}
	apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+j.ID+"/file"), http.StatusGone, "file_missing")
}

func ids(js []apiv1.Job) []string {
	out := make([]string, 0, len(js))
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func TestListExports(t *testing.T) {
	t.Parallel()
	// Distinct created_at readings make "newest first" the reverse creation order.
	ts := newTestServer(t, testOpts{MaxAttempts: 1, Now: apptest.TickClock()})
	var created, failed []string
	for i := range 7 {
		body := `{"report":"demo","params":{"rows":3}}`
		if i%3 == 0 {
			body = `{"report":"demo","params":{"rows":3,"fail_first":1}}`
		}
		j := ts.Create(body)
		created = append(created, j.ID)
		if i%3 == 0 {
			failed = append(failed, j.ID)
		}
	}
	for _, id := range created {
		ts.WaitStatus(id, store.StatusSucceeded, store.StatusFailed)
	}
	newestFirst := slices.Clone(created)
	slices.Reverse(newestFirst)

	all := ts.List("")
	if got := ids(all.Exports); !slices.Equal(got, newestFirst) {
		t.Errorf("list order\n got %v\nwant %v", got, newestFirst)
	}
	if all.NextCursor != "" {
		t.Errorf("a complete list has next_cursor %q", all.NextCursor)
	}

	slices.Reverse(failed)
	for _, status := range []string{"FAILED", "failed"} {
		got := ts.List("?status=" + status)
		if !slices.Equal(ids(got.Exports), failed) {
			t.Errorf("?status=%s gave %v, want %v", status, ids(got.Exports), failed)
		}
		for _, j := range got.Exports {
			if store.Status(j.Status) != store.StatusFailed {
				t.Errorf("?status=%s listed a %s job", status, j.Status)
			}
		}
	}
	if got := ts.List("?status=SUCCEEDED"); len(got.Exports) != len(created)-len(failed) {
		t.Errorf("?status=SUCCEEDED gave %d jobs, want %d", len(got.Exports), len(created)-len(failed))
	}
	if got := ts.List("?status=EXPIRED"); len(got.Exports) != 0 {
		t.Errorf("?status=EXPIRED gave %v", ids(got.Exports))
	}

	// Pages of two follow the cursor through every job once, in order.
	var paged []string
	query := "?limit=2"
	for pages := 0; ; pages++ {
		if pages > len(created) {
			t.Fatalf("cursor does not end: %v", paged)
		}
		page := ts.List(query)
		if len(page.Exports) > 2 {
			t.Fatalf("limit=2 gave %d jobs", len(page.Exports))
		}
		paged = append(paged, ids(page.Exports)...)
		if page.NextCursor == "" {
			break
		}
		query = "?limit=2&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if !slices.Equal(paged, newestFirst) {
		t.Errorf("paged\n got %v\nwant %v", paged, newestFirst)
	}

	// The cursor also combines with a status filter.
	first := ts.List("?status=failed&limit=1")
	if len(first.Exports) != 1 || first.NextCursor == "" {
		t.Fatalf("?status=failed&limit=1: %v, cursor %q", ids(first.Exports), first.NextCursor)
	}
	rest := ts.List("?status=failed&limit=10&cursor=" + url.QueryEscape(first.NextCursor))
	if got := append(ids(first.Exports), ids(rest.Exports)...); !slices.Equal(got, failed) {
		t.Errorf("failed jobs paged %v, want %v", got, failed)
	}
}

func TestListExportsBadQuery(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	tests := []struct{ query, code string }{
		{"?status=DONE", "bad_status"},
		{"?limit=0", "bad_limit"},
		{"?limit=-1", "bad_limit"},
		{"?limit=1001", "bad_limit"},
		{"?limit=ten", "bad_limit"},
		{"?cursor=!!!", "bad_cursor"},
		{"?cursor=" + encodeB64("no-dot"), "bad_cursor"},
		{"?cursor=" + encodeB64("abc.id"), "bad_cursor"},
		{"?cursor=" + encodeB64("123."), "bad_cursor"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.query, "?"), func(t *testing.T) {
			apptest.CheckProblem(t, ts.Get("/api/v1/exports"+tt.query), http.StatusBadRequest, tt.code)
		})
	}
}

func TestCursors(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Now: apptest.TickClock()})
	var newestFirst []string
	for range 4 {
		newestFirst = slices.Insert(newestFirst, 0, ts.Create(`{"report":"demo","params":{"rows":3}}`).ID)
	}
	first := ts.List("?limit=1")
	if c := first.NextCursor; c == "" || strings.ContainsAny(c, "+/=") {
		t.Fatalf("next_cursor %q: want a URL-safe cursor", c)
	}
	if got := ids(ts.List("?cursor=" + first.NextCursor).Exports); !slices.Equal(got, newestFirst[1:]) {
		t.Errorf("after the first page: %v, want %v", got, newestFirst[1:])
	}

	// A cursor from before listings went by insertion order ("<created ms>.<id>") resumes
	// after its job while that job exists.
	j, err := ts.store.Get(context.Background(), newestFirst[1])
	if err != nil {
		t.Fatal(err)
	}
	legacy := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(j.CreatedAt.UnixMilli(), 10) + "." + j.ID))
	if got := ids(ts.List("?cursor=" + legacy).Exports); !slices.Equal(got, newestFirst[2:]) {
		t.Errorf("after a legacy cursor: %v, want %v", got, newestFirst[2:])
	}
	gone := base64.RawURLEncoding.EncodeToString([]byte("1700000000000.nosuchjob"))
	for _, c := range []string{gone, "!!", base64.RawURLEncoding.EncodeToString([]byte("-3")),
		base64.RawURLEncoding.EncodeToString([]byte("0")), base64.RawURLEncoding.EncodeToString([]byte("x.y"))} {
		apptest.CheckProblem(t, ts.Get("/api/v1/exports?cursor="+url.QueryEscape(c)), http.StatusBadRequest, "bad_cursor")
	}
}
