package app

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"sheetq/internal/apptest"
	"sheetq/store"
	"sheetq/store/pg"
	"sheetq/store/storetest/pgtest"
)

// The tests in this file share PgBouncer's one schema (pgtest.Bouncer): none runs in
// parallel.

// TestPollOnlyNodesThroughPgBouncer: two --poll-only nodes that reach PostgreSQL through
// a real PgBouncer in transaction mode (docs/several-nodes.md) share one queue as
// nodes with LISTEN do: an export accepted on n1, whose engine is stopped, runs on n2 and
// downloads from both; an Idempotency-Key repeated on n2 replays; a cancel on n1 reaches
// the job running on n2; n1's event stream sees n2's events.
func TestPollOnlyNodesThroughPgBouncer(t *testing.T) {
	via, _ := pgtest.Bouncer(t)
	n1, n2 := twoNodes(t, via, true)
	stream := openEvents(t, n1, "", "")
	j := runOnTheOtherNode(t, n1, n2, "bouncer-key-1")

	// A job that would run a day: canceled on n1, it ends on n2, which learns of the
	// cancel from its heartbeat (no LISTEN here).
	slow := n1.Create(never)
	if got, _ := n1.WaitStatus(slow.ID, store.StatusProcessing); startedBy(t, n1, slow.ID) != "n2" {
		t.Fatalf("the slow job is %s, started on %q; want it running on n2", got.Status, startedBy(t, n1, slow.ID))
	}
	if res := n1.action(slow.ID, "cancel"); res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("cancel on n1: status %d: %s", res.StatusCode, res.Body)
	}
	n2.WaitStatus(slow.ID, store.StatusCanceled)

	// n1 tails the shared event log: it sees both jobs' events, which n2 wrote, in order.
	seen := stateEvents(t, stream, func(seen map[string][]string) bool {
		return last(seen[j.ID]) == "succeeded" && last(seen[slow.ID]) == "canceled"
	})
	if want := []string{"accepted", "started", "succeeded"}; !slices.Equal(seen[j.ID], want) {
		t.Fatalf("n1's stream for the first job: %v, want %v", seen[j.ID], want)
	}
	if want := []string{"accepted", "started", "cancel_requested", "canceled"}; !slices.Equal(seen[slow.ID], want) {
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

// never is a demo export that runs until it is canceled: one row, due after a day.
const never = `{"report":"demo","params":{"rows":1,"seconds":86400}}`

// action sends POST /api/v1/exports/{id}/{verb} without a body.
func (ts *testServer) action(id, verb string) apptest.Response {
	ts.t.Helper()
	return ts.Request(http.MethodPost, "/api/v1/exports/"+id+"/"+verb, nil, nil)
}
