package sqlite

import (
	crand "crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sheetq/store"
	"strings"
	"testing"
)

// Jobs accepted with ids in creation order write far fewer distinct pages than jobs with
// random ids: the pages a checkpoint has to copy while commits wait for it.
func TestOrderedIDsWriteFewerPages(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	s, err := OpenDriver(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(s, store.Config{})
	defer st.Close()
	args := json.RawMessage(`{"report":"demo","params":{"rows":2000}}`)
	n := 0
	enqueue := func(id string) {
		n++
		if _, _, err := st.Enqueue(ctx, store.NewJob{ID: id, Kind: "export", Args: args,
			IdempotencyKey: fmt.Sprintf("key-%08d", n), RequestHash: fmt.Sprintf("%064d", n)}); err != nil {
			t.Fatal(err)
		}
	}
	// Both kinds of id already in the tables (in one transaction, for speed), so that
	// the B-trees have depth and both kinds land among existing rows.
	err = s.tx(ctx, func(tx *sql.Tx) error {
		for i := range 20000 {
			id := store.NewID()
			if i%2 == 1 {
				id = strings.ToLower(crand.Text())
			}
			n++
			if _, _, err := s.enqueueTx(ctx, tx, store.NewJob{ID: id, Kind: "export", Args: args, Queue: store.DefaultQueue, MaxAttempts: store.DefaultMaxAttempts,
				IdempotencyKey: fmt.Sprintf("key-%08d", n), RequestHash: fmt.Sprintf("%064d", n)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		t.Fatal(err)
	}
	pages := func(newID func() string) int {
		var busy, frames, done int
		if err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
			t.Fatalf("checkpoint: busy %d, %v", busy, err)
		}
		for range 200 {
			enqueue(newID())
		}
		return walPages(t, path+"-wal")
	}
	ordered := pages(store.NewID)
	random := pages(func() string { return strings.ToLower(crand.Text()) })
	t.Logf("distinct pages written by 200 one-job commits: %d with NewID, %d with random ids", ordered, random)
	if ordered*2 > random {
		t.Fatalf("ids in creation order wrote %d distinct pages, random ids %d: want less than half", ordered, random)
	}
}

// walPages counts the distinct database pages the frames of a WAL file hold.
func walPages(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		t.Fatalf("%s: %d bytes, no WAL header", path, len(b))
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	seen := map[uint32]bool{}
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		seen[binary.BigEndian.Uint32(b[off:off+4])] = true
	}
	return len(seen)
}
