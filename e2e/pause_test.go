//go:build !windows

package e2e

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"sheetq/internal/client"
	"sheetq/store"
)

// A paused process (SIGSTOP for longer than --stale-after, then SIGCONT: a frozen VM or
// a closed laptop lid looks the same) keeps the jobs its workers run. After each pause
// its reaper finds their heartbeats stale, but renews the leases of its own attempts
// instead of taking them back. Every job ends SUCCEEDED on attempt 1, started once and
// never recovered.
func TestPausedProcessKeepsItsJobs(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, data, nil, "--heartbeat", "500ms", "--stale-after", "1s", "--workers", "3")
	var ids []string
	for range 3 {
		ids = append(ids, p.submit(t, `{"report":"demo","params":{"rows":4000,"seconds":8}}`).ID)
	}
	for _, id := range ids {
		p.waitJob(t, id, "PROCESSING with progress", func(j client.Job) bool { return j.Status == "PROCESSING" && j.Progress.Rows > 0 })
	}
	for range 3 {
		// Pause right after a heartbeat: the next one is then due later than the
		// reaper's next pass, which on resume comes first, as it did in the pauses
		// that re-ran jobs before the fix.
		p.waitHeartbeat(t, ids[0])
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// The pause is the fault itself, not a wait for something: 1.5 s is longer than
		// --stale-after, so that every lease looks stale when the process resumes.
		time.Sleep(1500 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// Let the process run for a few reaper passes before the next pause; a job that
		// was taken back would show as PENDING or with a second attempt.
		for _, id := range ids {
			rows := p.get(t, id).Progress.Rows
			p.waitJob(t, id, "on attempt 1, progressing after the pause", func(j client.Job) bool {
				if j.Attempt != 1 || j.Status == "PENDING" {
					t.Fatalf("job %s after a pause: %s on attempt %d, want still on attempt 1\n%s", id, j.Status, j.Attempt, p.log())
				}
				return j.Status == "SUCCEEDED" || j.Progress.Rows > rows
			})
		}
	}
	for _, id := range ids {
		p.waitJob(t, id, "SUCCEEDED", func(j client.Job) bool { return j.Status != "PENDING" && j.Status != "PROCESSING" })
	}
	p.kill(t)
	for _, id := range ids {
		row, ev := inspect(t, data, id)
		if row.Status != store.StatusSucceeded || row.Attempt != 1 {
			t.Errorf("job %s: %s on attempt %d (%s: %s), want SUCCEEDED on attempt 1", id, row.Status, row.Attempt, row.ErrorCode, row.ErrorMessage)
		}
		if n := countEvents(ev, store.EventStarted); n != 1 {
			t.Errorf("job %s started %d times, want once", id, n)
		}
		if n := countEvents(ev, store.EventRecovered); n != 0 {
			t.Errorf("job %s was recovered %d times, want never", id, n)
		}
	}
}

// waitHeartbeat waits until the job's heartbeat_at moves: a heartbeat has just been
// stamped.
func (p *proc) waitHeartbeat(t *testing.T, id string) {
	t.Helper()
	beat := func() time.Time {
		resp, err := http.Get(p.url + "/api/v1/exports/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var j struct {
			HeartbeatAt time.Time `json:"heartbeat_at"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
			t.Fatal(err)
		}
		return j.HeartbeatAt
	}
	first, deadline := beat(), time.Now().Add(30*time.Second)
	for beat().Equal(first) {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat for job %s\n%s", id, p.log())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
