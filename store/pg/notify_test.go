package pg_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/conformance"
)

// waitTimeout bounds every wait on a condition. A passing test never waits for it: the
// engines' poll and heartbeat are an hour, so only a wake-up can make them act.
const waitTimeout = 30 * time.Second

// note is one notification as a test reads it.
type note struct{ channel, payload string }

// notes LISTENs on every channel on a connection of its own.
type notes struct {
	conn *pgx.Conn
}

func listenRaw(t *testing.T, dsn string) *notes {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, ch := range []string{pg.ChannelReady, pg.ChannelCancel, pg.ChannelEvents} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			t.Fatal(err)
		}
	}
	return &notes{conn: conn}
}

// after runs step, then sends a marker notification of its own and returns what arrived
// before the marker about the test's queues and jobs (keep), plus whether any events
// notification came. PostgreSQL delivers notifications in commit order, so everything
// step's transactions sent comes before the marker: a notification missing here was not
// sent. Other tests share the channels (they are per database), hence keep; an events
// notification cannot be told from theirs, so it only counts as present.
func (n *notes) after(t *testing.T, keep func(note) bool, step func()) (got []note, events bool) {
	t.Helper()
	step()
	marker := "marker-" + rand.Text()
	if _, err := n.conn.Exec(ctx, `SELECT pg_notify($1, $2)`, pg.ChannelReady, marker); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		m, err := n.conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("waiting for the marker: %v", err)
		}
		switch nt := (note{m.Channel, m.Payload}); {
		case nt.payload == marker:
			return got, events
		case nt.channel == pg.ChannelEvents:
			events = true
		case keep(nt):
			got = append(got, nt)
		}
	}
}

