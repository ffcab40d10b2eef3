package webhook_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// The store tests' helpers, for the tests that run deliveries' creation on a real,
// migrated store with the Announcer as its follow-up hook.

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// announcer is the hook app.Run gives the store, with base as the public URL.
func announcer(base string) store.FollowUpFunc {
	return webhook.Announcer{BaseURL: base, Describe: export.JobJSON}.FollowUps
}

// openStore opens a migrated store on a fresh file in t.TempDir, announcing final
// states to webhooks unless opts names another hook, and closes it at cleanup.
func openStore(t testing.TB, opts store.Options) (*store.Store, string) {
	t.Helper()
	if opts.FollowUps == nil {
		opts.FollowUps = announcer("")
	}
	path := filepath.Join(t.TempDir(), "sheetq.db")
	st, err := store.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st, path
}

// rawDB opens the file with a plain connection, for looking behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var idSeq struct {
	sync.Mutex
	n int
}

func enqueue(t testing.TB, st *store.Store, nj store.NewJob) store.Job {
	t.Helper()
	if nj.ID == "" {
		idSeq.Lock()
		idSeq.n++
		nj.ID = fmt.Sprintf("job%06d", idSeq.n)
		idSeq.Unlock()
	}
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	if nj.Args == nil {
		nj.Args = json.RawMessage(`{}`)
	}
	j, existed, err := st.Enqueue(context.Background(), nj)
	if err != nil || existed {
		t.Fatalf("enqueue %s: existed %v, %v", nj.ID, existed, err)
	}
	return j
}

func claim(t testing.TB, st *store.Store, worker string) store.Job {
	t.Helper()
	j, err := st.Claim(context.Background(), worker)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return j
}

func get(t testing.TB, st *store.Store, id string) store.Job {
	t.Helper()
	j, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func events(t testing.TB, st *store.Store, id string) []store.Event {
	t.Helper()
	ev, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatalf("events %s: %v", id, err)
	}
	return ev
}

// evSummary is what an event says, without its id and time.
type evSummary struct {
	Type    string
	Status  store.Status
	Attempt int
}

func summarize(evs []store.Event) []evSummary {
	out := make([]evSummary, len(evs))
	for i, e := range evs {
		out[i] = evSummary{e.Type, e.Status, e.Attempt}
	}
	return out
}

func eventData(t *testing.T, e store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("event %s data %q: %v", e.Type, e.Data, err)
	}
	return m
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// attemptEvent is the timeline event a delivery attempt is recorded as.
func attemptEvent(a webhook.Attempt) string {
	if a.Delivered {
		return webhook.EventDelivered
	}
	return webhook.EventFailed
}
