package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// seq numbers the ids Enqueue makes up, across tests in one process.
var seq atomic.Int64

// Enqueue stores nj, filling in an id (job000001, ...), kind "test" and args {} where
// they are empty, and fails the test unless a new job was created.
func Enqueue(t testing.TB, st *store.Store, nj store.NewJob) store.Job {
	t.Helper()
	if nj.ID == "" {
		nj.ID = NextID()
	}
	if nj.Kind == "" {
		nj.Kind = "test"
	}
	if nj.Args == nil {
		nj.Args = json.RawMessage(`{}`)
	}
	j, existed, err := st.Enqueue(context.Background(), nj)
	if err != nil {
		t.Fatalf("enqueue %s: %v", nj.ID, err)
	}
	if existed {
		t.Fatalf("enqueue %s: existed = true for a new job", nj.ID)
	}
	return j
}

// Claim claims the next job for worker from the first of queues that has a runnable one
// (none given: store.DefaultQueue), failing the test on an error or when none has.
func Claim(t testing.TB, st *store.Store, worker string, queues ...string) store.Job {
	t.Helper()
	if len(queues) == 0 {
		queues = []string{store.DefaultQueue}
	}
	for _, q := range queues {
		j, err := st.Claim(context.Background(), worker, q)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("claim from %s: %v", q, err)
		}
		return j
	}
	t.Fatalf("claim: nothing runnable in %v", queues)
	return store.Job{}
}

// Get reads a job, failing the test on an error.
func Get(t testing.TB, st *store.Store, id string) store.Job {
	t.Helper()
	j, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

// Events reads a job's events, failing the test on an error.
func Events(t testing.TB, st *store.Store, id string) []store.Event {
	t.Helper()
	ev, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatalf("events %s: %v", id, err)
	}
	return ev
}

// EventData decodes an event's data as a map, failing the test when it is not JSON.
func EventData(t testing.TB, e store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("event %s data %q: %v", e.Type, e.Data, err)
	}
	return m
}

// Clock is a settable clock for sqlite.Options.Now, safe for concurrent use. It starts at
// 2030-01-02 03:04:05 UTC.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at its start.
func NewClock() *Clock { return ClockAt(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) }

// ClockAt returns a Clock that reads t.
func ClockAt(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Open opens (migrating) the store at path and closes it when the test ends, failing
// the test if either goes wrong.
func Open(t testing.TB, path string, opts sqlite.Options) *store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// RawDB opens the file at path with a plain connection of its own, for looking behind
// the store's back; it is closed when the test ends.
func RawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// NextID is a fresh job id for a test (job000001, ...).
func NextID() string { return fmt.Sprintf("job%06d", seq.Add(1)) }
