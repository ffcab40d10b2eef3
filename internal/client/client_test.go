package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/internal/apiv1"
)

// A non-2xx answer becomes a *Problem: problem+json as the server wrote it, or the
// status line and a short body from something else (a proxy's page), on one line.
func TestProblemDecoding(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"problem", `{"status":422,"code":"invalid_param","param":"rows","title":"Unprocessable Entity","detail":"want an integer"}`, 422,
			"server: invalid_param: param rows: want an integer (HTTP 422)"},
		{"names the param", `{"status":422,"code":"invalid_param","param":"rows","detail":"rows: want an integer"}`, 422,
			"server: invalid_param: rows: want an integer (HTTP 422)"},
		{"plain text", "upstream\nnot reachable", 502, "server: upstream not reachable (HTTP 502)"},
		{"carriage returns", `{"status":409,"code":"conflict","detail":"one\r\ntwo\rthree"}`, 409,
			"server: conflict: one two three (HTTP 409)"},
		{"empty", "", 404, "server: 404 Not Found (HTTP 404)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			_, err := New(srv.URL, "", nil).Call(t.Context(), http.MethodGet, "/api/v1/exports", nil, nil)
			var p *Problem
			if !errors.As(err, &p) || p.Status != tt.status || err.Error() != tt.want {
				t.Fatalf("error %v (%T), want %q", err, err, tt.want)
			}
			if Refused(err) != (tt.status < 500) {
				t.Fatalf("Refused = %v for HTTP %d", Refused(err), tt.status)
			}
		})
	}
}

// CreateExport sends the very same request, key included, again after a 5xx, backing
// off, and not after a refusal: however many tries, one job. (A dropped connection is
// retried too; net/http itself resends a request with an Idempotency-Key once.)
func TestCreateExportRetriesWithOneKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys, tokens []string
	fails := 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		tokens = append(tokens, r.Header.Get("Authorization"))
		switch {
		case fails == 2:
			fails--
			w.WriteHeader(http.StatusServiceUnavailable)
		case fails == 1:
			fails--
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"id":"job1","status":"PENDING"}`)
		}
	}))
	t.Cleanup(srv.Close)
	var waits []time.Duration
	job, raw, err := New(srv.URL, "tok", nil).CreateExport(t.Context(), ExportRequest{Report: "demo", Params: map[string]string{"rows": "5"}}, "key-1",
		func(err error, wait time.Duration) { waits = append(waits, wait) })
	if err != nil || job.ID != "job1" || !strings.Contains(string(raw), "job1") {
		t.Fatalf("CreateExport: %+v %s %v", job, raw, err)
	}
	mu.Lock()
	gotKeys, gotTokens := slices.Clone(keys), slices.Clone(tokens)
	mu.Unlock()
	if !slices.Equal(gotKeys, []string{"key-1", "key-1", "key-1"}) {
		t.Fatalf("keys sent %q, want key-1 three times", gotKeys)
	}
	if gotTokens[2] != "Bearer tok" {
		t.Fatalf("Authorization %q", gotTokens[2])
	}
	if !slices.Equal(waits, []time.Duration{500 * time.Millisecond, time.Second}) {
		t.Fatalf("waits %v, want 500ms then 1s", waits)
	}

	var refusals atomic.Int32
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refusals.Add(1)
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"status":422,"code":"unknown_report","detail":"no report nope"}`)
	}))
	t.Cleanup(refuse.Close)
	_, _, err = New(refuse.URL, "", nil).CreateExport(t.Context(), ExportRequest{Report: "nope"}, "key-2", nil)
	if !Refused(err) || refusals.Load() != 1 {
		t.Fatalf("refusal: %v after %d requests, want one request", err, refusals.Load())
	}
}