// countEvents runs step, waits for the first events notification after it, then sends a
// marker and counts every events notification that arrived before the marker. Another
// test's may count too (channels are per database), which only ever adds.
func (n *notes) countEvents(t *testing.T, step func()) int {
	t.Helper()
	step()
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	count, marker := 0, "marker-"+rand.Text()
	for {
		m, err := n.conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("waiting for notifications (%d events so far): %v", count, err)
		}
		switch {
		case m.Payload == marker:
			return count
		case m.Channel == pg.ChannelEvents:
			count++
			if count == 1 {
				if _, err := n.conn.Exec(ctx, `SELECT pg_notify($1, $2)`, pg.ChannelReady, marker); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestTriggersNotifyEveryWayAJobBecomesRunnable: each store method that makes a job
// PENDING (enqueue, a failed attempt that runs again, a requeue, a recovered attempt, a
// retry, a follow-up) sends its queue on sheetq_ready once its transaction commits; a
// cancel of a running job sends its id on sheetq_cancel; a claim, a heartbeat and a
// success send neither. None sends on sheetq_events inside its transaction: the node
// announces its events after the commit (TestAnnounceEventsReachesListenersFolded).
func TestTriggersNotifyEveryWayAJobBecomesRunnable(t *testing.T) {
	dsn := freshSchema(t)
	q, fq := "q-"+rand.Text()[:8], "f-"+rand.Text()[:8]
	st := openStore(t, dsn, pg.Options{FollowUps: func(j store.Job) ([]store.FollowUp, error) {
		if j.Status != store.StatusSucceeded || j.Kind != "parent" {
			return nil, nil
		}
		return []store.FollowUp{{ID: store.NewID(), Kind: "child", Args: json.RawMessage(`{}`), Queue: fq}}, nil
	}})
	n := listenRaw(t, dsn)
	var ids []string
	keep := func(nt note) bool {
		return nt.channel == pg.ChannelReady && (nt.payload == q || nt.payload == fq) ||
			nt.channel == pg.ChannelCancel && slices.Contains(ids, nt.payload)
	}
	ready := []note{{pg.ChannelReady, q}}
	put := func(kind string) store.Job {
		j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: kind, Args: json.RawMessage(`{}`), Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
		return j
	}
	claim := func() store.Job {
		js, err := st.ClaimBatch(ctx, "w", q, 1)
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v, %v", js, err)
		}
		return js[0]
	}
	finish := func(f store.Finish) store.Job {
		r := st.FinishBatch(ctx, []store.Finish{f})
		if r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
		return r[0].Job
	}
	check := func(what string, want []note, step func()) {
		t.Helper()
		got, events := n.after(t, keep, step)
		if !slices.Equal(got, want) || events {
			t.Errorf("%s sent %v (events: %v), want %v and no events notification (the node announces events after the commit: AnnounceEvents)", what, got, events, want)
		}
	}

	var j store.Job
	check("enqueue", ready, func() { put("parent") })
	check("claim", nil, func() { j = claim() })
	check("heartbeat", nil, func() {
		if _, err := st.Heartbeat(ctx, j.ID, j.Attempt, 1, -1); err != nil {
			t.Fatal(err)
		}
	})
	check("a failed attempt with attempts left", ready, func() {
		finish(store.Finish{ID: j.ID, Attempt: j.Attempt, Outcome: store.Failed, Error: store.AttemptError{Code: "x"}})
	})
	check("claim", nil, func() { j = claim() })
	check("requeue", ready, func() {
		finish(store.Finish{ID: j.ID, Attempt: j.Attempt, Outcome: store.Requeued, Reason: "shutdown"})
	})
	check("claim", nil, func() { j = claim() })
	check("recover", ready, func() {
		if _, err := st.Recover(ctx, j.ID, j.Attempt, "stale", 0); err != nil {
			t.Fatal(err)
		}
	})
	check("claim", nil, func() { j = claim() })
	check("success, with a follow-up in another queue", []note{{pg.ChannelReady, fq}}, func() {
		finish(store.Finish{ID: j.ID, Attempt: j.Attempt, Outcome: store.Succeeded})
	})

	var k store.Job
	check("enqueue", ready, func() { k = put("other") })
	check("claim", nil, func() { k = claim() })
	check("cancel of a running job", []note{{pg.ChannelCancel, k.ID}}, func() {
		if _, err := st.Cancel(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
	})
	check("the cancelled attempt ends", nil, func() {
		finish(store.Finish{ID: k.ID, Attempt: k.Attempt, Outcome: store.Canceled})
	})
	check("retry", ready, func() {
		if _, err := st.Retry(ctx, k.ID, 0); err != nil {
			t.Fatal(err)
		}
	})
	check("cancel of a pending job", nil, func() {
		if _, err := st.Cancel(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// node is one sheetq process on the shared database: its own store (pool), engine and,
// unless poll-only, Listener.
type node struct {
	st   *store.Store
	eng  *jobs.Engine
	idle chan struct{} // the test queue's dispatcher found nothing and is about to sleep
}

// newNode builds an engine with one lane for queue q, polling every poll. Its heartbeat
// is an hour, so that only a wake-up makes it check a cancel, and so is the poll in
// every test but the poll's own. The Listener, when listen is set, is wired as the app
// wires it (docs/several-nodes.md).
func newNode(t *testing.T, dsn, q string, opts pg.Options, poll time.Duration, listen bool, handler jobs.HandlerFunc, beforeReconnect func()) (*node, *pg.Listener) {
	t.Helper()
	n := &node{st: openStore(t, dsn, opts), idle: make(chan struct{}, 8)}
	dir := t.TempDir()
	n.eng = jobs.New(idleSignal{Store: n.st, queue: q, idle: n.idle}, jobs.Config{
		Workers:      1,
		Queues:       map[string]int{q: 1},
		PollInterval: poll,
		Heartbeat:    time.Hour,
		StaleAfter:   2 * time.Hour,
		TmpDir:       dir + "/tmp",
		ExportsDir:   dir + "/exports",
		WorkerID:     "node-b",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	n.eng.Register("test", handler)
	var l *pg.Listener
	if listen {
		var err error
		cb := pg.Callbacks{Ready: n.eng.WakeQueue, Cancel: n.eng.CheckCancel}
		if l, err = pg.ListenWithHook(ctx, dsn, slog.New(slog.NewTextHandler(io.Discard, nil)), cb, beforeReconnect); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Stop)
	}
	if err := n.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.eng.Stop)
	return n, l
}

// waitIdle waits until the dispatcher of the test's queue has claimed times times and
// found nothing: the start's claim, and with a Listener the claim of its first re-read,
// whose wake-up is pending before the engine starts (Listen returns after it).
func (n *node) waitIdle(t *testing.T, times int) {
	t.Helper()
	for range times {
		recv(t, "the node's lane to go idle", n.idle)
	}
}

// idleSignal is a store that signals when queue's dispatcher found nothing to claim and
// asked when to look again (NextRunIn), which it does right before it sleeps.
type idleSignal struct {
	jobs.Store
	queue string
	idle  chan<- struct{}
}

func (s idleSignal) NextRunIn(ctx context.Context, queue string) (time.Duration, error) {
	d, err := s.Store.NextRunIn(ctx, queue)
	if queue == s.queue {
		select {
		case s.idle <- struct{}{}:
		default: // a polling test does not count
		}
	}
	return d, err
}

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitStatus waits until the job has status, read through st.
func waitStatus(t *testing.T, st *store.Store, id string, status store.Status) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		j, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want %s", id, j.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func enqueueIn(t *testing.T, st *store.Store, q string) store.Job {
	t.Helper()
	j, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "test", Args: json.RawMessage(`{}`), Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// ranHandler signals each job it runs.
func ranHandler(ran chan<- string) jobs.HandlerFunc {
	return func(_ context.Context, run *jobs.Run) error {
		ran <- run.JobID
		return nil
	}
}

// TestEnqueueOnOneNodeWakesAnIdleNode: a job stored through node A's store is run by
// idle node B, whose poll is an hour: only the notification can have woken it.
func TestEnqueueOnOneNodeWakesAnIdleNode(t *testing.T) {
	dsn := freshSchema(t)
	q := "q-" + rand.Text()[:8]
	a := openStore(t, dsn, pg.Options{})
	ran := make(chan string, 1)
	b, _ := newNode(t, dsn, q, pg.Options{}, time.Hour, true, ranHandler(ran), nil)
	b.waitIdle(t, 2)
	j := enqueueIn(t, a, q)
	if got := recv(t, "node B to run the job", ran); got != j.ID {
		t.Fatalf("node B ran %s, want %s", got, j.ID)
	}
	waitStatus(t, a, j.ID, store.StatusSucceeded)
}

// TestListenerReconnectsAndRereads: the listen connection of node B is killed
// (pg_terminate_backend) and held down while node A stores a job, whose notification
// therefore reaches no one. Once the listener is back, its re-read wakes every lane and B
// runs the job, without waiting for its hour-long poll.
func TestListenerReconnectsAndRereads(t *testing.T) {
	dsn := freshSchema(t)
	q := "q-" + rand.Text()[:8]
	a := openStore(t, dsn, pg.Options{})
	ran := make(chan string, 1)
	down, release := make(chan struct{}), make(chan struct{})
	hold := func() {
		down <- struct{}{}
		<-release
	}
	b, l := newNode(t, dsn, q, pg.Options{}, time.Hour, true, ranHandler(ran), hold)
	b.waitIdle(t, 2)

	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var killed bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(l.BackendPID())).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listen connection: %v, %v", killed, err)
	}
	recv(t, "the listener to notice the lost connection", down)
	j := enqueueIn(t, a, q)
	close(release)
	if got := recv(t, "node B to run the job after the reconnect", ran); got != j.ID {
		t.Fatalf("node B ran %s, want %s", got, j.ID)
	}
	waitStatus(t, a, j.ID, store.StatusSucceeded)
}

// TestCancelOnOneNodeStopsTheJobOnAnother: node B runs a job; node A's store requests its
// cancel. B's heartbeat is an hour, so only the notification makes it check at once: its
// handler's context ends, and the job ends CANCELED.
func TestCancelOnOneNodeStopsTheJobOnAnother(t *testing.T) {
	dsn := freshSchema(t)
	q := "q-" + rand.Text()[:8]
	a := openStore(t, dsn, pg.Options{})
	started := make(chan string, 1)
	stopped := make(chan error, 1)
	block := func(ctx context.Context, run *jobs.Run) error {
		started <- run.JobID
		<-ctx.Done()
		stopped <- ctx.Err()
		return ctx.Err()
	}
	b, _ := newNode(t, dsn, q, pg.Options{}, time.Hour, true, block, nil)
	b.waitIdle(t, 2)
	j := enqueueIn(t, a, q)
	recv(t, "node B to start the job", started)
	if c, err := a.Cancel(ctx, j.ID); err != nil || c.Status != store.StatusProcessing {
		t.Fatalf("cancel: %s, %v", c.Status, err)
	}
	if err := recv(t, "the handler's context to end", stopped); !errors.Is(err, context.Canceled) {
		t.Fatalf("the handler's context ended with %v", err)
	}
	waitStatus(t, a, j.ID, store.StatusCanceled)
}

// TestPollOnlyNodeFindsJobsByPolling: a node for a pooler in transaction mode
// (Options.PollOnly) runs no Listener and sends unnamed statements; its poll finds
// another node's job. MaxConns sizes its pool.
func TestPollOnlyNodeFindsJobsByPolling(t *testing.T) {
	dsn := freshSchema(t)
	q := "q-" + rand.Text()[:8]
	a := openStore(t, dsn, pg.Options{})
	ran := make(chan string, 1)
	b, _ := newNode(t, dsn, q, pg.Options{PollOnly: true, MaxConns: pg.PoolSize(3)}, 20*time.Millisecond, false, ranHandler(ran), nil)
	if conns, mode := b.st.Driver().(*pg.Store).PoolSettings(); conns != 9 || mode != pgx.QueryExecModeExec {
		t.Fatalf("pool: %d connections in mode %v, want 9 in exec mode", conns, mode)
	}
	b.waitIdle(t, 1)
	j := enqueueIn(t, a, q)
	if got := recv(t, "node B to run the job", ran); got != j.ID {
		t.Fatalf("node B ran %s, want %s", got, j.ID)
	}
	waitStatus(t, a, j.ID, store.StatusSucceeded)
}

// TestListenRefusesAServerItCannotReach: the first connection is made before Listen
// returns, so a node with a wrong DSN fails at start, not at its first lost wake-up.
func TestListenRefusesAServerItCannotReach(t *testing.T) {
	if _, err := pg.Listen(ctx, "postgres://sheetq@127.0.0.1:1/sheetq?connect_timeout=5", nil, pg.Callbacks{}); err == nil {
		t.Fatal("Listen to a closed port returned no error")
	}
}

// TestConformancePollOnly runs the store suite as TestConformance does, with
// Options.PollOnly: every statement an unnamed prepared statement (pgx's exec mode), as
// through PgBouncer in transaction mode, where a named one would be missing on the next
// server connection.
func TestConformancePollOnly(t *testing.T) {
	testDSN(t)
	conformance.Run(t, func(t *testing.T, o conformance.Options) conformance.Harness {
		clk := newClock()
		dsn := freshSchema(t)
		open := func(t *testing.T) store.Driver {
			st, err := pg.OpenDriver(context.Background(), dsn, pg.Options{TestClock: clk.Now, PollOnly: true})
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			return st
		}
		return conformance.Driven(t, o, open, clk.Now, clk.Advance)
	})
}

// TestAnnounceEventsReachesListenersFolded: AnnounceEvents reaches a listener on sheetq_events, and
// a burst of a thousand calls (a busy node's commits) sends a handful of notifications,
// not a thousand.
func TestAnnounceEventsReachesListenersFolded(t *testing.T) {
	dsn := freshSchema(t)
	st := openStore(t, dsn, pg.Options{})
	n := listenRaw(t, dsn)
	const burst = 1000
	got := n.countEvents(t, func() {
		for range burst {
			st.Driver().(store.Announcer).AnnounceEvents()
		}
	})
	if got == 0 || got > burst/10 {
		t.Fatalf("%d notifications for %d announcements, want at least one and far fewer", got, burst)
	}
}
