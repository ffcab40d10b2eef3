package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A duration lands in the first bucket whose bound it does not pass; one past every
// bound counts in Count and Sum but in no bucket, and the buckets are cumulative.
func TestWriteHistBuckets(t *testing.T) {
	var h writeHist
	for _, d := range []time.Duration{
		500 * time.Microsecond, // on the first bound: in it
		600 * time.Microsecond, // past it: in the second
		3 * time.Millisecond,
		20 * time.Second, // past the last bound
	} {
		h.observe(d)
	}
	st := h.stats()
	if st.Count != 4 {
		t.Fatalf("Count = %d, want 4", st.Count)
	}
	if want := 20.0041; st.Sum < want-1e-9 || st.Sum > want+1e-9 {
		t.Fatalf("Sum = %v, want %v", st.Sum, want)
	}
	want := []uint64{1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}
	if !slices.Equal(st.Buckets, want) {
		t.Fatalf("Buckets = %v, want %v", st.Buckets, want)
	}
}

// Every write transaction is counted, the ones that fail included, with the time it
// held the writer; reads are not.
func TestWriteStatsCountWrites(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "sheetq.db"), Options{Unbatched: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := st.WriteStats()
	for range 3 {
		if _, _, err := st.Enqueue(ctx, NewJob{ID: NewID(), Kind: "export", Args: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.List(ctx, ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// A transaction that fails still held the writer for its time.
	if err := st.tx(ctx, func(*sql.Tx) error {
		time.Sleep(2 * time.Millisecond)
		return errTestRollback
	}); err != errTestRollback {
		t.Fatalf("tx = %v, want the function's error", err)
	}
	after := st.WriteStats()
	if got := after.Count - before.Count; got != 4 {
		t.Fatalf("write transactions counted: %d, want 4 (3 enqueues, 1 rolled back, no read)", got)
	}
	if after.Sum-before.Sum < 0.002 {
		t.Fatalf("Sum grew by %v s, want at least the 2 ms the failed one held the writer", after.Sum-before.Sum)
	}
	if !slices.IsSorted(after.Buckets) || after.Buckets[len(after.Buckets)-1] > after.Count {
		t.Fatalf("Buckets %v of %d: not cumulative", after.Buckets, after.Count)
	}
}

var errTestRollback = errors.New("roll back")
