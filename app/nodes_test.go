package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"sheetq/internal/apiv1"
	"sheetq/internal/objstore/objstoretest"
	"sheetq/store"
	"sheetq/store/storetest/pgtest"
)

// twoNodes starts two servers on one PostgreSQL schema and one bucket, each with its own
// data directory, as README's "Several nodes" runs them; n1's engine stays stopped when
// idle1 is set, so that every job must run on n2.
func twoNodes(t *testing.T, idle1 bool) (n1, n2 *testServer) {
	t.Helper()
	dsn := pgtest.FreshSchema(t)
	b := objstoretest.Bucket(t)
	opts := func(node string, idle bool) testOpts {
		return testOpts{Store: dsn, Files: b.URL("team"), Node: node, Idle: idle,
			FilesAccessKey: b.AccessKey, FilesSecretKey: b.SecretKey}
	}
	return newTestServer(t, opts("n1", idle1)), newTestServer(t, opts("n2", false))
}

// TestTwoNodesShareOneQueue: an export accepted on one node runs on another, and every
// node serves it: its state, its file (streamed from the bucket) and its events, and an
// Idempotency-Key repeated on the other node returns the same job.
func TestTwoNodesShareOneQueue(t *testing.T) {
	n1, n2 := twoNodes(t, true)
	stream := openEvents(t, n1, "", "")

	const body = `{"report":"demo","params":{"rows":5}}`
	res := n1.post(body, "shared-key-1")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST on n1: status %d, want 202: %s", res.StatusCode, res.body)
	}
	j := decodeJob(t, res)
	again := n2.post(body, "shared-key-1")
	if again.Header.Get("Idempotent-Replayed") != "true" || decodeJob(t, again).ID != j.ID {
		t.Fatalf("the same Idempotency-Key on n2: status %d, Idempotent-Replayed %q, body %s; want a replay of job %s",
			again.StatusCode, again.Header.Get("Idempotent-Replayed"), again.body, j.ID)
	}

	done, _ := n1.waitStatus(j.ID, store.StatusSucceeded)
	if done.Attempt != 1 {
		t.Fatalf("attempt %d, want 1", done.Attempt)
	}
	row, err := n1.store.Get(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := n1.store.Events(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		var d store.StartedData
		if ev.Type == "started" && (json.Unmarshal(ev.Data, &d) != nil || d.Worker != "n2") {
			t.Fatalf("started event %s, want worker n2: n1's engine is stopped", ev.Data)
		}
	}

	f1, f2 := n1.get("/api/v1/exports/"+j.ID+"/file"), n2.get("/api/v1/exports/"+j.ID+"/file")
	if f1.StatusCode != http.StatusOK || f2.StatusCode != http.StatusOK {
		t.Fatalf("download: n1 %d, n2 %d, want 200 from both", f1.StatusCode, f2.StatusCode)
	}
	if !bytes.Equal(f1.body, f2.body) || !bytes.HasPrefix(f1.body, []byte("PK")) || int64(len(f1.body)) != row.FileSize {
		t.Fatalf("download: n1 %d bytes, n2 %d bytes, recorded %d; want the same xlsx from both", len(f1.body), len(f2.body), row.FileSize)
	}

	// n1 tails the shared event log: it sees the events of a job n2 ran, once each, in order.
	var seen []string
	for len(seen) == 0 || seen[len(seen)-1] != "succeeded" {
		ev := stream.nextState()
		var d apiv1.StateEvent
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || !ev.HasID {
			t.Fatalf("event %s (id %q): %v: %s", ev.Type, ev.LastID, err, ev.Data)
		}
		if d.Job.ID == j.ID {
			seen = append(seen, ev.Type)
		}
	}
	if want := []string{"accepted", "started", "succeeded"}; !equalStrings(seen, want) {
		t.Fatalf("n1's stream for the job: %v, want %v", seen, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPostgresOutageAnswers503: while the database server cannot be reached, a request
// that needs it gets 503 store_unavailable with Retry-After, never a 500, /readyz says
// not ready, and once the server is back the same request is accepted, with no restart.
func TestPostgresOutageAnswers503(t *testing.T) {
	proxy, via := pgtest.NewProxy(t, pgtest.FreshSchema(t))
	ts := newTestServer(t, testOpts{Store: via, Node: "n1", Idle: true})
	const body = `{"report":"demo","params":{"rows":1}}`
	ts.create(body)

	proxy.Cut()
	res := ts.post(body, "")
	checkProblem(t, res, http.StatusServiceUnavailable, "store_unavailable")
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After on a 503 of a database outage")
	}
	checkProblem(t, ts.get("/readyz"), http.StatusServiceUnavailable, "store_unavailable")

	proxy.Restore()
	waitFor(t, streamWait, func() (bool, string) {
		res := ts.post(body, "")
		return res.StatusCode == http.StatusAccepted, fmt.Sprintf("POST after the database came back: %d %s", res.StatusCode, res.body)
	})
	if n := ts.jobCount(); n != 2 {
		t.Fatalf("%d jobs, want 2: the one accepted before the outage and the one after", n)
	}
}
