package jobs

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Accepting a request must stay fast while workers are busy: a 202 is a few hundred
// microseconds of CPU, an export is seconds of it, and on a small machine (2 cores) two
// CPU-bound workers otherwise delay every handler by whole scheduler time slices. Go has
// no goroutine priorities, so job code cooperates: it calls Run.Yield at safe points
// between units of work (the xlsx writer does every few dozen rows), and request
// handlers that accept work wrap themselves in Gate.Foreground. While any foreground
// work runs, Yield blocks, for at most maxYieldWait each time, so a stream of requests
// slows the workers down but never starves them.
//
// A burst of requests gets the cores to itself for a while (burstGate): lower priority
// is not enough there, because on the 2-core benchmark machine any busy core slowed
// acceptance, whatever its thread's priority (BENCHMARKS.md, "Fourth session").

// Gate is what request handlers and workers share to let accepting requests go first.
// The server makes one (app.Run) and hands it to its handlers and, through
// Config.Gate, to the engine, whose jobs reach it with Run.Yield. A Gate is a value,
// not process state: two servers in one process (as in tests) do not hold each other
// back. Its methods are safe for concurrent use.
type Gate struct {
	active atomic.Int64
	mu     sync.Mutex // taken by request handlers only (Foreground), never by workers
	// idle is closed when active drops to zero; nil while nothing is active. Workers
	// read it without the lock: they run on threads of lowered priority, and one that the
	// OS set aside while it held a lock would hold up every request that needs it, for
	// as long as the OS runs others first (BENCHMARKS.md, issue 43).
	idle atomic.Pointer[chan struct{}]

	burst *burstGate

	// handlersLowered is set once an engine runs its handlers on threads of lowered
	// priority (Config.Nice). Those threads leave the process's other Ps free and the
	// OS prefers every other thread to them, so Yield has nothing to hand over; on a
	// locked thread runtime.Gosched would also cost two thread switches each time.
	handlersLowered atomic.Bool
}

// NewGate returns a gate whose burst hold reads the clock with now and waits with
// sleep; nil takes time.Now and time.Sleep.
func NewGate(now func() time.Time, sleep func(time.Duration)) *Gate {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = time.Sleep
	}
	return &Gate{burst: newBurstGate(now, sleep)}
}

// maxYieldWait bounds one Yield; long enough for a handler to finish its CPU work, short
// enough that workers keep moving during a sustained burst.
const maxYieldWait = 10 * time.Millisecond

// Foreground marks the start of latency-sensitive work, such as accepting an export
// request; call the returned func when it is done (more calls do nothing).
func (g *Gate) Foreground() (done func()) {
	g.burst.accepted()
	if g.active.Add(1) == 1 {
		g.mu.Lock()
		if g.idle.Load() == nil {
			ch := make(chan struct{})
			g.idle.Store(&ch)
		}
		g.mu.Unlock()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if g.active.Add(-1) == 0 {
				g.mu.Lock()
				// Another Foreground may have started since; close only if still idle.
				if ch := g.idle.Load(); g.active.Load() == 0 && ch != nil {
					close(*ch)
					g.idle.Store(nil)
				}
				g.mu.Unlock()
			}
		})
	}
}

// Active is the number of foreground spans in progress (sheetq_foreground_requests):
// while it is above zero, Yield waits. Request handlers must not hold one while they wait on a client.
func (g *Gate) Active() int {
	return int(g.active.Load())
}

// Yield lets other goroutines run; while foreground work is in progress it waits for
// that work to finish, for at most maxYieldWait, and during a burst of requests it waits
// for the burst to pass (burstGate). Job code calls it, through Run.Yield, between
// units of work.
func (g *Gate) Yield() {
	if !g.Await() && !g.handlersLowered.Load() {
		runtime.Gosched()
	}
}

