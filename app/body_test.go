package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/storetest"
)

// rawRequest is a request sent by hand on its own connection, so that a test decides when
// each byte of its body goes out.
type rawRequest struct {
	t    testing.TB
	conn net.Conn
	body string
	sent int
}

// startRaw sends the headers of a POST to path and the first n bytes of body.
func startRaw(t testing.TB, baseURL, path, contentType, body string, n int) *rawRequest {
	t.Helper()
	host := strings.TrimPrefix(baseURL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		path, host, contentType, len(body))
	r := &rawRequest{t: t, conn: conn, body: body}
	r.send(n)
	return r
}

// send writes the next n bytes of the body.
func (r *rawRequest) send(n int) {
	r.t.Helper()
	if _, err := io.WriteString(r.conn, r.body[r.sent:r.sent+n]); err != nil {
		r.t.Fatalf("write body: %v", err)
	}
	r.sent += n
}

// finish sends the rest of the body and reads the answer.
func (r *rawRequest) finish() apptest.Response {
	r.t.Helper()
	r.send(len(r.body) - r.sent)
	return r.answer()
}

// answer reads the server's answer.
func (r *rawRequest) answer() apptest.Response {
	r.t.Helper()
	res, err := http.ReadResponse(bufio.NewReader(r.conn), nil)
	if err != nil {
		r.t.Fatalf("read answer: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.t.Fatalf("read answer body: %v", err)
	}
	return apptest.Response{Response: res, Body: b}
}

// bodyPosts are the requests whose bodies start an export: the API and the page's form.
var bodyPosts = []struct {
	name, path, contentType, body string
	accepted                      int
}{
	{"api", "/api/v1/exports", "application/json", `{"report":"demo","params":{"rows":5}}`, http.StatusAccepted},
	{"form", "/exports", "application/x-www-form-urlencoded", "report=demo&rows=5&idempotency_key=form-trickle", http.StatusSeeOther},
}

// While a client sends its body slowly, the request does not count as foreground work:
// workers' Yield is not held back by the client's pace. Only once the body is in does
// accepting it take the foreground, and it gives it back when answered.
func TestTricklingBodyHoldsNoForeground(t *testing.T) {
	t.Parallel()
	for _, p := range bodyPosts {
		t.Run(p.name, func(t *testing.T) {
			ts := newTestServer(t, testOpts{Idle: true})
			req := startRaw(t, ts.URL, p.path, p.contentType, p.body, 5)
			// The handler is blocked reading the body: the client has not sent the rest.
			apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
				return ts.mw.BodiesReading() > 0, "no handler is reading the body"
			})
			if n := ts.engine.Config().Gate.Active(); n != 0 {
				t.Fatalf("%d foreground spans while the client is still sending its body; want 0", n)
			}
			req.send(1)
			if n := ts.engine.Config().Gate.Active(); n != 0 {
				t.Fatalf("%d foreground spans after one more byte; want 0", n)
			}
			if res := req.finish(); res.StatusCode != p.accepted {
				t.Fatalf("status %d, want %d; body %s", res.StatusCode, p.accepted, res.Body)
			}
			if n := ts.jobCount(); n != 1 {
				t.Fatalf("%d jobs, want 1", n)
			}
			apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
				return ts.engine.Config().Gate.Active() == 0, "the foreground span did not end with the request"
			})
		})
	}
}

// A body that does not arrive within the body deadline gets 408 and creates no job, on
// the API (problem+json) and the form alike; the connection is closed.
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	for _, p := range bodyPosts {
		t.Run(p.name, func(t *testing.T) {
			ts := newTestServer(t, testOpts{Idle: true, BodyTimeout: 300 * time.Millisecond})
			res := startRaw(t, ts.URL, p.path, p.contentType, p.body, 5).answer()
			if p.name == "api" {
				apptest.CheckProblem(t, res, http.StatusRequestTimeout, "request_timeout")
			} else if res.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("status %d, want 408; body %s", res.StatusCode, res.Body)
			}
			if !res.Close {
				t.Error("the connection stays open after a body timed out")
			}
			if n := ts.jobCount(); n != 0 {
				t.Fatalf("%d jobs after a timed-out body, want 0", n)
			}
		})
	}
}

