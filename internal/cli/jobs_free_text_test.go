package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sheetq/internal/apptest"
	"strings"
	"testing"
	"time"
)

// messy is an export's error as its source may word it: line breaks of every kind, a
// tab, and a terminal escape that would clear the screen.
const messy = "no such table: orders\nLINE 1: SELECT *\r\n  FROM orders\r\x1b[2J\tdone"

// messyFlat is messy as the human output shows it: one line.
const messyFlat = "no such table: orders LINE 1: SELECT * FROM orders [2J done"

// freeTextServer serves exports whose error, file name, parameters and events carry
// line breaks: j1 FAILED, j2 SUCCEEDED, j3 PENDING after a failed attempt, which the
// event stream then fails for good.
func freeTextServer(t *testing.T) (srv *httptest.Server, j1 string) {
	msg, _ := json.Marshal(messy)
	j1 = `{"id":"j1","status":"FAILED","report":"demo","params":{"note":"a\nb"},"attempt":3,"max_attempts":3,
		"error":{"code":"query","message":` + string(msg) + `}}`
	j2 := `{"id":"j2","status":"SUCCEEDED","report":"demo","params":{},"attempt":1,"max_attempts":3,
		"download_url":"/api/v1/exports/j2/file","file":{"name":"q1\r\nreport.xlsx","size":5,"sha256":"ab"}}`
	j3 := strings.Replace(strings.Replace(j1, `"FAILED"`, `"PENDING"`, 1), `"attempt":3`, `"attempt":1`, 1)
	j3 = strings.Replace(j3, `"j1"`, `"j3"`, 1)
	j3Failed := strings.Replace(j1, `"j1"`, `"j3"`, 1)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/exports":
			fmt.Fprint(w, `{"exports":[`+j1+`,`+j2+`]}`)
		case "/api/v1/exports/j1":
			fmt.Fprint(w, j1)
		case "/api/v1/exports/j2":
			fmt.Fprint(w, j2)
		case "/api/v1/exports/j3":
			fmt.Fprint(w, j3)
		case "/api/v1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			if r.URL.Query().Get("job") == "j3" {
				fmt.Fprintf(w, "id: 7\nevent: failed\ndata: {\"job\":%s,\"event\":{\"id\":7,\"type\":\"failed\",\"status\":\"FAILED\"}}\n\n",
					strings.ReplaceAll(j3Failed, "\n", ""))
			} else {
				fmt.Fprintf(w, "id: 5\nevent: failed\ndata: {\"job\":%s,\"event\":{\"id\":5,\"type\":\"failed\",\"status\":\"FAILED\"}}\n\n",
					strings.ReplaceAll(j1, "\n", ""))
				fmt.Fprint(w, "id: 6\nevent: note\ndata: first line\ndata: second\tline\n\n")
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, j1
}

// An export's error (and the other free text of the server: a file's name, a
// parameter's value, an event's data) is one line in the human output of jobs show,
// list, wait and events, whatever line breaks its source put in it, so that one field
// stays one line for grep and awk; --json keeps the server's text as it is.
func TestJobsHumanOutputKeepsFreeTextOnOneLine(t *testing.T) {
	srv, j1 := freeTextServer(t)
	s := []string{"--server", srv.URL}

	stdout, stderr, code := runCLI(t, append([]string{"jobs", "show", "j1"}, s...)...)
	if code != 0 || !strings.Contains(stdout, "\nerror:    query: "+messyFlat+"\n") || strings.Count(stdout, "\n") != 7 {
		t.Errorf("jobs show: exit %d, want the error on one line of 7\n%s%s", code, stdout, stderr)
	}
	stdout, _, code = runCLI(t, append([]string{"jobs", "show", "j2"}, s...)...)
	if code != 0 || !strings.Contains(stdout, "\nfile:      q1 report.xlsx (5 bytes)\n") {
		t.Errorf("jobs show of a file named with a line break: exit %d\n%s", code, stdout)
	}
	stdout, _, code = runCLI(t, append([]string{"jobs", "show", "j1", "--json"}, s...)...)
	var shown struct {
		Error struct{ Message string } `json:"error"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &shown) != nil || shown.Error.Message != messy {
		t.Errorf("jobs show --json: exit %d, message %q; want the server's %q", code, shown.Error.Message, messy)
	}
	var want strings.Builder
	if err := writeIndented(&want, []byte(j1)); err != nil || stdout != want.String() {
		t.Errorf("jobs show --json is not the server's JSON:\n%s", stdout)
	}

	stdout, _, code = runCLI(t, append([]string{"jobs", "list"}, s...)...)
	if code != 0 || strings.Count(stdout, "\n") != 3 || !strings.Contains(stdout, "  note=a b  ") {
		t.Errorf("jobs list: exit %d, want a header and two rows, note=a b\n%s", code, stdout)
	}

	stdout, stderr, code = runCLI(t, append([]string{"jobs", "wait", "j3"}, s...)...)
	if code != 1 || stdout != "export j3: PENDING (attempt 1 of 3) after query: "+messyFlat+"\nexport j3: FAILED (attempt 3 of 3)\n" {
		t.Errorf("jobs wait: exit %d, stdout %q; want 1 and two lines", code, stdout)
	}
	oneErrLine(t, "jobs wait", stderr)
	if !strings.HasSuffix(stderr, ": query: "+messyFlat+"\n") {
		t.Errorf("jobs wait: stderr %q, want the error on its one line without the escape", stderr)
	}

	events := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		out, errOut := &apptest.SyncBuffer{}, &apptest.SyncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, "test", append(append([]string{"jobs", "events"}, args...), s...), out, errOut)
		}()
		eventually(t, 10*time.Second, "two events", func() bool { return strings.Count(out.String(), "\n") >= 2 })
		cancel()
		<-done
		return out.String()
	}
	lines := strings.Split(strings.TrimSuffix(events(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "  j1                          FAILED, attempt 3/3, 0 rows, query: "+messyFlat) ||
		!strings.HasSuffix(lines[1], "  note            -                           first line second line") {
		t.Errorf("jobs events: want two lines, the error's and the data's, each on one\n%s", strings.Join(lines, "\n"))
	}
	out := events("--json")
	var first struct {
		Data struct {
			Job struct {
				Error struct{ Message string } `json:"error"`
			} `json:"job"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first); err != nil || first.Data.Job.Error.Message != messy ||
		!strings.Contains(out, `"data":"first line\nsecond\tline"`) {
		t.Errorf("jobs events --json: %v, message %q; want the server's\n%s", err, first.Data.Job.Error.Message, out)
	}
}
