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
// no goroutine priorities, so job code cooperates: it calls Yield at safe points between
// units of work (the xlsx writer does every few dozen rows), and request handlers that
// accept work wrap themselves in Foreground. While any foreground work runs, Yield
// blocks, for at most maxYieldWait each time, so a stream of requests slows the workers
// down but never starves them.
var prio struct {
	active atomic.Int64
	mu     sync.Mutex
	idle   chan struct{} // closed when active drops to zero; nil while nothing is active
}

// maxYieldWait bounds one Yield; long enough for a handler to finish its CPU work, short
// enough that workers keep moving during a sustained burst.
const maxYieldWait = 10 * time.Millisecond

// Foreground marks the start of latency-sensitive work, such as accepting an export
// request; call the returned func when it is done.
func Foreground() (done func()) {
	if prio.active.Add(1) == 1 {
		prio.mu.Lock()
		if prio.idle == nil {
			prio.idle = make(chan struct{})
		}
		prio.mu.Unlock()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if prio.active.Add(-1) == 0 {
				prio.mu.Lock()
				// Another Foreground may have started since; close only if still idle.
				if prio.active.Load() == 0 && prio.idle != nil {
					close(prio.idle)
					prio.idle = nil
				}
				prio.mu.Unlock()
			}
		})
	}
}

// Yield lets other goroutines run; while foreground work is in progress it waits for
// that work to finish, for at most maxYieldWait. Job code calls it between units of work.
func Yield() {
	if !awaitForeground() && !handlersLowered.Load() {
		runtime.Gosched()
	}
}

// handlersLowered is set once an engine runs its handlers on threads of lowered
// priority (Config.Nice). Those threads leave the process's other Ps free and the OS
// prefers every other thread to them, so Yield has nothing to hand over; on a locked
// thread runtime.Gosched would also cost two thread switches each time.
var handlersLowered atomic.Bool

// awaitForeground waits while foreground work is in progress, for at most maxYieldWait,
// and reports whether there was any. The engine calls it before its own store writes:
// they share SQLite's one writer with the group commit of accepted requests, and one
// started while a request is being accepted makes that request wait for it.
func awaitForeground() bool {
	if prio.active.Load() == 0 {
		return false
	}
	prio.mu.Lock()
	idle := prio.idle
	prio.mu.Unlock()
	if idle == nil {
		return false
	}
	t := time.NewTimer(maxYieldWait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
	return true
}
