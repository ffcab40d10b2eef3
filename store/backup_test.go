package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sheetq/store"
)

// A read-only store beside a live writer copies a consistent database with Backup, and
// refuses to overwrite an existing file.
func TestBackupWhileWriterIsOpen(t *testing.T) {
	ctx := context.Background()
	live, path := openStore(t, store.Options{})
	j := enqueue(t, live, store.NewJob{})

	ro := openAt(t, path, store.Options{ReadOnly: true})
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
	err := ro.Backup(ctx, out)
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}

	cp := openAt(t, out, store.Options{})
	if err := cp.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := cp.Get(ctx, j.ID); err != nil || got.ID != j.ID {
		t.Fatalf("job %s in backup: %+v, %v", j.ID, got, err)
	}

	if err := ro.Backup(ctx, out); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("backup over an existing file: err = %v, want already exists", err)
	}
	if _, _, err := ro.Enqueue(ctx, store.NewJob{ID: "x", Kind: "test", Args: []byte(`{}`)}); err == nil {
		t.Fatal("a read-only store accepted a write")
	}
}

// A read-only open needs an existing file: it never creates one.
func TestOpenReadOnlyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	if st, err := store.Open(context.Background(), path, store.Options{ReadOnly: true}); err == nil {
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
	live, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := enqueue(t, live, store.NewJob{})
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, path, store.Options{ReadOnly: true})
	out := filepath.Join(t.TempDir(), "backup.db")
	if err := ro.Backup(ctx, out); err != nil {
		t.Fatal(err)
	}
	if _, err := openAt(t, out, store.Options{}).Get(ctx, j.ID); err != nil {
		t.Fatalf("job %s in backup: %v", j.ID, err)
	}
}
