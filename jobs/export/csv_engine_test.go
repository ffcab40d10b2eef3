package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// diesAfterPublish is a store whose successes are published (the part file renamed into
// exports/) but never committed: a process that dies between the two, as the
// after-rename fault point does to the binary, without killing the test.
type diesAfterPublish struct {
	jobs.Store
	published chan<- string // the job's id, once its file is in place
}

func (d diesAfterPublish) FinishBatch(ctx context.Context, ends []store.Finish) []store.Finished {
	out := make([]store.Finished, len(ends))
	for i, end := range ends {
		if end.Outcome != store.Succeeded {
			out[i] = d.Store.FinishBatch(ctx, ends[i:i+1])[0]
			continue
		}
		if end.Publish != nil {
			if err := end.Publish(); err != nil {
				out[i] = store.Finished{Err: err}
				continue
			}
		}
		select {
		case d.published <- end.ID:
		default:
		}
		out[i] = store.Finished{Err: errors.New("database is locked")}
	}
	return out
}

// A csv export goes through the engine as an xlsx one does: published as <id>.csv with
// its size, sha256 and row count, and after a crash between publishing and committing,
// the next start completes it from that file (rule 5) instead of running it again.
func TestCSVExportRecoveredFromItsPublishedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var runs atomic.Int64
	src := countingSource{runs: &runs, src: sliceSource{
		cols: []Column{{Name: "id", Type: TypeInt}, {Name: "name", Type: TypeText, Label: "Name"}},
		rows: [][]any{{int64(1), "Ada, Countess"}, {int64(2), "Grace"}}, total: 2,
	}}
	rep := Report{ID: "people", Title: "People", Source: "mem", Sheet: "People"}
	kind := New(Config{TmpDir: filepath.Join(dir, "spill"), Library: oneReport{rep}, Sources: map[string]Source{"mem": src}})
	cfg := jobs.Config{
		Workers:    1,
		TmpDir:     filepath.Join(dir, "tmp"),
		ExportsDir: filepath.Join(dir, "exports"),
		Logger:     slog.New(slog.DiscardHandler),
		// The first engine's Stop ends the commit it keeps retrying without a wait.
		ShutdownGrace: time.Millisecond,
	}
	args, err := kind.Validate("people", nil)
	if err != nil {
		t.Fatal(err)
	}
	if args, err = args.WithFile(FileOptions{Format: FormatCSV, BOM: true}); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}

	published := make(chan string, 1)
	first := jobs.New(diesAfterPublish{Store: st, published: published}, cfg)
	first.Register(Name, kind)
	if err := first.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	j, _, err := first.Enqueue(t.Context(), store.NewJob{Kind: Name, Args: raw})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-published:
		if id != j.ID {
			t.Fatalf("published job %s, want %s", id, j.ID)
		}
	case <-time.After(time.Minute): // a safety net, not a wait: published is the signal
		t.Fatal("the file was never published")
	}
	first.Stop()
	if got, _ := st.Get(t.Context(), j.ID); got.Status != store.StatusProcessing {
		t.Fatalf("after the lost commit the job is %s; want PROCESSING", got.Status)
	}
	path := jobs.FilePath(cfg.ExportsDir, j.ID+CSVExt)
	want := []byte("\uFEFFid,Name\r\n1,\"Ada, Countess\"\r\n2,Grace\r\n")
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("published %s: %q, %v; want %q", path, b, err, want)
	}

	changed := make(chan struct{}, 1)
	cfg.OnChange = wakeUp(changed)
	second := jobs.New(st, cfg)
	second.Register(Name, kind)
	if err := second.Start(t.Context()); err != nil { // its start-up sweep recovers
		t.Fatal(err)
	}
	defer second.Stop()
	done, err := st.Get(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	size, sum, err := jobs.HashFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != store.StatusSucceeded || done.Attempt != 1 || done.FileName != j.ID+CSVExt ||
		done.FileSize != size || done.FileSHA256 != sum || done.ProgressRows != 2 {
		t.Fatalf("after the restart: %s attempt %d, file %q (%d bytes, %s), %d rows; want SUCCEEDED from %s.csv (%d bytes, %s), 2 rows",
			done.Status, done.Attempt, done.FileName, done.FileSize, done.FileSHA256, done.ProgressRows, j.ID, size, sum)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the export ran %d times, want once", n)
	}
	evs, err := st.Events(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e store.Event) bool { return e.Type == store.EventCompletedFromFile }) {
		t.Errorf("events %v lack %s", evs, store.EventCompletedFromFile)
	}
}

// countingSource counts how many times its rows are streamed.
type countingSource struct {
	runs *atomic.Int64
	src  Source
}

func (c countingSource) Stream(ctx context.Context, q Query, w RowWriter) error {
	c.runs.Add(1)
	return c.src.Stream(ctx, q, w)
}
