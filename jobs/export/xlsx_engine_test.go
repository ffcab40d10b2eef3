package export

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// oneReport is a Library with a single report.
type oneReport struct{ rep Report }

func (l oneReport) Report(id string) (Report, error) {
	if id != l.rep.ID {
		return Report{}, fmt.Errorf("%w %q", ErrUnknownReport, id)
	}
	return l.rep, nil
}

// An export run by the engine: the file the writer streams into the part file is the
// published one, with the size and hash recorded, and the writer's warnings are the
// job's.
func TestExportJobPublishesFileAndWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	changed := make(chan struct{}, 1)
	eng := jobs.New(st, jobs.Config{
		Workers:    1,
		TmpDir:     filepath.Join(dir, "tmp"),
		ExportsDir: filepath.Join(dir, "exports"),
		Logger:     slog.New(slog.DiscardHandler),
		OnChange:   wakeUp(changed),
	})
	long := strings.Repeat("long text ", 4000)
	src := sliceSource{
		cols:  []Column{{Name: "id", Type: TypeInt}, {Name: "note", Type: TypeText}, {Name: "memo", Type: TypeText}},
		rows:  [][]any{{int64(1), long, "short"}, {int64(2), long, long}, {int64(3), "short", nil}},
		total: 3,
	}
	rep := Report{ID: "long", Title: "Long text", Source: "mem", Sheet: "Long"}
	at := time.Date(2025, 6, 30, 8, 15, 42, 0, time.Local)
	kind := New(Config{TmpDir: filepath.Join(dir, "spill"), Library: oneReport{rep}, Sources: map[string]Source{"mem": src},
		Now: func() time.Time { return at }, Version: "9.9.9-test"})
	eng.Register(Name, kind)
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()
	j := runExport(t, eng, st, kind, "long", 0, changed, nil)
	if j.Status != store.StatusSucceeded {
		t.Fatalf("job %s: %s %s", j.Status, j.ErrorCode, j.ErrorMessage)
	}
	want := []string{
		`column "note": 2 values longer than 32,767 characters were cut`,
		`column "memo": 1 value longer than 32,767 characters was cut`,
	}
	if !slices.Equal(j.Warnings, want) {
		t.Errorf("warnings = %q, want %q", j.Warnings, want)
	}

	if j.FileName != j.ID+FileExt {
		t.Errorf("published as %q, want the kind's name %s%s", j.FileName, j.ID, FileExt)
	}
	data, err := os.ReadFile(jobs.FilePath(filepath.Join(dir, "exports"), j.FileName))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != j.FileSize || hex.EncodeToString(sum[:]) != j.FileSHA256 {
		t.Errorf("file of %d bytes, sha256 %x; the job says %d bytes, %s", len(data), sum, j.FileSize, j.FileSHA256)
	}
	checkZipTimes(t, data, at) // the export's time, not 1980-00-00
	f, err := excelize.OpenFile(jobs.FilePath(filepath.Join(dir, "exports"), j.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The document properties name the report, sheetq with the configured version,
	// and the export's time.
	props, err := f.GetDocProps()
	if err != nil {
		t.Fatal(err)
	}
	stamp := at.UTC().Format(time.RFC3339)
	if props.Title != "Long text" || props.Creator != "sheetq" || props.Created != stamp || props.Modified != stamp {
		t.Errorf("document properties %+v, want title Long text, creator sheetq, created and modified %s", props, stamp)
	}
	if app, err := f.GetAppProps(); err != nil || app.Application != "sheetq 9.9.9-test" {
		t.Errorf("application %+v (%v), want sheetq 9.9.9-test", app, err)
	}
	rows, err := f.GetRows("Long")
	if err != nil || len(rows) != 4 || !strings.HasSuffix(rows[2][2], " characters]") {
		t.Fatalf("rows = %d (%v)", len(rows), err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "spill")); len(left) > 0 {
		t.Errorf("spill directory not empty: %v", left)
	}
}

// runExport enqueues one export of report (no params) on the started eng and returns the
// job once it is final; the engine's OnChange feeds changed (wakeUp).
// When id is not nil, the job's id is stored in it once Enqueue returns.
func runExport(t *testing.T, eng *jobs.Engine, st *store.Store, kind *Kind, report string, maxAttempts int, changed <-chan struct{}, id *atomic.Value) store.Job {
	t.Helper()
	args, err := kind.Validate(report, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := eng.Enqueue(t.Context(), store.NewJob{Kind: Name, Args: raw, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	if id != nil {
		id.Store(j.ID)
	}
	return waitFinal(t, st, j.ID, changed)
}

// waitFinal returns job id once it is final; changed is the engine's OnChange (wakeUp).
func waitFinal(t *testing.T, st *store.Store, id string, changed <-chan struct{}) store.Job {
	t.Helper()
	deadline := time.After(time.Minute) // a safety net, not a wait: changed is the signal
	for {
		j, err := st.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Final() {
			return j
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the job did not finish: %s", j.Status)
			return store.Job{}
		}
	}
}

// wakeUp is an OnChange hook that leaves one pending wake-up in changed.
func wakeUp(changed chan<- struct{}) func() {
	return func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}
