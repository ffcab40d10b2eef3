package storetest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"sheetq/store"
)

// FillJobs enqueues n export jobs, with some text in their args so that the file spans
// many pages, through the store's own Enqueue (group commits of concurrent calls).
func FillJobs(t testing.TB, st *store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				args, _ := json.Marshal(map[string]any{"report": "demo", "params": map[string]any{
					"rows": i, "note": strings.Repeat(fmt.Sprintf("job %d ", i), 30)}})
				if _, _, err := st.Enqueue(ctx, store.NewJob{ID: store.NewID(), Kind: "export", Args: args}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("fill jobs: %v", err)
	default:
	}
}

// PageSize and Pages read an SQLite file's page size from its header and count its pages.
func PageSize(t testing.TB, path string) (pageSize, pages int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := make([]byte, 100)
	if _, err := f.ReadAt(h, 0); err != nil {
		t.Fatal(err)
	}
	pageSize = int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return pageSize, fi.Size() / pageSize
}

// ZeroPages overwrites n pages of a closed SQLite file with zeros, starting at page first
// (1-based), as a disk or a copy that lost blocks leaves them.
func ZeroPages(t testing.TB, path string, first, n int64) {
	t.Helper()
	overwrite(t, path, first, n, func(b []byte) { clear(b) })
}

// GarblePages overwrites n pages of a closed SQLite file with random bytes.
func GarblePages(t testing.TB, path string, first, n int64) {
	t.Helper()
	overwrite(t, path, first, n, func(b []byte) { _, _ = rand.Read(b) })
}

func overwrite(t testing.TB, path string, first, n int64, fill func([]byte)) {
	t.Helper()
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatalf("%s-wal exists: close the store first, so that the file holds every page", path)
	}
	size, pages := PageSize(t, path)
	if first < 2 || first+n-1 > pages {
		t.Fatalf("pages %d to %d: the file has %d", first, first+n-1, pages)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n*size)
	fill(b)
	if _, err := f.WriteAt(b, (first-1)*size); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
