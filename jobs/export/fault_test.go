package export

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// brokenStream is a source that sends rows and then fails, the way a database
// connection reset in the middle of a result set does, on its first failures attempts.
type brokenStream struct {
	rows, after int64
	failures    int
}

func (s brokenStream) Stream(ctx context.Context, q Query, w RowWriter) error {
	if err := w.Begin([]Column{{Name: "id", Type: TypeInt}, {Name: "name", Type: TypeText}}, s.rows); err != nil {
		return err
	}
	for i := range s.rows {
		if q.Attempt <= s.failures && i == s.after {
			return jobs.Retryable("upstream", fmt.Errorf("source mem: connection reset by peer after %d rows", i))
		}
		if err := w.Row([]any{i + 1, fmt.Sprintf("row %d", i+1)}); err != nil {
			return err
		}
	}
	return nil
}

// A source that fails in the middle of its rows: the attempt fails with the source's
// message, is retried, and no half-written file is ever published: after each failed
// attempt the exports and tmp folders are empty. With the failure gone, the retry
// publishes the whole file.
func TestSourceFailingMidStreamPublishesNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		want     store.Status
	}{
		{"recovers on retry", 2, store.StatusSucceeded},
		{"fails every attempt", 3, store.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tmp, exports := filepath.Join(dir, "tmp"), filepath.Join(dir, "exports")
			st, err := sqlite.Open(t.Context(), filepath.Join(dir, "sheetq.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var (
				mu       sync.Mutex
				problems []string
			)
			changed := make(chan struct{}, 1)
			var id atomic.Value // the job's id, once Enqueue has returned it
			eng := jobs.New(st, jobs.Config{
				Workers: 1, TmpDir: tmp, ExportsDir: exports,
				BackoffBase: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler),
				OnChange: func() {
					defer wakeUp(changed)()
					jid, _ := id.Load().(string)
					if jid == "" {
						return
					}
					// Called right after each commit: once a failed attempt has been
					// recorded, nothing of it may be left.
					j, err := st.Get(context.Background(), jid)
					if err != nil {
						mu.Lock()
						problems = append(problems, err.Error())
						mu.Unlock()
						return
					}
					if j.Status == store.StatusPending && j.Attempt > 0 || j.Status == store.StatusFailed {
						for _, d := range []string{tmp, exports} {
							if left, _ := os.ReadDir(d); len(left) > 0 {
								mu.Lock()
								problems = append(problems, fmt.Sprintf("after attempt %d: %s holds %v", j.Attempt, d, left))
								mu.Unlock()
							}
						}
					}
				},
			})
			rep := Report{ID: "broken", Title: "Broken", Source: "mem", Sheet: "Rows"}
			kind := New(Config{TmpDir: tmp, Library: oneReport{rep},
				Sources: map[string]Source{"mem": brokenStream{rows: 5000, after: 3000, failures: tc.failures}}})
			eng.Register(Name, kind)
			if err := eng.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer eng.Stop()
			j := runExport(t, eng, st, kind, "broken", 3, changed, &id)
			mu.Lock()
			for _, p := range problems {
				t.Error(p)
			}
			mu.Unlock()
			if j.Status != tc.want {
				t.Fatalf("job %s (%s: %s), want %s", j.Status, j.ErrorCode, j.ErrorMessage, tc.want)
			}
			ev, err := st.Events(t.Context(), j.ID)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, e := range ev {
				if e.Type == store.EventAttemptFailed || e.Type == store.EventFailed {
					msgs = append(msgs, string(e.Data))
				}
			}
			if len(msgs) != tc.failures {
				t.Fatalf("%d failed-attempt events, want %d: %v", len(msgs), tc.failures, msgs)
			}
			for _, m := range msgs {
				if !strings.Contains(m, "connection reset by peer after 3000 rows") {
					t.Errorf("event %s does not carry the source's message", m)
				}
			}
			files, _ := os.ReadDir(exports)
			if tc.want == store.StatusFailed {
				if len(files) != 0 || j.FileName != "" {
					t.Errorf("a failed job published %v (%q)", files, j.FileName)
				}
				return
			}
			if len(files) != 1 || j.ProgressRows != 5000 {
				t.Errorf("published %v with %d rows, want one file of 5000 rows", files, j.ProgressRows)
			}
		})
	}
}
