package export

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// TestJobRunsTheReportAsAccepted (ARCHITECTURE.md, rule 26): a job accepted before its
// report file changed runs the report as it was when accepted (export.Args.Spec), not
// the file on disk when a worker gets to it; a job accepted after the change runs the new
// one.
func TestJobRunsTheReportAsAccepted(t *testing.T) {
	dir := t.TempDir()
	dbPath, _ := newSQLiteItems(t)
	src, err := OpenSource("shop", SourceConfig{Driver: "sqlite", Path: dbPath}, dir)
	if err != nil {
		t.Fatal(err)
	}
	reports := filepath.Join(dir, "reports")
	if err := os.MkdirAll(reports, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(reports, "items.sql")
	writeReportFile(t, file, "-- title: Names\n-- source: shop\n-- sheet: Items\nSELECT name FROM items ORDER BY id\n")
	cat := NewCatalog(reports, nil, nil)
	if err := cat.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Stop)
	kind := New(Config{TmpDir: filepath.Join(dir, "spill"), Library: cat, Sources: map[string]Source{"shop": src}})

	accept := func() []byte {
		t.Helper()
		args, err := kind.Validate("items", nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	before := accept()
	writeReportFile(t, file, "-- title: Notes\n-- source: shop\n-- sheet: Items\nSELECT note FROM items ORDER BY id\n")
	waitCatalog(t, cat, "items=Notes")
	after := accept()

	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	changed := make(chan struct{}, 1)
	eng := jobs.New(st, jobs.Config{Workers: 1, TmpDir: filepath.Join(dir, "tmp"), ExportsDir: filepath.Join(dir, "exports"),
		Logger: slog.New(slog.DiscardHandler), OnChange: wakeUp(changed)})
	eng.Register(Name, kind)
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()

	for _, tc := range []struct {
		args   []byte
		header string
	}{{before, "name"}, {after, "note"}} {
		j, _, err := eng.Enqueue(t.Context(), store.NewJob{Kind: Name, Args: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(time.Minute) // a safety net: changed is the signal
		for !j.Status.Final() {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("job %s did not finish: %s", j.ID, j.Status)
			}
			if j, err = st.Get(t.Context(), j.ID); err != nil {
				t.Fatal(err)
			}
		}
		if j.Status != store.StatusSucceeded {
			t.Fatalf("job %s: %s %s", j.Status, j.ErrorCode, j.ErrorMessage)
		}
		f, err := excelize.OpenFile(jobs.FilePath(filepath.Join(dir, "exports"), j.FileName))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := f.GetRows("Items")
		f.Close()
		if err != nil || len(rows) == 0 || len(rows[0]) == 0 || rows[0][0] != tc.header {
			t.Errorf("job accepted for %q: rows %v (%v), want the header %q", tc.header, rows, err, tc.header)
		}
	}
}
