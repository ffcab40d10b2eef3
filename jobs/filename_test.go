package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
)

// csvKind is a kind that names its file (jobs.FileNamer), as the export kind does.
type csvKind struct{ jobs.HandlerFunc }

func (csvKind) FileName(id string, _ json.RawMessage) string { return id + ".csv" }

// The job's kind names its published file: the engine publishes and records it under
// that name, and recovery completes an orphan from the file of that name (rule 5).
func TestKindNamesItsFile(t *testing.T) {
	h := newHarness(t)
	write := csvKind{func(ctx context.Context, run *jobs.Run) error {
		w, err := run.Output()
		if err != nil {
			return err
		}
		_, err = w.Write(payload(run.JobID))
		return err
	}}
	e := h.start(t, h.config(), map[string]jobs.Handler{"csv": write})
	j := enqueue(t, e, "csv", 0)
	done := h.waitStatus(t, j.ID, store.StatusSucceeded)
	if done.FileName != j.ID+".csv" {
		t.Fatalf("recorded file name %q, want %s.csv", done.FileName, j.ID)
	}
	if b, err := os.ReadFile(jobs.FilePath(h.exports, done.FileName)); err != nil || !bytes.Equal(b, payload(j.ID)) {
		t.Fatalf("published file: %q, %v", b, err)
	}
	e.Stop()

	// An orphan whose file was published under its kind's name before a crash.
	orphan := enqueueStore(t, h.st, "csv", store.NewJob{})
	if _, err := h.st.Claim(context.Background(), "dead/1", store.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs.FilePath(h.exports, orphan.ID+".csv"), []byte("published"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := h.config()
	cfg.StaleAfter = time.Hour // only the start-up sweep recovers
	h.start(t, cfg, map[string]jobs.Handler{"csv": write})
	if got := h.waitStatus(t, orphan.ID, store.StatusSucceeded); got.FileName != orphan.ID+".csv" || got.FileSize != int64(len("published")) {
		t.Fatalf("orphan completed as %+v, want from %s.csv", got, orphan.ID)
	}
	if evs := eventTypes(h.events(t, orphan.ID)); evs[len(evs)-1] != store.EventCompletedFromFile {
		t.Fatalf("orphan's events = %v", evs)
	}
}

// FilePath never leaves the exports folder nor names the folder itself.
func TestFilePathTakesOnlyAFileName(t *testing.T) {
	if got, want := jobs.FilePath("/x/exports", "a.xlsx"), filepath.Join("/x/exports", "a.xlsx"); got != want {
		t.Errorf("FilePath = %q, want %q", got, want)
	}
	for _, name := range []string{"", ".", "..", "../a", "a/b", "/etc/passwd"} {
		if got := jobs.FilePath("/x/exports", name); got != "" {
			t.Errorf("FilePath(%q) = %q, want none", name, got)
		}
	}
}
