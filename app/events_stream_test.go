package app

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/app/events"
	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/store"
)

// streamWait bounds every wait on a stream; reaching it is a failure, never a result.
const streamWait = 20 * time.Second

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	LastID string // the stream's last event id once this event is dispatched
	HasID  bool   // whether the event carried an id field itself
	Type   string
	Data   string
}

// sseClient reads an event stream over a real connection on its own goroutine, parsing
// it as the WHATWG HTML spec says an EventSource does.
type sseClient struct {
	t      *testing.T
	res    *http.Response
	cancel context.CancelFunc
	events chan sseEvent
	ended  chan struct{} // closed when the stream ends; err says how
	err    error

	mu       sync.Mutex
	lastID   string
	retry    int
	comments int
}

// openEvents opens GET /api/v1/events+query, with a Last-Event-ID header when lastID is
// set, and requires a 200 event stream.
func openEvents(t *testing.T, ts *testServer, query, lastID string) *sseClient {
	t.Helper()
	return openEventsWith(t, ts.HC, ts.URL, query, lastID)
}

func openEventsWith(t *testing.T, hc *http.Client, base, query, lastID string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /api/v1/events%s: %v", query, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		t.Fatalf("GET /api/v1/events%s: status %d; body %s", query, res.StatusCode, b)
	}
	c := &sseClient{t: t, res: res, cancel: cancel, events: make(chan sseEvent, 4096), ended: make(chan struct{})}
	go c.read()
	t.Cleanup(c.close)
	return c
}

// close disconnects, as a client going away does.
func (c *sseClient) close() {
	c.cancel()
	c.res.Body.Close()
	<-c.ended
}

// read parses the stream: lines end in CRLF, LF or CR; a blank line dispatches; a line
// starting with ':' is a comment; "field: value" loses one space after the colon; an id
// sets the last event id even when no event is dispatched.
func (c *sseClient) read() {
	defer close(c.ended)
	br := bufio.NewReader(c.res.Body)
	var (
		data       strings.Builder
		typ, idBuf string
		hasID      bool
	)
	for {
		line, err := readSSELine(br)
		if err != nil {
			c.err = err
			return
		}
		if line == "" {
			c.mu.Lock()
			c.lastID = idBuf
			c.mu.Unlock()
			if data.Len() > 0 {
				c.events <- sseEvent{LastID: idBuf, HasID: hasID, Type: cmp.Or(typ, "message"),
					Data: strings.TrimSuffix(data.String(), "\n")}
			}
			data.Reset()
			typ, hasID = "", false
			continue
		}
		if line[0] == ':' {
			c.mu.Lock()
			c.comments++
			c.mu.Unlock()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf, hasID = value, true
			}
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 && !strings.HasPrefix(value, "+") {
				c.mu.Lock()
				c.retry = n
				c.mu.Unlock()
			}
		}
	}
}

func readSSELine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		ch, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		switch ch {
		case '\n':
			return string(b), nil
		case '\r':
			if next, err := br.Peek(1); err == nil && next[0] == '\n' {
				_, _ = br.ReadByte()
			}
			return string(b), nil
		}
		b = append(b, ch)
	}
}

// lastEventID is what an EventSource would send as Last-Event-ID on reconnecting.
func (c *sseClient) lastEventID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastID
}

// next returns the next event, failing the test if none comes.
func (c *sseClient) next() sseEvent {
	c.t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-c.ended:
		select {
		case ev := <-c.events:
			return ev
		default:
		}
		c.t.Fatalf("stream ended while waiting for an event: %v", c.err)
	case <-time.After(streamWait):
		c.t.Fatalf("no event within %s", streamWait)
	}
	return sseEvent{}
}

// nextState returns the next event that is not progress.
func (c *sseClient) nextState() sseEvent {
	c.t.Helper()
	for {
		if ev := c.next(); ev.Type != "progress" {
			return ev
		}
	}
}

// waitEnd waits until the server ends the stream.
func (c *sseClient) waitEnd() {
	c.t.Helper()
	select {
	case <-c.ended:
	case <-time.After(streamWait):
		c.t.Fatalf("stream still open after %s", streamWait)
	}
}

