package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/jobs/deliver"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// silentRelay is an SMTP relay that has stopped: it accepts TCP connections and never
// says a word, so that a client waits for its greeting until the client's own timeout.
type silentRelay struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newSilentRelay(t *testing.T) *silentRelay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &silentRelay{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *silentRelay) port() int { return r.l.Addr().(*net.TCPAddr).Port }

// accepted is how many connections the relay has taken.
func (r *silentRelay) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// close stops listening and drops every connection, which ends the attempts that wait.
func (r *silentRelay) close() {
	r.l.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// laneWorkers is the number of workers of queue's lane in ts's engine (0: no lane).
func (ts *testServer) laneWorkers(queue string) int {
	for _, l := range ts.engine.Lanes() {
		if l.Queue == queue {
			return l.Workers
		}
	}
	return 0
}

// TestStalledRelayDoesNotDelayWebhooks: email deliveries to a relay that accepts the
// connection and never answers hold every worker of their lane, each up to its timeout;
// an unrelated export's webhook is still delivered meanwhile, because deliveries have a
// lane of their own (deliver.Queue) and webhooks keep theirs.
func TestStalledRelayDoesNotDelayWebhooks(t *testing.T) {
	t.Parallel()
	relay := newSilentRelay(t)
	rc := newHookReceiver(t, nil, func(int, http.ResponseWriter) {})
	fc := FileConfig{SMTP: deliver.SMTP{Host: "127.0.0.1", Port: relay.port(), From: "reports@sheetq.test"}}
	ts := newDeliveryServer(t, fc, testOpts{Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true}}, nil)
	// Cleanups run last first: the waiting attempts end before the app stops.
	t.Cleanup(relay.close)

	// More deliveries than the webhooks lane has workers, so that they would hold all of
	// them if they shared it.
	targets := make([]deliver.Target, webhook.DefaultWorkers+2)
	for i := range targets {
		targets[i] = deliver.Target{Type: deliver.TypeEmail, To: []string{fmt.Sprintf("reader%d@example.com", i)}}
	}
	stalled := ts.scheduledExport(5, targets...)
	busy := ts.laneWorkers(deliver.Queue)
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		n := relay.accepted()
		return n >= busy, fmt.Sprintf("the relay holds %d connections, want every delivery worker's (%d)", n, busy)
	})

	hooked := ts.Create(withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL+"/hook"))
	apptest.WaitFor(t, 30*time.Second, func() (bool, string) {
		got := rc.of(hooked.ID)
		return len(got) == 1 && got[0].typ == webhook.EventExportSucceeded,
			fmt.Sprintf("receiver got %d deliveries for %s; lanes %+v", len(got), hooked.ID, ts.engine.Lanes())
	})

	// The webhook came while the deliveries still wait for the relay: none has ended.
	evs, err := ts.store.Events(context.Background(), stalled)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == deliver.EventDelivered || e.Type == deliver.EventFailed {
			t.Fatalf("a delivery ended (%s %s) before the webhook arrived: the test proves nothing", e.Type, e.Data)
		}
	}
}

// TestDeliveryQueuedInWebhooksStillRuns: a delivery that an earlier version queued in
// the webhooks lane, before deliveries had a lane of their own, still runs: a lane
// claims its queue's jobs whatever their kind.
func TestDeliveryQueuedInWebhooksStillRuns(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ts := newDeliveryServer(t, FileConfig{Deliveries: DeliveriesConfig{Folders: []string{root}}}, testOpts{}, nil)
	id := ts.scheduledExport(5)
	job, err := ts.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	args, err := json.Marshal(deliver.Args{ExportID: id, Target: deliver.Target{Type: deliver.TypeFolder, Path: root},
		File: job.FileName, Size: job.FileSize, SHA256: job.FileSHA256, DownloadName: "old.xlsx", Report: "demo", Title: "Demo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.store.Enqueue(context.Background(), store.NewJob{ID: store.NewID(), Kind: deliver.Name, Queue: webhook.Queue,
		Args: args, MaxAttempts: deliver.MaxAttempts}); err != nil {
		t.Fatal(err)
	}
	if got := ts.deliveryEvents(id, 1); len(got) != 1 || !got[0].Delivered {
		t.Fatalf("delivery attempts %+v, want one delivered", got)
	}
	if _, err := os.Stat(filepath.Join(root, "old.xlsx")); err != nil {
		t.Fatalf("the delivery queued in %q left no file: %v", webhook.Queue, err)
	}
}
