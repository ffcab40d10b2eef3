package events

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

// Both job stores serve the hub.
var (
	_ Log = (*store.Store)(nil)
	_ Log = (*store.Store)(nil)
)

// wait bounds every wait in these tests; reaching it is a failure, never a result.
const wait = 30 * time.Second

// TestHubsOnTwoNodesDeliverLateCommit is issue 17's SSE contract on PostgreSQL: two
// nodes (two stores of one database, a hub each) serve streams over HTTP. Transaction A
// appends an event and stays open while B, on the other node, appends a later one and
// commits; every stream on either node gets A's event, then B's, once each, after A
// commits (an "id > last id" tailer would send B and never A). A client that read part
// of the stream from node 1 reconnects to node 2 with its Last-Event-ID and gets the
// rest, with no gap and no duplicate, also from a hub whose tailer is behind that id.
func TestHubsOnTwoNodesDeliverLateCommit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshSchema(t)
	node1, node2 := openPG(t, dsn), openPG(t, dsn)
	hub1, url1 := startHub(t, node1, 20*time.Millisecond)
	hub2, url2 := startHub(t, node2, 20*time.Millisecond)
	// A third hub on node 2 reads only when told: its tailer stays behind the others.
	lagging, url3 := startHub(t, node2, time.Hour)
	s1, s2 := openStream(t, url1, "", ""), openStream(t, url2, "", "")
	part := openStream(t, url1, "", "") // reads part, then moves to node 2

	j := enqueueExport(t, node1)
	for _, s := range []*stream{s1, s2, part} {
		s.expect(change{j.ID, store.EventAccepted})
	}

	txA := pgtest.EventInOpenTransaction(t, dsn, j.ID, "late", "PENDING")
	if err := node2.AppendEvent(ctx, j.ID, "b", nil); err != nil {
		t.Fatal(err)
	}
	// Both tailers finish a read that began after B committed, while A is still open:
	// a tailer that skips A would have published B by then.
	for _, h := range []*Hub{hub1, hub2} {
		n := h.reads.Load() + 2
		waitFor(t, "a tailer's reads", func() bool { return h.reads.Load() >= n })
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	k := enqueueExport(t, node2)

	rest := []change{{j.ID, "late"}, {j.ID, "b"}, {k.ID, store.EventAccepted}}
	for _, s := range []*stream{s1, s2} {
		s.expect(rest...)
	}
	// The client drops after A's event; node 2 continues from its last id.
	part.expect(rest[0])
	last := part.lastID
	if !strings.Contains(last, ".") {
		t.Fatalf("Last-Event-ID %q: want PostgreSQL's <xid>.<id> cursor", last)
	}
	part.close()
	moved := openStream(t, url2, "", last)
	moved.expect(rest[1:]...)
	oneJob := openStream(t, url2, "?job="+j.ID, last)
	oneJob.expect(rest[1])
	// The lagging hub's tailer now publishes everything after its start, all of it at or
	// behind what this stream replayed: the stream must send none of it again.
	behind := openStream(t, url3, "", last)
	behind.expect(rest[1:]...)
	n := lagging.reads.Load() + 1
	lagging.Notify()
	waitFor(t, "the lagging tailer's read", func() bool { return lagging.reads.Load() >= n })

	// One more event, from node 1, is the next one on every stream: none was sent twice,
	// none is still on its way.
	m := enqueueExport(t, node1)
	// Told again and again, as its poll would: one read may come while a transaction of
	// another test on the same server keeps m's event below the commit-safe horizon.
	stopNotify := make(chan struct{})
	defer close(stopNotify)
	go func() {
		for {
			lagging.Notify()
			select {
			case <-stopNotify:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for _, s := range []*stream{s1, s2, moved, behind} {
		s.expect(change{m.ID, store.EventAccepted})
	}
	if err := node1.AppendEvent(ctx, j.ID, "c", nil); err != nil {
		t.Fatal(err)
	}
	oneJob.expect(change{j.ID, "c"})
}

// TestHubOnPostgreSQLAnswersOldAndBadIDs: a Last-Event-ID from before events that
// retention pruned, or a SQLite event id (a queue copied to PostgreSQL), starts with a
// snapshot; text that is no cursor is a 400.
func TestHubOnPostgreSQLAnswersOldAndBadIDs(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshSchema(t)
	st := openPG(t, dsn)
	_, url := startHub(t, st, 20*time.Millisecond)
	s := openStream(t, url, "", "")
	j := enqueueExport(t, st)
	s.expect(change{j.ID, store.EventAccepted})
	first := s.lastID
	k := enqueueExport(t, st)
	s.expect(change{k.ID, store.EventAccepted})

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM job_events WHERE job_id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	// The client at the first accept missed nothing that was pruned; the one before it did.
	openStream(t, url, "", first).expect(change{k.ID, store.EventAccepted})
	for _, old := range []string{s.startID, "42"} {
		snap := openStream(t, url, "", old)
		if ev := snap.next(); ev.typ != "snapshot" || snap.lastID == "" {
			t.Fatalf("Last-Event-ID %q: first event %q (id %q), want a snapshot with an id", old, ev.typ, snap.lastID)
		}
	}

	res, err := http.Get(url + "/?last_event_id=1.x")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p apiv1.Problem
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil || res.StatusCode != http.StatusBadRequest || p.Code != "bad_last_event_id" {
		t.Fatalf("malformed id: %d %+v (%v), want 400 bad_last_event_id", res.StatusCode, p, err)
	}
}

func openPG(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := pg.Open(context.Background(), dsn, pg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startHub starts a hub over st that reads the log every poll (no engine wakes it
// here), behind an HTTP server.
func startHub(t *testing.T, st Log, poll time.Duration) (*Hub, string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := New(st, Config{Poll: poll}, log, problem.Reporter{Log: log})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Stop(); srv.Close() })
	return h, srv.URL
}

func enqueueExport(t *testing.T, st *store.Store) store.Job {
	t.Helper()
	j, _, err := st.Enqueue(context.Background(), store.NewJob{ID: store.NewID(), Kind: export.Name,
		Args: json.RawMessage(`{"report":"demo","params":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited %s for %s", wait, what)
		}
	}
}

// change is a state event as the tests compare them.
type change struct{ job, typ string }

// sseEvent is one dispatched event and the stream's last event id after it.
type sseEvent struct{ id, typ, data string }

// stream reads an event stream on its own goroutine as an EventSource does: a blank
// line dispatches, an id line sets the last event id even without data.
type stream struct {
	t       *testing.T
	cancel  context.CancelFunc
	body    io.ReadCloser
	events  chan sseEvent
	ended   chan struct{}
	startID string // the id line the stream began with, when it had no Last-Event-ID
	lastID  string // the last event id seen by next
}

func openStream(t *testing.T, base, query, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", query, res.StatusCode, b)
	}
	s := &stream{t: t, cancel: cancel, body: res.Body, events: make(chan sseEvent, 256), ended: make(chan struct{}), lastID: lastID}
	started := make(chan string, 1)
	go s.read(started)
	select {
	case s.startID = <-started:
	case <-time.After(wait):
		t.Fatal("no first id line")
	}
	if s.lastID == "" {
		s.lastID = s.startID
	}
	t.Cleanup(s.close)
	return s
}

func (s *stream) read(started chan<- string) {
	defer close(s.ended)
	br := bufio.NewReader(s.body)
	var id, typ, data string
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if first {
				started <- id
				first = false
			}
			if data != "" {
				s.events <- sseEvent{id, typ, data}
			}
			typ, data = "", ""
		case field == "id":
			id = value
		case field == "event":
			typ = value
		case field == "data":
			data = value
		}
	}
}

func (s *stream) close() {
	s.cancel()
	s.body.Close()
	<-s.ended
}

// next returns the next event that is not progress.
func (s *stream) next() sseEvent {
	s.t.Helper()
	for {
		select {
		case ev := <-s.events:
			if ev.typ == "progress" {
				continue
			}
			s.lastID = ev.id
			return ev
		case <-time.After(wait):
			s.t.Fatalf("no event within %s", wait)
		}
	}
}

// expect reads the next state events and requires them to be want, in order, each
// with an id after the one before.
func (s *stream) expect(want ...change) {
	s.t.Helper()
	for _, w := range want {
		prev := s.lastID
		ev := s.next()
		var d apiv1.StateEvent
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Job == nil {
			s.t.Fatalf("event %s: %v: %s", ev.typ, err, ev.data)
		}
		if got := (change{d.Job.ID, ev.typ}); got != w {
			s.t.Fatalf("event %v, want %v", got, w)
		}
		if store.CompareCursors(ev.id, prev) <= 0 {
			s.t.Fatalf("event %v has id %q, not after %q", w, ev.id, prev)
		}
	}
}