// stateEvent decodes a state event's data and checks that it agrees with its SSE fields.
func stateEvent(t *testing.T, ev sseEvent) apiv1.StateEvent {
	t.Helper()
	var d apiv1.StateEvent
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		t.Fatalf("event %s data: %v: %s", ev.Type, err, ev.Data)
	}
	if !ev.HasID || ev.LastID != strconv.FormatInt(d.Event.ID, 10) {
		t.Fatalf("event %s: id field %q (present %v), data says %d", ev.Type, ev.LastID, ev.HasID, d.Event.ID)
	}
	if d.Event.Type != ev.Type {
		t.Fatalf("event field %q, data says %q", ev.Type, d.Event.Type)
	}
	if d.Job == nil || d.Job.ID == "" {
		t.Fatalf("event %s without its job: %s", ev.Type, ev.Data)
	}
	return d
}

// change is a state event as the tests compare them.
type change struct{ Job, Type string }

func (c change) String() string { return c.Type + " " + c.Job }

// nextChange reads the next state event and returns what it says.
func (c *sseClient) nextChange() (change, apiv1.StateEvent) {
	c.t.Helper()
	d := stateEvent(c.t, c.nextState())
	return change{d.Job.ID, d.Event.Type}, d
}

// slowJob is a demo export that runs until it is cancelled.
const slowJob = `{"report":"demo","params":{"rows":100000,"seconds":600}}`

// TestEventsReplayAfterReconnect is the reconnect contract: a client that drops out in the
// middle of a job and comes back with Last-Event-ID receives exactly the three changes it
// missed, in order, without duplicates, and then live events.
func TestEventsReplayAfterReconnect(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ctx := context.Background()

	first := openEvents(t, ts, "", "")
	// Both workers busy with jobs that run until cancelled: new jobs then stay PENDING,
	// and every change below is one the test makes itself.
	a := ts.Create(slowJob)
	a2 := ts.Create(slowJob)
	defer ts.cancel(a.ID)
	defer ts.cancel(a2.ID)
	started := map[string]bool{}
	for len(started) < 2 {
		ch, d := first.nextChange()
		if ch.Type == store.EventStarted {
			started[ch.Job] = true
			if store.Status(d.Job.Status) != store.StatusProcessing || d.Event.Attempt != 1 {
				t.Errorf("started event: job %s attempt %d", d.Job.Status, d.Event.Attempt)
			}
		}
	}
	if !started[a.ID] || !started[a2.ID] {
		t.Fatalf("started %v, want %s and %s", started, a.ID, a2.ID)
	}
	lastID := first.lastEventID()
	first.close()

	// Three changes while disconnected.
	b := ts.Create(`{"report":"demo","params":{"rows":5}}`)
	c := ts.Create(`{"report":"demo","params":{"rows":5}}`)
	if _, err := ts.engine.Cancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	missed := []change{{b.ID, store.EventAccepted}, {c.ID, store.EventAccepted}, {b.ID, store.EventCanceled}}

	second := openEvents(t, ts, "", lastID)
	var got []change
	prev, _ := strconv.ParseInt(lastID, 10, 64)
	for range missed {
		ch, d := second.nextChange()
		got = append(got, ch)
		if d.Event.ID <= prev {
			t.Errorf("event %d after %d: out of order or repeated", d.Event.ID, prev)
		}
		prev = d.Event.ID
	}
	if !slices.Equal(got, missed) {
		t.Fatalf("replayed %v, want %v", got, missed)
	}

	// Live: the next event is the next change, not a repeat.
	if _, err := ts.engine.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	ch, d := second.nextChange()
	if want := (change{c.ID, store.EventCanceled}); ch != want || d.Event.ID <= prev {
		t.Fatalf("live event %v (id %d after %d), want %v", ch, d.Event.ID, prev, want)
	}
	if store.Status(d.Job.Status) != store.StatusCanceled || store.Status(d.Event.Status) != store.StatusCanceled {
		t.Errorf("canceled event: job %s, event %s", d.Job.Status, d.Event.Status)
	}

	// ?last_event_id= does the same for clients that cannot set headers.
	third := openEvents(t, ts, "?last_event_id="+lastID, "")
	for _, want := range append(missed, change{c.ID, store.EventCanceled}) {
		if ch, _ := third.nextChange(); ch != want {
			t.Fatalf("replay by query: %v, want %v", ch, want)
		}
	}
}

