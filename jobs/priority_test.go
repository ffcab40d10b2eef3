package jobs

import (
	"sync"
	"testing"
	"time"
)

// A Yield while foreground work runs returns once that work is done, and the gate's
// state is clean after many overlapping foreground spans.
func TestYieldWaitsForForeground(t *testing.T) {
	done := Foreground()
	returned := make(chan struct{})
	go func() {
		Yield()
		close(returned)
	}()
	done()
	done() // idempotent
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Yield did not return after the foreground work ended")
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				end := Foreground()
				Yield()
				end()
			}
		})
		wg.Go(func() {
			for range 500 {
				Yield()
			}
		})
	}
	wg.Wait()
	if n := prio.active.Load(); n != 0 {
		t.Fatalf("active = %d after every span ended", n)
	}
	prio.mu.Lock()
	defer prio.mu.Unlock()
	if prio.idle != nil {
		t.Fatal("the idle channel is still open with nothing active")
	}
}

// Yield never waits for ever: foreground work that does not end only delays it.
func TestYieldIsBounded(t *testing.T) {
	end := Foreground()
	defer end()
	returned := make(chan struct{})
	go func() {
		for range 3 {
			Yield()
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Yield blocked while foreground work was running")
	}
}
