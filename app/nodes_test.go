package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/store"
	"sheetq/store/storetest/pgtest"
)

// twoNodes starts two servers on the PostgreSQL store dsn and one bucket, each with its
// own data directory, as docs/several-nodes.md runs them (with --poll-only when
// pollOnly); n1's engine stays stopped, so that every job must run on n2.
func twoNodes(t *testing.T, dsn string, pollOnly bool) (n1, n2 *testServer) {
	t.Helper()
	b := objstoretest.Bucket(t)
	opts := func(node string, idle bool) testOpts {
		return testOpts{Store: dsn, PollOnly: pollOnly, Files: b.URL("team"), Node: node, Idle: idle,
			FilesAccessKey: b.AccessKey, FilesSecretKey: b.SecretKey}
	}
	return newTestServer(t, opts("n1", true)), newTestServer(t, opts("n2", false))
}

// runOnTheOtherNode posts an export with Idempotency-Key key on n1, repeats it on n2
// (a replay of the same job), and checks that n2 ran it, once, and that both nodes
// serve the same file.
func runOnTheOtherNode(t *testing.T, n1, n2 *testServer, key string) apiv1.Job {
	t.Helper()
	const body = `{"report":"demo","params":{"rows":5}}`
	res := n1.Post(body, key)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST on n1: status %d, want 202: %s", res.StatusCode, res.Body)
	}
	j := apptest.DecodeJob(t, res)
	again := n2.Post(body, key)
	if again.Header.Get("Idempotent-Replayed") != "true" || apptest.DecodeJob(t, again).ID != j.ID {
		t.Fatalf("the same Idempotency-Key on n2: status %d, Idempotent-Replayed %q, body %s; want a replay of job %s",
			again.StatusCode, again.Header.Get("Idempotent-Replayed"), again.Body, j.ID)
	}
	done, _ := n1.WaitStatus(j.ID, store.StatusSucceeded)
	if done.Attempt != 1 {
		t.Fatalf("attempt %d, want 1", done.Attempt)
	}
	if w := startedBy(t, n1, j.ID); w != "n2" {
		t.Fatalf("the job started on %q, want n2: n1's engine is stopped", w)
	}
	f1, f2 := n1.Get("/api/v1/exports/"+j.ID+"/file"), n2.Get("/api/v1/exports/"+j.ID+"/file")
	if f1.StatusCode != http.StatusOK || f2.StatusCode != http.StatusOK {
		t.Fatalf("download: n1 %d, n2 %d, want 200 from both", f1.StatusCode, f2.StatusCode)
	}
	if !bytes.Equal(f1.Body, f2.Body) || !bytes.HasPrefix(f1.Body, []byte("PK")) || int64(len(f1.Body)) != done.File.Size {
		t.Fatalf("download: n1 %d bytes, n2 %d bytes, recorded %d; want the same xlsx from both", len(f1.Body), len(f2.Body), done.File.Size)
	}
	return done
}

// startedBy is the worker that started job id, from its "started" event.
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

// stateEvents reads stream's state events, by job, until done says it has seen enough.
func stateEvents(t *testing.T, stream *sseClient, done func(seen map[string][]string) bool) map[string][]string {
	t.Helper()
	seen := map[string][]string{}
	for !done(seen) {
		ev := stream.nextState()
		var d apiv1.StateEvent
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || !ev.HasID {
			t.Fatalf("event %s (id %q): %v: %s", ev.Type, ev.LastID, err, ev.Data)
		}
		seen[d.Job.ID] = append(seen[d.Job.ID], ev.Type)
	}
	return seen
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestTwoNodesShareOneQueue: an export accepted on one node runs on another, and every
// node serves it: its state, its file (streamed from the bucket) and its events, and an
// Idempotency-Key repeated on the other node returns the same job.
func TestTwoNodesShareOneQueue(t *testing.T) {
	n1, n2 := twoNodes(t, pgtest.FreshSchema(t), false)
	stream := openEvents(t, n1, "", "")
	j := runOnTheOtherNode(t, n1, n2, "shared-key-1")
	// n1 tails the shared event log: it sees the events of a job n2 ran, once each, in order.
	seen := stateEvents(t, stream, func(seen map[string][]string) bool { return last(seen[j.ID]) == "succeeded" })
	if want := []string{"accepted", "started", "succeeded"}; !slices.Equal(seen[j.ID], want) {
		t.Fatalf("n1's stream for the job: %v, want %v", seen[j.ID], want)
	}
}

// TestPostgresOutageAnswers503: while the database server cannot be reached, a request
// that needs it gets 503 store_unavailable with Retry-After, never a 500, /readyz says
// not ready, and once the server is back the same request is accepted, with no restart.
func TestPostgresOutageAnswers503(t *testing.T) {
	proxy, via := pgtest.NewProxy(t, pgtest.FreshSchema(t))
	ts := newTestServer(t, testOpts{Store: via, Node: "n1", Idle: true})
	const body = `{"report":"demo","params":{"rows":1}}`
	ts.Create(body)

	proxy.Cut()
	res := ts.Post(body, "")
	apptest.CheckProblem(t, res, http.StatusServiceUnavailable, "store_unavailable")
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After on a 503 of a database outage")
	}
	apptest.CheckProblem(t, ts.Get("/readyz"), http.StatusServiceUnavailable, "store_unavailable")

	proxy.Restore()
	apptest.WaitFor(t, streamWait, func() (bool, string) {
		res := ts.Post(body, "")
		return res.StatusCode == http.StatusAccepted, fmt.Sprintf("POST after the database came back: %d %s", res.StatusCode, res.Body)
	})
	if n := ts.jobCount(); n != 2 {
		t.Fatalf("%d jobs, want 2: the one accepted before the outage and the one after", n)
	}
}
