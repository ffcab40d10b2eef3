package app

import (
	"net/http"
	"slices"
	"testing"

	"sheetq/store"
	"sheetq/store/storetest/mysqltest"
)

// TestTwoNodesOnMariaDB: two nodes on one MariaDB database (--store mysql://...) and one
// bucket share one queue as PostgreSQL's do, without LISTEN: an export accepted on n1,
// whose engine is stopped, runs on n2, found by its poll, and downloads from both; an
// Idempotency-Key repeated on n2 replays; a cancel on n1 reaches the job running on n2
// at its next heartbeat; n1's event stream sees n2's events, once each, in order.
func TestTwoNodesOnMariaDB(t *testing.T) {
	n1, n2 := twoNodes(t, mysqltest.URL(t, mysqltest.FreshDatabase(t)), false)
	stream := openEvents(t, n1, "", "")
	j := runOnTheOtherNode(t, n1, n2, "mariadb-key-1")

	slow := n1.Create(never)
	if got, _ := n1.WaitStatus(slow.ID, store.StatusProcessing); startedBy(t, n1, slow.ID) != "n2" {
		t.Fatalf("the slow job is %s, started on %q; want it running on n2", got.Status, startedBy(t, n1, slow.ID))
	}
	if res := n1.action(slow.ID, "cancel"); res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("cancel on n1: status %d: %s", res.StatusCode, res.Body)
	}
	n2.WaitStatus(slow.ID, store.StatusCanceled)

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
