package objstore

import (
	"fmt"
	"sync"
	"testing"
)

// Nodes that start together probe the same bucket at once, each under a key of its own
// beside the others' (jobs.S3Files: probe/<random>). A server that keeps objects as
// files (the test's versitygw, posix backend) removes a folder once its last object is
// deleted, and a PUT into that folder at that moment fails; Probe must still answer
// that the bucket takes writes, as it does.
func TestProbesAtOnce(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	const nodes, rounds = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, nodes*rounds)
	for n := range nodes {
		wg.Go(func() {
			for range rounds {
				if err := s.Probe(t.Context(), fmt.Sprintf("probe/node-%d", n)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Errorf("Probe: %v", err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d probes failed", failed, nodes*rounds)
	}
}
