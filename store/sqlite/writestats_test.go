package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sheetq/store"
	"slices"
	"sync"
	"testing"
	"time"
)

// Every write transaction is observed, the ones that fail included, with the time it
// held the writer; reads are not, and nil stops the calls.
func TestObserveWrites(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "sheetq.db"), Options{Unbatched: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var (
		mu   sync.Mutex
		seen []time.Duration
	)
	driverOf(st).ObserveWrites(func(d time.Duration) { mu.Lock(); seen = append(seen, d); mu.Unlock() })
	enqueue := func() {
		t.Helper()
		if _, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		enqueue()
	}
	if _, err := st.List(ctx, store.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// A transaction that fails still held the writer for its time.
	if err := driverOf(st).tx(ctx, func(*sql.Tx) error {
		time.Sleep(2 * time.Millisecond)
		return errTestRollback
	}); err != errTestRollback {
		t.Fatalf("tx = %v, want the function's error", err)
	}
	driverOf(st).ObserveWrites(nil)
	enqueue()

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("write transactions observed: %d, want 4 (3 enqueues, 1 rolled back; no read, none after nil)", len(seen))
	}
	if slices.Max(seen) < 2*time.Millisecond {
		t.Fatalf("longest observed %v, want at least the 2 ms the failed one held the writer", slices.Max(seen))
	}
}

var errTestRollback = errors.New("roll back")
