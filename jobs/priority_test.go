package jobs

import (
	"sync"
	"testing"
	"time"
)

// A Yield while foreground work runs returns once that work is done, and the gate's
// state is clean after many overlapping foreground spans.
func TestYieldWaitsForForeground(t *testing.T) {
	t.Parallel()
	g := inFlightWaitOnly() // thousands of spans in a moment are a burst
	done := g.Foreground()
	returned := make(chan struct{})
	go func() {
		g.Yield()
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
				end := g.Foreground()
				g.Yield()
				end()
			}
		})
		wg.Go(func() {
			for range 500 {
				g.Yield()
			}
		})
	}
	wg.Wait()
	if n := g.Active(); n != 0 {
		t.Fatalf("active = %d after every span ended", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idle.Load() != nil {
		t.Fatal("the idle channel is still open with nothing active")
	}
}

// Yield never waits for ever: foreground work that does not end only delays it.
func TestYieldIsBounded(t *testing.T) {
	t.Parallel()
	g := NewGate(nil, nil)
	end := g.Foreground()
	defer end()
	returned := make(chan struct{})
	go func() {
		for range 3 {
			g.Yield()
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Yield blocked while foreground work was running")
	}
}

// Each gate is its own: foreground work on one holds no one waiting on another, so
// two servers (or parallel tests) in one process do not slow each other.
func TestGatesAreIndependent(t *testing.T) {
	t.Parallel()
	busy, other := inFlightWaitOnly(), inFlightWaitOnly()
	end := busy.Foreground()
	defer end()
	if n := other.Active(); n != 0 {
		t.Fatalf("the other gate has %d foreground spans, want 0", n)
	}
	if other.Await() {
		t.Fatal("Await waited on a gate with no foreground work")
	}
	if !busy.Await() {
		t.Fatal("Await did not wait on the gate with foreground work")
	}
}

// A Run without a gate (a handler run outside an engine, as in a kind's unit tests)
// can still yield.
func TestRunYieldWithoutGate(t *testing.T) {
	t.Parallel()
	(&Run{}).Yield()
}

// inFlightWaitOnly returns a gate whose burst hold is off, for a test of the wait for
// requests in flight.
func inFlightWaitOnly() *Gate {
	g := NewGate(nil, nil)
	g.burst.off = true
	return g
}

// fakeTime is a clock that only moves when told to, and a sleep that moves it.
type fakeTime struct {
	t      time.Time
	slept  []time.Duration
	during func() // runs at every sleep, before the clock moves
}

func (f *fakeTime) now() time.Time { return f.t }
func (f *fakeTime) sleep(d time.Duration) {
	f.slept = append(f.slept, d)
	if f.during != nil {
		f.during()
	}
	f.t = f.t.Add(d)
}

func TestBurstGate(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{t: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)}
	g := newBurstGate(ft.now, ft.sleep)
	accept := func(n int, every time.Duration) {
		for range n {
			g.accepted()
			ft.t = ft.t.Add(every)
		}
	}

	// 100 requests a second is no burst: nothing waits.
	accept(50, 10*time.Millisecond)
	if g.hold() || len(ft.slept) > 0 {
		t.Fatalf("held at 100 requests/s (slept %v)", ft.slept)
	}

	// 1,000 a second is: a hold waits until the requests stop, and ends one span after.
	accept(burstCount, time.Millisecond)
	stopAt := ft.t.Add(300 * time.Millisecond)
	// Keep the burst going while the holder sleeps: one request per millisecond of sleep.
	ft.during = func() {
		if ft.t.Before(stopAt) {
			for range int(ft.slept[len(ft.slept)-1] / time.Millisecond) {
				g.accepted()
			}
		}
	}
	start := ft.t
	if !g.hold() {
		t.Fatal("no hold during a burst")
	}
	if held := ft.t.Sub(start); held < 300*time.Millisecond || held > 300*time.Millisecond+2*burstSpan {
		t.Errorf("held %s for a burst that ended after 300ms", held)
	}
	for _, d := range ft.slept {
		if d <= 0 || d > burstSpan {
			t.Errorf("slept %s at a time, want (0, %s]", d, burstSpan)
		}
	}

	// A burst longer than burstHold: the hold ends after burstHold, and later calls go
	// on at once while the burst lasts.
	ft.during = func() {
		for range int(ft.slept[len(ft.slept)-1] / time.Millisecond) {
			g.accepted()
		}
	}
	ft.t = ft.t.Add(2 * burstHold) // rested: a new hold may begin
	accept(burstCount, time.Millisecond)
	start = ft.t
	if !g.hold() {
		t.Fatal("no hold at the start of a long burst")
	}
	if held := ft.t.Sub(start); held != burstHold {
		t.Errorf("held %s in a long burst, want %s", held, burstHold)
	}
	accept(burstCount, time.Millisecond)
	if g.hold() {
		t.Error("held again in the same burst after burstHold")
	}

	// A pause shorter than burstHold does not renew the hold; one as long does.
	ft.during = nil
	ft.t = ft.t.Add(burstHold / 2)
	accept(burstCount, time.Millisecond)
	if g.hold() {
		t.Error("a new hold began after a pause shorter than burstHold")
	}
	ft.t = ft.t.Add(burstHold)
	accept(burstCount, time.Millisecond)
	if !g.hold() {
		t.Error("no new hold after a pause of burstHold")
	}
}

// Workers ask the gate between every few dozen rows on threads of lowered priority, so
// outside a burst they must not take the locks that request handlers take: a worker's
// thread set aside by the OS while it held one would hold up the requests. Here the test
// holds both locks; a worker's Await must still answer, at 100 requests a second (no
// burst) with a request in flight, and so must Yield once none is.
func TestWorkersAskWithoutTheHandlersLocks(t *testing.T) {
	t.Parallel()
	ft := &fakeTime{t: time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)}
	g := NewGate(ft.now, ft.sleep)
	for range burstCount * 2 {
		g.Foreground()()
		ft.t = ft.t.Add(10 * time.Millisecond)
	}
	end := g.Foreground()
	g.mu.Lock()
	g.burst.mu.Lock()
	asked := make(chan bool)
	go func() { asked <- g.Await() }() // waits for the request, at most maxYieldWait
	select {
	case waited := <-asked:
		if !waited {
			t.Error("Await did not wait for the request in flight")
		}
	case <-time.After(10 * time.Second): // a deadlock guard, not a measurement
		t.Fatal("Await waited for a lock the request handlers hold")
	}
	g.active.Add(-1) // what end would have done, but for the locks the test holds
	go func() { g.Yield(); asked <- true }()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("Yield waited for a lock the request handlers hold")
	}
	g.burst.mu.Unlock()
	g.mu.Unlock()
	_ = end
}