// Await holds the caller through a burst of requests (burstGate), or else waits while
// foreground work is in progress, for at most maxYieldWait; it reports whether it
// waited. The engine calls it before its own store writes (claims and successes): they
// share SQLite's one writer with the group commit of accepted requests, and one started
// while a request is being accepted makes that request wait for it.
func (g *Gate) Await() bool {
	if g.burst.hold() {
		return true
	}
	if g.active.Load() == 0 {
		return false
	}
	ch := g.idle.Load()
	if ch == nil {
		return false
	}
	idle := *ch
	t := time.NewTimer(maxYieldWait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
	return true
}

// lowerHandlers records that the engine runs its handlers on threads of lowered
// priority: from then on Yield does not call runtime.Gosched (handlersLowered).
func (g *Gate) lowerHandlers() { g.handlersLowered.Store(true) }

// A burst is burstCount requests accepted within burstSpan (400/s and more). While one
// lasts, workers hold at their next Yield and the engine before its next claim or
// success, so that the cores are left to acceptance; they go on at most burstSpan after
// the requests slow down. A burst that lasts longer than burstHold does not starve the
// workers: they go back to sharing (the waits of at most maxYieldWait) until requests
// have been below the rate for burstHold, and only then may a new hold begin, so the
// workers get at least half of any stretch of time.
const (
	burstCount = 16
	burstSpan  = 40 * time.Millisecond
	burstHold  = 5 * time.Second
)

type burstGate struct {
	now   func() time.Time
	sleep func(time.Duration)

	// oldest is starts[next] as nanoseconds after base, plus one; 0: none yet. Workers
	// read it without the lock to learn that no burst is going on, which is nearly every
	// time they ask: they ask between every few dozen rows, on threads of lowered
	// priority, and one that the OS set aside while it held mu held up every request
	// that records itself here (accepted), for as long as the OS ran others first.
	oldest atomic.Int64
	base   time.Time

	mu      sync.Mutex
	starts  [burstCount]time.Time // the latest accepts, a ring; starts[next] is the oldest
	next    int
	held    time.Time // when the current hold began; zero: none
	lastHot time.Time // when a burst was last seen going on
	off     bool      // tests of the in-flight wait alone
}

func newBurstGate(now func() time.Time, sleep func(time.Duration)) *burstGate {
	return &burstGate{now: now, sleep: sleep, base: now()}
}

// accepted records that a request is being accepted.
func (g *burstGate) accepted() {
	g.mu.Lock()
	g.starts[g.next] = g.now()
	g.next = (g.next + 1) % burstCount
	if o := g.starts[g.next]; o.IsZero() {
		g.oldest.Store(0)
	} else {
		g.oldest.Store(int64(o.Sub(g.base)) + 1)
	}
	g.mu.Unlock()
}

// hold waits while a burst lasts and the hold has time left; it reports whether it waited.
func (g *burstGate) hold() bool {
	waited := false
	for {
		d := g.wait()
		if d <= 0 {
			return waited
		}
		waited = true
		g.sleep(d)
	}
}

// wait is how long a caller should wait before asking again: until the burst seen now
// could be over, or 0 to go on.
func (g *burstGate) wait() time.Duration {
	if o := g.oldest.Load(); o == 0 || g.now().Sub(g.base)-time.Duration(o-1) >= burstSpan {
		return 0 // the latest burstCount accepts span more than burstSpan: no burst
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.off {
		return 0
	}
	now := g.now()
	oldest := g.starts[g.next]
	if !g.held.IsZero() && now.Sub(g.lastHot) >= burstHold {
		g.held = time.Time{} // no burst for as long as a hold may last: a new one may begin
	}
	if oldest.IsZero() || now.Sub(oldest) >= burstSpan {
		return 0
	}
	g.lastHot = now
	if g.held.IsZero() {
		g.held = now
	}
	if now.Sub(g.held) >= burstHold {
		return 0 // held long enough: share until the burst ends
	}
	return min(burstSpan-now.Sub(oldest), burstHold-now.Sub(g.held))
}