// The body deadline covers the body only: a request whose body is in may take longer than
// the deadline (here: queued behind a commit that waits for a database lock held by
// another program) and still succeeds, and an event stream, which has no body, outlives it.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	ts := newTestServer(t, testOpts{Idle: true, BodyTimeout: timeout, BusyTimeout: 30 * time.Second})
	events := openEvents(t, ts, "", "")
	release := storetest.HoldWriteLock(t, ts.dir.DB())

	// The first request's commit waits for the lock; the second queues behind it, where
	// a cancelled request context would drop it (TestClientGoneDuringEnqueue).
	first := make(chan apptest.Response, 1)
	go func() { first <- ts.Post(`{"report":"demo","params":{"rows":5}}`, "deadline-1") }()
	apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
		return ts.store.BatchStats().Commits > 0, "the first request's commit has not started"
	})
	queued := startRaw(t, ts.URL, "/api/v1/exports", "application/json", `{"report":"demo","params":{"rows":6}}`, 0)
	queued.send(len(queued.body))
	apptest.WaitFor(t, 15*time.Second, func() (bool, string) {
		return ts.store.BatchStats().Waiting == 1, "the second request is not queued"
	})
	// A body started now that never ends times out: by then the queued request's
	// deadline has passed too.
	later := startRaw(t, ts.URL, "/api/v1/exports", "application/json", `{"report":"demo"}`, 3)
	apptest.CheckProblem(t, later.answer(), http.StatusRequestTimeout, "request_timeout")

	release()
	if res := <-first; res.StatusCode != http.StatusAccepted {
		t.Fatalf("first request: status %d, want 202; body %s", res.StatusCode, res.Body)
	}
	res := queued.answer()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("a request whose body was in: status %d after its wait, want 202; body %s", res.StatusCode, res.Body)
	}
	j := apptest.DecodeJob(t, res)
	for {
		c, _ := events.nextChange()
		if c.Job == j.ID {
			break
		}
	}
}

// BenchmarkExportWithTricklingClients measures export throughput alone ("quiet") and
// while 20 clients send request bodies a byte a second ("20-trickling"), side by side in
// one process. The trickling clients must not slow the exports: see BENCHMARKS.md.
//
//	go test -run '^$' -bench ExportWithTricklingClients -benchtime 3x ./app
func BenchmarkExportWithTricklingClients(b *testing.B) {
	const rows = 200_000
	s, hs := startTestApp(b, testOpts{})
	for _, clients := range []int{0, 20} {
		name := "quiet"
		if clients > 0 {
			name = fmt.Sprintf("%d-trickling", clients)
		}
		b.Run(name, func(b *testing.B) {
			answered := trickle(b, hs.URL, clients, time.Second)
			// Every client is in the middle of its body before the clock starts.
			for s.mw.BodiesReading() < int64(clients) {
				time.Sleep(10 * time.Millisecond)
			}
			n := 0
			for b.Loop() {
				exportAndWait(b, hs.Client(), hs.URL, rows)
				n++
			}
			b.ReportMetric(float64(rows*n)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(answered.Load()), "trickles_answered")
		})
	}
}

// trickle starts n clients that each send an export request's headers and then its 60 KB
// body one byte per interval; a client whose request is answered (408) starts another.
// They stop when b ends; answered counts the requests the server answered.
func trickle(b *testing.B, baseURL string, n int, interval time.Duration) *atomic.Int64 {
	answered := new(atomic.Int64)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() {
		stop()
		wg.Wait()
	})
	host := strings.TrimPrefix(baseURL, "http://")
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				conn, err := net.Dial("tcp", host)
				if err != nil {
					b.Errorf("trickle: %v", err)
					return
				}
				fmt.Fprintf(conn, "POST /api/v1/exports HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
					"Content-Length: 60000\r\n\r\n{", host)
				gone := make(chan struct{})
				go func() {
					if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
						answered.Add(1)
					}
					close(gone)
				}()
				tick := time.NewTicker(interval)
			send:
				for {
					select {
					case <-ctx.Done():
						break send
					case <-gone:
						break send
					case <-tick.C:
						conn.Write([]byte(" "))
					}
				}
				tick.Stop()
				conn.Close()
				<-gone
			}
		})
	}
	return answered
}

// exportAndWait creates an export of rows demo rows and waits until it has succeeded.
func exportAndWait(b *testing.B, hc *http.Client, baseURL string, rows int) {
	res, err := hc.Post(baseURL+"/api/v1/exports", "application/json",
		strings.NewReader(fmt.Sprintf(`{"report":"demo","params":{"rows":%d}}`, rows)))
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		b.Fatalf("create: status %d; body %s", res.StatusCode, body)
	}
	loc := res.Header.Get("Location")
	for {
		res, err := hc.Get(baseURL + loc)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case strings.Contains(string(body), `"status": "`+string(store.StatusSucceeded)+`"`):
			return
		case strings.Contains(string(body), `"status": "`+string(store.StatusFailed)+`"`):
			b.Fatalf("export failed: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