// ReadEvents splits a stream into events: multi-line data joined with "\n", CRLF line
// ends, keep-alive comments skipped, and stops when told to.
func TestReadEvents(t *testing.T) {
	t.Parallel()
	stream := ": keep-alive\n\n" +
		"id: 7\r\nevent: started\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
		"event: progress\ndata: {}\n\n" +
		"id: 8\nevent: succeeded\ndata: x\n\n" +
		"id: 9\nevent: never\ndata: y\n\n"
	var got []Event
	err := ReadEvents(strings.NewReader(stream), func(e Event) bool {
		got = append(got, e)
		return e.Type != "succeeded"
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{"7", "started", []byte("{\"a\":\n1}")}, {"", "progress", []byte("{}")}, {"8", "succeeded", []byte("x")}}
	if len(got) != len(want) {
		t.Fatalf("got %d events %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Type != want[i].Type || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// Wait follows the job on the event stream, applying progress and the events that
// carry the job, until it is final.
func TestWaitFollowsTheStream(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/exports/j1":
			fmt.Fprint(w, `{"id":"j1","status":"PROCESSING","attempt":1}`)
		case "/api/v1/events":
			if r.URL.Query().Get("job") != "j1" {
				http.Error(w, "want ?job=j1", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: progress\ndata: {\"id\":\"j1\",\"rows\":5,\"total_rows\":10}\n\n")
			fmt.Fprint(w, "event: progress\ndata: {\"id\":\"other\",\"rows\":99}\n\n")
			fmt.Fprint(w, "id: 3\nevent: succeeded\ndata: {\"job\":{\"id\":\"j1\",\"status\":\"SUCCEEDED\",\"attempt\":1,\"progress\":{\"rows\":10}}}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // the client hangs up once the job is final
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	var seen []string
	job, err := New(srv.URL, "", nil).Wait(t.Context(), Job{ID: "j1", Status: "PENDING"}, func(j Job) {
		seen = append(seen, j.Status+" "+j.Rows())
	})
	if err != nil || job.Status != "SUCCEEDED" {
		t.Fatalf("Wait: %+v, %v", job, err)
	}
	want := []string{"PROCESSING 0", "PROCESSING 5/10", "SUCCEEDED 10"}
	if strings.Join(seen, ", ") != strings.Join(want, ", ") {
		t.Fatalf("updates %q, want %q", seen, want)
	}

	// A refusal of the stream is final: no polling.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := New(srv.URL, "", nil).Wait(ctx, Job{ID: "j2"}, nil); !Refused(err) {
		t.Fatalf("Wait for a stream the server refuses: %v, want the refusal", err)
	}
}

// Download saves the file through a .part file and only under its name when the sha256
// is the job's; a corrupt file is ErrCorrupt and leaves nothing; a 5xx is tried again.
func TestDownloadChecksSHA256(t *testing.T) {
	t.Parallel()
	body := []byte("PK\x03\x04 a spreadsheet")
	sum := sha256.Sum256(body)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "", nil)
	job := Job{ID: "j1", Status: "SUCCEEDED"}
	job.File = &apiv1.File{Name: "j1.xlsx", Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}

	dir := t.TempDir()
	out := filepath.Join(dir, "out.xlsx")
	name, err := c.Download(t.Context(), job, out)
	if err != nil || name != out {
		t.Fatalf("Download: %q, %v", name, err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != string(body) {
		t.Fatalf("saved %q, %v", b, err)
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("%d requests, want the 503 tried again once", n)
	}

	job.File.SHA256 = strings.Repeat("0", 64)
	bad := filepath.Join(dir, "bad.xlsx")
	if _, err := c.Download(t.Context(), job, bad); !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "downloaded file is corrupt: sha256 ") {
		t.Fatalf("corrupt download: %v, want ErrCorrupt", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("a corrupt download left files: %v", entries)
	}

	// Into a folder that does not exist: a SaveError, not the server's fault.
	var se *SaveError
	if _, err := c.Download(t.Context(), job, filepath.Join(dir, "no", "x.xlsx")); !errors.As(err, &se) {
		t.Fatalf("unwritable output: %v (%T), want a *SaveError", err, err)
	}
}

// A download with no usable name from the server (no Content-Disposition, no file name
// in the job) is saved as <id> with the extension of the job's format.
func TestDownloadFallbackNameHasTheFormatsExtension(t *testing.T) {
	body := []byte("id\r\n1\r\n")
	sum := sha256.Sum256(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "", nil)
	t.Chdir(t.TempDir())
	for format, want := range map[string]string{"csv": "j1.csv", "xlsx": "j1.xlsx", "": "j1.xlsx", "../x": "j1.xlsx"} {
		job := Job{ID: "j1", Status: "SUCCEEDED"}
		job.Format = format
		job.File = &apiv1.File{Name: "", Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}
		name, err := c.Download(t.Context(), job, "")
		if err != nil || name != want {
			t.Errorf("format %q: saved as %q, %v; want %s", format, name, err, want)
		}
		os.Remove(name)
	}
}