// TestEventsSnapshotAfterPruning: when the events a client missed are gone, the stream
// starts with a snapshot of the unfinished jobs, and goes on live after it.
func TestEventsSnapshotAfterPruning(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	ctx := context.Background()
	a := ts.Create(slowJob)
	b := ts.Create(`{"report":"demo","params":{"rows":5}}`)
	ts.WaitStatus(b.ID, store.StatusSucceeded)
	ts.WaitStatus(a.ID, store.StatusProcessing)

	all, _, err := ts.store.EventsSince(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 5 { // a: accepted, started; b: accepted, started, succeeded
		t.Fatalf("%d events, want at least 5", len(all))
	}
	// Retention's work, done behind the store's back: the two oldest events go.
	db, err := sql.Open("sqlite", "file:"+ts.dir.DB()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DELETE FROM job_events WHERE id <= ?`, all[1].ID); err != nil {
		t.Fatal(err)
	}
	newest := all[len(all)-1].ID

	// The client saw only the first event: the second is lost, so a snapshot comes first.
	s := openEvents(t, ts, "", strconv.FormatInt(all[0].ID, 10))
	ev := s.next()
	if ev.Type != "snapshot" {
		t.Fatalf("first event %q, want snapshot: %s", ev.Type, ev.Data)
	}
	if !ev.HasID || ev.LastID != strconv.FormatInt(newest, 10) {
		t.Errorf("snapshot id %q (present %v), want %d, the newest event", ev.LastID, ev.HasID, newest)
	}
	var snap apiv1.Snapshot
	if err := json.Unmarshal([]byte(ev.Data), &snap); err != nil {
		t.Fatalf("snapshot data: %v: %s", err, ev.Data)
	}
	if len(snap.Jobs) != 1 || snap.Jobs[0].ID != a.ID || store.Status(snap.Jobs[0].Status) != store.StatusProcessing {
		t.Fatalf("snapshot %s, want just the running job %s", ev.Data, a.ID)
	}
	// Live after the snapshot, not the stale history before it.
	ts.cancel(a.ID)
	ch, d := s.nextChange()
	if want := (change{a.ID, store.EventCancelRequested}); ch != want || d.Event.ID <= newest {
		t.Fatalf("after the snapshot: %v (id %d), want %v after %d", ch, d.Event.ID, want, newest)
	}

	// A client that missed nothing pruned (it saw the event just before the oldest one
	// left) replays without a snapshot.
	r := openEvents(t, ts, "", strconv.FormatInt(all[1].ID, 10))
	ev = r.nextState()
	if ev.Type == "snapshot" {
		t.Fatalf("snapshot for a client that missed nothing pruned")
	}
	if d := stateEvent(t, ev); d.Event.ID != all[2].ID || d.Event.Type != all[2].Type {
		t.Fatalf("first replayed %d %s, want %d %s", d.Event.ID, d.Event.Type, all[2].ID, all[2].Type)
	}

	// An id from no stream of this server (ahead of the log) gets a snapshot too.
	f := openEvents(t, ts, "", strconv.FormatInt(newest+1000, 10))
	if ev := f.next(); ev.Type != "snapshot" {
		t.Fatalf("id ahead of the log: first event %q, want snapshot", ev.Type)
	}
}

// smallSendBuffers shrinks each accepted connection's socket send buffer, so that a
// client that stops reading blocks the server's writes after kilobytes, not megabytes.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestEventsStalledClientIsDropped: a client that never reads does not hold up the
// engine; its buffer overflows, the hub drops it, and its connection is closed.
func TestEventsStalledClientIsDropped(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Hub: events.Config{Buffer: 4}})
	ctx := context.Background()

	hs := httptest.NewUnstartedServer(ts.Handler())
	hs.Listener = smallSendBuffers{hs.Listener}
	hs.Start()
	defer hs.Close()
	var dialer net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, hs.URL+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}

	// Not a byte is read from res.Body until the hub has given up on it.
	var ids []string
	for ts.hub.Stats().Dropped == 0 {
		if len(ids) == 1000 {
			t.Fatalf("stalled client still subscribed after %d jobs", len(ids))
		}
		ids = append(ids, ts.Create(`{"report":"demo","params":{"rows":1}}`).ID)
	}
	t.Logf("the hub dropped the stalled client after %d jobs", len(ids))
	apptest.WaitFor(t, time.Minute, func() (bool, string) {
		counts, err := ts.store.Counts(ctx)
		if err != nil {
			return false, err.Error()
		}
		return counts[store.StatusSucceeded] == len(ids), fmt.Sprintf("of %d jobs: %v", len(ids), counts)
	})

	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, res.Body)
		ended <- err
	}()
	select {
	case err := <-ended:
		if rctx.Err() != nil {
			t.Fatalf("read ended by the test, not the server: %v", err)
		}
	case <-time.After(streamWait):
		t.Fatalf("the stalled client's connection is still open")
	}
}

// TestEventsJobFilter: ?job= delivers that job's events only, live and replayed, and an
// unknown job is a 404.
func TestEventsJobFilter(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Hub: events.Config{ProgressEvery: 10 * time.Millisecond}})
	ctx := context.Background()
	a := ts.Create(slowJob)
	ts.WaitStatus(a.ID, store.StatusProcessing)

	s := openEvents(t, ts, "?job="+a.ID, "")
	b := ts.Create(`{"report":"demo","params":{"rows":2000,"seconds":0.5}}`)
	ts.WaitStatus(b.ID, store.StatusSucceeded)
	ts.cancel(a.ID)
	for {
		ev := s.next()
		if ev.Type == "progress" {
			var p apiv1.ProgressEvent
			if err := json.Unmarshal([]byte(ev.Data), &p); err != nil || p.ID != a.ID {
				t.Fatalf("progress of another job on a filtered stream: %s (%v)", ev.Data, err)
			}
			continue
		}
		d := stateEvent(t, ev)
		if d.Job.ID != a.ID {
			t.Fatalf("%s event of job %s on a stream for %s", ev.Type, d.Job.ID, a.ID)
		}
		if ev.Type == store.EventCanceled {
			break
		}
	}

	// Replayed from the start: exactly a's events.
	stored, err := ts.store.Events(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := openEvents(t, ts, "?job="+a.ID, "0")
	for _, e := range stored {
		ch, d := r.nextChange()
		if ch != (change{a.ID, e.Type}) || d.Event.ID != e.ID {
			t.Fatalf("replayed %v id %d, want %s id %d", ch, d.Event.ID, e.Type, e.ID)
		}
	}

	apptest.CheckProblem(t, ts.Get("/api/v1/events?job=nope"), http.StatusNotFound, "not_found")
}

// TestEventsProgressCoalesced: a running job's progress arrives as progress events without
// ids, far fewer than its rows, with the latest figures.
func TestEventsProgressCoalesced(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	s := openEvents(t, ts, "", "")
	const rows = 5000
	j := ts.Create(fmt.Sprintf(`{"report":"demo","params":{"rows":%d,"seconds":1}}`, rows))
	var (
		progress  []apiv1.ProgressEvent
		lastState string
	)
	for {
		ev := s.next()
		if ev.Type != "progress" {
			d := stateEvent(t, ev)
			if d.Job.ID == j.ID {
				lastState = ev.LastID
				if ev.Type == store.EventSucceeded {
					break
				}
			}
			continue
		}
		if ev.HasID || ev.LastID != lastState {
			t.Fatalf("progress event moved the last event id to %q (present %v); last state event %q",
				ev.LastID, ev.HasID, lastState)
		}
		var p apiv1.ProgressEvent
		if err := json.Unmarshal([]byte(ev.Data), &p); err != nil {
			t.Fatalf("progress data: %v: %s", err, ev.Data)
		}
		if p.ID != j.ID || p.TotalRows == nil || *p.TotalRows != rows || p.Rows < 0 || p.Rows > rows {
			t.Fatalf("progress %s, want id %s and total_rows %d", ev.Data, j.ID, rows)
		}
		if n := len(progress); n > 0 && p.Rows < progress[n-1].Rows {
			t.Fatalf("progress went back from %d to %d", progress[n-1].Rows, p.Rows)
		}
		progress = append(progress, p)
	}
	if len(progress) == 0 || len(progress) > rows/20 {
		t.Fatalf("%d progress events for %d rows, want at least one and far fewer than rows", len(progress), rows)
	}
}

// TestEventsStreamHeaders: the stream's headers, the retry hint first with the current
// position, keep-alive comments, and a refused malformed Last-Event-ID.
func TestEventsStreamHeaders(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Hub: events.Config{KeepAlive: 10 * time.Millisecond}})
	j := ts.Create(`{"report":"demo","params":{"rows":1}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	head, err := ts.store.EventHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/events", nil)
	res, err := ts.HC.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for k, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	br := bufio.NewReader(res.Body)
	var lines []string
	for len(lines) < 3 {
		l, err := readSSELine(br)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if want := []string{"retry: 3000", "id: " + head, ""}; !slices.Equal(lines, want) {
		t.Fatalf("stream starts %q, want %q", lines, want)
	}
	for {
		l, err := readSSELine(br)
		if err != nil {
			t.Fatal(err)
		}
		if l == ": keep-alive" {
			break
		}
		if l != "" {
			t.Fatalf("idle stream sent %q", l)
		}
	}

	apptest.CheckProblem(t, ts.Request(http.MethodGet, "/api/v1/events", nil, http.Header{"Last-Event-ID": {"abc"}}),
		http.StatusBadRequest, "bad_last_event_id")
	apptest.CheckProblem(t, ts.Get("/api/v1/events?last_event_id=-1"), http.StatusBadRequest, "bad_last_event_id")
}

// TestEventsEndWhenHubStops: stopping the hub ends open streams, and refuses new ones.
func TestEventsEndWhenHubStops(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	s := openEvents(t, ts, "", "")
	ts.hub.Stop()
	s.waitEnd()
	apptest.CheckProblem(t, ts.Get("/api/v1/events"), http.StatusServiceUnavailable, "shutting_down")
}

// TestRunEndsEventStreams: a graceful shutdown is not held up by open event streams.
func TestRunEndsEventStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url, stop := startRun(t, Config{
		Addr: "127.0.0.1:0", DataDir: dir, ReportsDir: t.TempDir(), Version: "test",
		Logger: slog.New(slog.DiscardHandler),
	}, streamWait)
	s := openEventsWith(t, http.DefaultClient, url, "", "")

	ended := make(chan error, 1)
	go func() { ended <- stop() }()
	s.waitEnd()
	if err := <-ended; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

// Deleting an export tells the open streams, so pages drop it without a reload; the
// message has no id (the job's stored events are gone with it) and only concerns the job.
func TestEventsStreamTellsOfDeletion(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	j := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	all := openEvents(t, ts, "", "")
	one := openEvents(t, ts, "?job="+j.ID, "")
	other := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	ts.WaitStatus(other.ID, store.StatusSucceeded)

	if res := ts.Request(http.MethodDelete, "/api/v1/exports/"+j.ID, nil, nil); res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", res.StatusCode, res.Body)
	}
	for name, c := range map[string]*sseClient{"all": all, "?job=": one} {
		for {
			ev := c.next()
			if ev.Type != "deleted" {
				continue
			}
			if ev.HasID {
				t.Errorf("%s: deleted event has an id %q", name, ev.LastID)
			}
			var d struct{ ID string }
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d.ID != j.ID {
				t.Errorf("%s: deleted event data %s, want id %s", name, ev.Data, j.ID)
			}
			break
		}
	}
}

// A HEAD request gets the stream's headers and the connection back at once: the server
// drops a HEAD answer's body without an error, so a stream that went on would hold the
// connection, which the client reuses for its next request, for good.
func TestEventsHeadEndsAtOnce(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	for _, path := range []string{"/api/v1/events", "/reports/events"} {
		res := ts.Request(http.MethodHead, path, nil, nil)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD %s: %d %q", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/healthz", nil)
		next, err := ts.HC.Do(req)
		cancel()
		if err != nil {
			t.Fatalf("the request after HEAD %s: %v", path, err)
		}
		next.Body.Close()
	}
	if res := ts.Request(http.MethodHead, "/api/v1/events?last_event_id=abc", nil, nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("HEAD with a malformed id: %d, want 400", res.StatusCode)
	}
}

// A query string the stream cannot read, or one that names its job or its last event
// twice, is refused before the stream starts, instead of dropping what it cannot read
// (a replay from ?last_event_id= lost) or keeping the first value without a word.
func TestEventsBadQuery(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.HC = &http.Client{Timeout: 5 * time.Second} // a stream started by mistake fails the test, not hangs it
	for _, q := range []string{"?a;last_event_id=1", "?last_event_id=1%zz", "?last_event_id=1&last_event_id=2", "?job=a&job=b"} {
		p := apptest.CheckProblem(t, ts.Get("/api/v1/events"+q), http.StatusBadRequest, "bad_query")
		t.Logf("%s: %v", q, p["detail"])
	}
	apptest.CheckProblem(t, ts.Request(http.MethodGet, "/api/v1/events", nil, http.Header{"Last-Event-ID": {"1", "2"}}),
		http.StatusBadRequest, "bad_last_event_id")
}
