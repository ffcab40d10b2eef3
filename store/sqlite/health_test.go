package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sheetq/store"
	"testing"
)

// A write that finds no room (SQLite's own page limit stands in for a full disk here: a
// real SQLITE_FULL, without a mount; app.TestDiskFullAnswers507 fills a real disk) is
// named ErrDiskFull, and readiness knows it until a probe write commits again.
func TestDiskFullIsNamedAndRemembered(t *testing.T) {
	ctx := context.Background()
	s := openBench(t)
	if err := driverOf(s).WriteHealth(); err != nil {
		t.Fatalf("a fresh store: %v", err)
	}
	var pages int
	if err := driverOf(s).w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	setLimit := func(n int) {
		t.Helper()
		if _, err := driverOf(s).w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, n)); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(pages)
	args := json.RawMessage(`{"report":"demo","params":{"note":"` + fmt.Sprintf("%0500d", 0) + `"}}`)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, _, err = s.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: args})
	}
	if !errors.Is(err, store.ErrDiskFull) || !store.IsDiskFull(err) {
		t.Fatalf("enqueue into a full file: %v, want ErrDiskFull", err)
	}
	if h := driverOf(s).WriteHealth(); !errors.Is(h, store.ErrDiskFull) {
		t.Fatalf("WriteHealth = %v, want ErrDiskFull", h)
	}

	setLimit(pages + 1000) // space is back
	if _, _, err := s.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: args}); err != nil {
		t.Fatalf("enqueue after space returned: %v", err)
	}
	if err := s.ProbeWrite(ctx); err != nil {
		t.Fatalf("ProbeWrite after space returned: %v", err)
	}
	if err := driverOf(s).WriteHealth(); err != nil {
		t.Fatalf("WriteHealth after the probe: %v", err)
	}
}

// Damage a read ran into (reported by the HTTP layer through NoteError) fails readiness
// for good; errors that say nothing about the file (not found, a busy lock, a cancelled
// request) leave it alone.
func TestNoteErrorKeepsOnlyFaults(t *testing.T) {
	s := openBench(t)
	for _, err := range []error{store.ErrNotFound, store.ErrLeaseLost, context.Canceled, fmt.Errorf("list: %w", store.ErrConflict)} {
		driverOf(s).NoteError(err)
	}
	if err := driverOf(s).WriteHealth(); err != nil {
		t.Fatalf("WriteHealth after errors that are no faults: %v", err)
	}
	driverOf(s).NoteError(fmt.Errorf("list jobs: %w", store.ErrCorrupt))
	if err := s.ProbeWrite(context.Background()); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("after a read found damage: %v, want ErrCorrupt that a probe does not clear", err)
	}
}
