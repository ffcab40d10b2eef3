package jobs_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/storetest"
)

// fullDiskHarness is a harness whose database lives on a small tmpfs of its own, so that
// the test can fill that file system (SQLite then fails commits with SQLITE_FULL) and
// free it again. Part files and exports stay on the ordinary disk. Mounting needs root:
// without it the test is skipped, unless CI is set (CI runs as root and must run it).
func fullDiskHarness(t *testing.T) (h *harness, mnt string) {
	t.Helper()
	dir := t.TempDir()
	mnt = filepath.Join(dir, "db")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// Mounted before the store opens, so the unmount runs after the store is closed.
	storetest.MountTmpfs(t, mnt, 8<<20)
	h = &harness{dir: dir, dbPath: filepath.Join(mnt, "sheetq.db"),
		tmp: filepath.Join(dir, "tmp"), exports: filepath.Join(dir, "exports")}
	h.st = h.openStore(t)
	return h, mnt
}

// TestOutcomeRecordedOnceStoreWritesAgain: an attempt ends while the database cannot
// take a write (its disk is full: SQLITE_FULL). The engine keeps the outcome and retries
// recording it, so the job leaves PROCESSING soon after space returns, without waiting
// for a reaper (there is none within the test). A finished export keeps its part file
// for that, and is published once: SUCCEEDED on its first attempt, with its file.
func TestOutcomeRecordedOnceStoreWritesAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ret    error
		status store.Status
		last   string // the last event
	}{
		{"success", nil, store.StatusSucceeded, store.EventSucceeded},
		{"failure", jobs.Permanentf("bad_params", "no such column"), store.StatusFailed, store.EventFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, mnt := fullDiskHarness(t)
			logs := newLogRecorder()
			cfg := h.config()
			cfg.Logger = slog.New(logs)
			cfg.Heartbeat = time.Hour // only the outcome meets the full disk
			cfg.StaleAfter = 2 * time.Hour
			started := make(chan string, 10)
			release := make(chan struct{})
			var calls calls
			e := h.start(t, cfg, map[string]jobs.Handler{"test": gated(7, started, release, tc.ret, &calls)})
			j := enqueue(t, e, "test", 3)
			recv(t, "handler start", started)

			free := storetest.FillDisk(t, mnt)
			close(release)
			logs.wait(t, "cannot record the outcome")
			if got, err := h.st.Get(context.Background(), j.ID); err != nil || got.Status != store.StatusProcessing {
				t.Fatalf("while the disk is full the job is %+v, %v; want PROCESSING", got, err)
			}
			free()

			done := h.waitStatus(t, j.ID, tc.status)
			if done.Attempt != 1 {
				t.Fatalf("job = %+v, want it ended on attempt 1", done)
			}
			evs := eventTypes(h.events(t, j.ID))
			if want := []string{store.EventAccepted, store.EventStarted, tc.last}; !slices.Equal(evs, want) {
				t.Fatalf("events = %v, want %v", evs, want)
			}
			if c := calls.of(j.ID); !slices.Equal(c, []int{1}) {
				t.Fatalf("handler calls = %v, want one", c)
			}
			if tc.status == store.StatusSucceeded {
				if b, err := os.ReadFile(jobs.FilePath(h.exports, j.ID)); err != nil || !bytes.Equal(b, payload(j.ID)) {
					t.Fatalf("published file = %q, %v", b, err)
				}
				if done.ProgressRows != 7 || done.FileSize != int64(len(payload(j.ID))) {
					t.Fatalf("succeeded job = %+v", done)
				}
				if parts := h.partFiles(t); len(parts) > 0 {
					t.Fatalf("part files left: %v", parts)
				}
			} else {
				h.noFile(t, j.ID)
			}
			waitFor(t, "the slot to be free", func() bool { return e.Running() == 0 })
		})
	}
}
