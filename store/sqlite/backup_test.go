package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/store"
	"sheetq/store/sqlite"
)

// A read-only store beside a live writer copies a consistent database with Backup, and
// refuses to overwrite an existing file.
func TestBackupWhileWriterIsOpen(t *testing.T) {
	ctx := context.Background()
	live, path := openStore(t, sqlite.Options{})
	// A deleted job leaves a gap in the rowids, which the copy must keep (listings use them).
	gone := enqueue(t, live, store.NewJob{})
	j := enqueue(t, live, store.NewJob{})
	if _, err := live.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Delete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}

	ro := openAt(t, path, sqlite.Options{ReadOnly: true})
	// Writes keep going in the live store while the backup runs.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				enqueue(t, live, store.NewJob{})
			}
		}
	}()
	out := filepath.Join(t.TempDir(), "backup.db")
	err := driverOf(ro).Backup(ctx, out)
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}

	cp := openAt(t, out, sqlite.Options{})
	if err := driverOf(cp).Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := cp.Get(ctx, j.ID); err != nil || got.ID != j.ID {
		t.Fatalf("job %s in backup: %+v, %v", j.ID, got, err)
	}
	// Listings go by rowid, which VACUUM INTO keeps: the copy lists the same jobs in the
	// same order with the same cursors.
	copied, err := cp.List(ctx, store.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(copied) == 0 {
		t.Fatal("the backup lists no jobs")
	}
	if copied[len(copied)-1].Seq != j.Seq || j.Seq != gone.Seq+1 {
		t.Fatalf("oldest job in the backup %+v, want %s with seq %d", copied[len(copied)-1], j.ID, gone.Seq+1)
	}
	for _, c := range copied {
		orig, err := live.Get(ctx, c.ID)
		if err != nil || orig.Seq != c.Seq {
			t.Fatalf("job %s: seq %d in the backup, %d (%v) in the live store", c.ID, c.Seq, orig.Seq, err)
		}
	}

	if err := driverOf(ro).Backup(ctx, out); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("backup over an existing file: err = %v, want already exists", err)
	}
	if _, _, err := ro.Enqueue(ctx, store.NewJob{ID: "x", Kind: "test", Args: []byte(`{}`)}); err == nil {
		t.Fatal("a read-only store accepted a write")
	}
}

// A read-only open needs an existing file: it never creates one.
func TestOpenReadOnlyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	if st, err := sqlite.Open(context.Background(), path, sqlite.Options{ReadOnly: true}); err == nil {
		st.Close()
		t.Fatal("opened a missing file read-only")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("read-only open created %s", path)
	}
}

// With no server running (no -wal or -shm beside the file), a read-only store still backs up.
func TestBackupOfClosedDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sheetq.db")
	live, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := enqueue(t, live, store.NewJob{})
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, path, sqlite.Options{ReadOnly: true})
	out := filepath.Join(t.TempDir(), "backup.db")
	if err := driverOf(ro).Backup(ctx, out); err != nil {
		t.Fatal(err)
	}
	if _, err := openAt(t, out, sqlite.Options{}).Get(ctx, j.ID); err != nil {
		t.Fatalf("job %s in backup: %v", j.ID, err)
	}
}
