//go:build !windows

package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sheetq/internal/client"
)

// Kills inside the batches of rule 28, then the crash matrix's checks: 0 lost, 0
// duplicated, one file per success, nothing left behind.
//
//   - after-batch-claim: a claim that took several jobs has committed and none of them
//     has started. The restart's sweep must recover every one of them.
//   - mid-batch-end: inside a transaction of several ends, the first end is written (and
//     its file published) and the transaction is not committed. The restart must
//     complete the published one from its file and run the others again, each once.
func TestCrashInsideBatches(t *testing.T) {
	t.Run("after-batch-claim", func(t *testing.T) {
		data := t.TempDir()
		l := newLedger(t)
		// One worker, held by a long job, while four more wait behind it.
		p := launch(t, data, nil, append(crashArgs(t), "--workers", "1")...)
		if p.url == "" {
			t.Fatalf("sheetq did not start\n%s", p.log())
		}
		l.submit(p.url, "long", `{"report":"demo","params":{"rows":50,"seconds":3}}`)
		p.waitJob(t, l.snapshot()["long"], "PROCESSING", func(j client.Job) bool { return j.Status == "PROCESSING" })
		for i := range 4 {
			l.submit(p.url, fmt.Sprintf("waiting-%d", i), `{"report":"demo","params":{"rows":100}}`)
		}
		p.kill(t)
		// Four workers: the first claim after the start-up sweep takes several jobs at
		// once, and the process dies right after that claim committed.
		q := launch(t, data, []string{"SHEETQ_FAULT=after-batch-claim"}, append(crashArgs(t), "--workers", "4")...)
		waitFaultKilled(t, q, "after-batch-claim")
		if n := countStatus(t, data, "PROCESSING"); n < 2 {
			t.Fatalf("%d jobs PROCESSING after the kill; the batch claim should have left at least 2", n)
		}
		drain(t, data, l)
		checkBatchCrash(t, data, l, 5)
	})

	t.Run("mid-batch-end", func(t *testing.T) {
		data := t.TempDir()
		l := newLedger(t)
		p := launch(t, data, []string{"SHEETQ_FAULT=mid-batch-end"}, append(crashArgs(t), "--workers", "8")...)
		if p.url == "" {
			t.Fatalf("sheetq did not start\n%s", p.log())
		}
		// Rounds of small jobs sent at once until two ends meet in one transaction: most
		// rounds have none (ends spread out over the jobs' run times), one in a few does.
		next := 0
		for round := 0; !p.faultKilled(); round++ {
			if round == 40 {
				t.Fatalf("no transaction carried two ends in %d rounds of 16 jobs\n%s", round, p.log())
			}
			var wg sync.WaitGroup
			for range 16 {
				next++
				key := fmt.Sprintf("small-%d", next)
				wg.Go(func() { l.submit(p.url, key, `{"report":"demo","params":{"rows":5}}`) })
			}
			wg.Wait()
			waitUntil(t, 30*time.Second, func() bool { return p.faultKilled() || allFinal(t, data) })
		}
		t.Logf("killed in a round of 16 jobs after %d were sent", next)
		waitFaultKilled(t, p, "mid-batch-end")
		drain(t, data, l)
		checkBatchCrash(t, data, l, len(l.snapshot()))
		// The batch's first end had published its file when the process died: the restart
		// completed that job from its file instead of running it again (rule 5).
		if n := countEventType(t, data, "completed_from_file"); n < 1 {
			t.Fatalf("%d jobs completed from their file; want the batch's first end to be", n)
		}
	})
}

// waitFaultKilled waits for p to die at point.
func waitFaultKilled(t *testing.T, p *proc, point string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not fire\n%s", point, p.log())
	}
	if !p.faultKilled() {
		t.Fatalf("the process exited without reaching %s: %v\n%s", point, p.err, p.log())
	}
}

// checkBatchCrash runs the crash matrix's checker and wants every invariant whole.
func checkBatchCrash(t *testing.T, data string, l *ledger, want int) {
	t.Helper()
	inv := checkInvariants(t, data, l.snapshot())
	t.Logf("jobs=%d succeeded=%d lost=%d duplicated=%d unexpected=%d not_final=%d bad_files=%d leftover_files=%d",
		inv.jobs, inv.succeeded, inv.lost, inv.duplicated, inv.unexpected, inv.notFinal, inv.badFiles, inv.leftoverFiles)
	if inv.jobs != want || inv.succeeded != want {
		t.Fatalf("%d jobs, %d SUCCEEDED; want %d of each", inv.jobs, inv.succeeded, want)
	}
}

// countStatus counts the export jobs in status, read from the server's file (WAL lets a
// reader in beside a running server).
func countStatus(t *testing.T, data, status string) int {
	return count(t, data, `SELECT COUNT(*) FROM jobs WHERE kind = 'export' AND status = ?`, status)
}

// countEventType counts the events of type typ.
func countEventType(t *testing.T, data, typ string) int {
	return count(t, data, `SELECT COUNT(*) FROM job_events WHERE type = ?`, typ)
}

// count runs a COUNT query on the data directory's database, read-only.
func count(t *testing.T, data, query string, args ...any) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "sheetq.db")+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// allFinal reports whether no export job is PENDING or PROCESSING.
func allFinal(t *testing.T, data string) bool {
	return countStatus(t, data, "PENDING")+countStatus(t, data, "PROCESSING") == 0
}

// waitUntil polls cond every 20 ms until it holds, failing the test after limit.
func waitUntil(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
