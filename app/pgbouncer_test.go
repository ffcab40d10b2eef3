package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"sheetq/internal/apiv1"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

// The tests in this file share PgBouncer's one schema (pgtest.Bouncer): none runs in
// parallel.

// TestPollOnlyNodesThroughPgBouncer: two --poll-only nodes that reach PostgreSQL through
// a real PgBouncer in transaction mode (README, "Several nodes") share one queue as
// nodes with LISTEN do: an export accepted on n1, whose engine is stopped, runs on n2 and
// downloads from both; an Idempotency-Key repeated on n2 replays; a cancel on n1 reaches
// the job running on n2; n1's event stream sees n2's events.
func TestPollOnlyNodesThroughPgBouncer(t *testing.T) {
	via, _ := pgtest.Bouncer(t)
	b := objstoretest.Bucket(t)
	opts := func(node string, idle bool) testOpts {
		return testOpts{Store: via, PollOnly: true, Files: b.URL("team"), Node: node, Idle: idle,
			FilesAccessKey: b.AccessKey, FilesSecretKey: b.SecretKey}
	}
	n1, n2 := newTestServer(t, opts("n1", true)), newTestServer(t, opts("n2", false))
	stream := openEvents(t, n1, "", "")

	const body = `{"report":"demo","params":{"rows":5}}`
	res := n1.post(body, "bouncer-key-1")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST on n1: status %d, want 202: %s", res.StatusCode, res.body)
	}
	j := decodeJob(t, res)
	again := n2.post(body, "bouncer-key-1")
	if again.Header.Get("Idempotent-Replayed") != "true" || decodeJob(t, again).ID != j.ID {
		t.Fatalf("the same Idempotency-Key on n2: status %d, Idempotent-Replayed %q, body %s; want a replay of job %s",
			again.StatusCode, again.Header.Get("Idempotent-Replayed"), again.body, j.ID)
	}
	done, _ := n1.waitStatus(j.ID, store.StatusSucceeded)
	if done.Attempt != 1 {
		t.Fatalf("attempt %d, want 1", done.Attempt)
	}
	if w := startedBy(t, n1, j.ID); w != "n2" {
		t.Fatalf("the job started on %q, want n2: n1's engine is stopped", w)
	}
	f1, f2 := n1.get("/api/v1/exports/"+j.ID+"/file"), n2.get("/api/v1/exports/"+j.ID+"/file")
	if f1.StatusCode != http.StatusOK || f2.StatusCode != http.StatusOK {
		t.Fatalf("download: n1 %d, n2 %d, want 200 from both", f1.StatusCode, f2.StatusCode)
	}
	if !bytes.Equal(f1.body, f2.body) || !bytes.HasPrefix(f1.body, []byte("PK")) || int64(len(f1.body)) != done.File.Size {
		t.Fatalf("download: n1 %d bytes, n2 %d bytes, recorded %d; want the same xlsx from both", len(f1.body), len(f2.body), done.File.Size)
	}

	// A job that would run a day: canceled on n1, it ends on n2, which learns of the
	// cancel from its heartbeat (no LISTEN here).
	slow := n1.create(never)
	if got, _ := n1.waitStatus(slow.ID, store.StatusProcessing); startedBy(t, n1, slow.ID) != "n2" {
		t.Fatalf("the slow job is %s, started on %q; want it running on n2", got.Status, startedBy(t, n1, slow.ID))
	}
	if res := n1.action(slow.ID, "cancel"); res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("cancel on n1: status %d: %s", res.StatusCode, res.body)
	}
	n2.waitStatus(slow.ID, store.StatusCanceled)

	// n1 tails the shared event log: it sees both jobs' events, which n2 wrote, in order.
	seen := map[string][]string{}
	for !(last(seen[j.ID]) == "succeeded" && last(seen[slow.ID]) == "canceled") {
		ev := stream.nextState()
		var d apiv1.StateEvent
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || !ev.HasID {
			t.Fatalf("event %s (id %q): %v: %s", ev.Type, ev.LastID, err, ev.Data)
		}
		seen[d.Job.ID] = append(seen[d.Job.ID], ev.Type)
	}
	if want := []string{"accepted", "started", "succeeded"}; !equalStrings(seen[j.ID], want) {
		t.Fatalf("n1's stream for the first job: %v, want %v", seen[j.ID], want)
	}
	if want := []string{"accepted", "started", "cancel_requested", "canceled"}; !equalStrings(seen[slow.ID], want) {
		t.Fatalf("n1's stream for the canceled job: %v, want %v", seen[slow.ID], want)
	}
}

// TestNodeWithoutPollOnlyRefusesPgBouncer: a node without --poll-only behind PgBouncer in
// transaction mode would LISTEN on a server connection that goes to another client after
// the statement (PgBouncer accepts the LISTEN without a word, and no wake-up ever comes),
// and its cached prepared statements would meet other server connections ("prepared
// statement does not exist"). It refuses to start instead, saying to use --poll-only.
func TestNodeWithoutPollOnlyRefusesPgBouncer(t *testing.T) {
	via, _ := pgtest.Bouncer(t)
	a, err := New(context.Background(), testConfig(t, testOpts{Store: via, Node: "n1"}))
	if err == nil {
		a.Stop()
		t.Fatal("a node without --poll-only started behind PgBouncer in transaction mode")
	}
	t.Logf("refused: %v", err)
	if !errors.Is(err, pg.ErrTransactionPooler) || !strings.Contains(err.Error(), "--poll-only") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %q; want one line that names the pooler and --poll-only", err)
	}
	if strings.Contains(err.Error(), "sheetq_pgb_test_pw") {
		t.Fatalf("error %q shows the password", err)
	}
}

// startedBy is the worker of the job's first started event ("" without one).
func startedBy(t *testing.T, ts *testServer, id string) string {
	t.Helper()
	evs, err := ts.store.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		var d store.StartedData
		if ev.Type == "started" && json.Unmarshal(ev.Data, &d) == nil {
			return d.Worker
		}
	}
	return ""
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}
