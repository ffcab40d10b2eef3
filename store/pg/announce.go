package pg

import (
	"context"
	"sync"
	"time"
)

// announceEvery is the shortest time between two announcements of a node's events
// (AnnounceEvents): enough for an event stream on another node to feel live, few enough
// that a busy node sends tens of notifications a second, not one per commit.
const announceEvery = 20 * time.Millisecond

// announcer sends ChannelEvents notifications for AnnounceEvents, rate-limited, each in
// a statement of its own.
//
// Why not a trigger on job_events, in the transaction that appends the events: at commit
// PostgreSQL queues a transaction's notifications under one cluster-wide lock, so every
// claim and every end of every node would serialise on it (measured by bench/river: 3
// nodes ran 342 jobs/s with that trigger and 586 without). A notification sent after the
// commit, at most every announceEvery per node, costs the cluster a few statements a
// second, and a listener that misses one still has its hub's poll.
type announcer struct {
	kick     chan struct{} // capacity 1: one pending announcement stands for any number
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func (s *Store) startAnnouncer() {
	a := &announcer{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.announce = a
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			case <-a.kick:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			// A failure is not worth a log line per commit: the listeners' hubs poll.
			_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, ChannelEvents)
			cancel()
			select {
			case <-a.stop:
				return
			case <-time.After(announceEvery):
			}
		}
	}()
}

// AnnounceEvents tells the other nodes' event hubs (their Listener's Events callback) that
// this node committed events, so that their streams read them now instead of at their
// next poll. It never blocks: calls that come while an announcement waits to be sent
// are folded into it, and announcements go at most every announceEvery. Call it after
// the commit, as the engine's OnChange hook does.
func (s *Store) AnnounceEvents() {
	select {
	case s.announce.kick <- struct{}{}:
	default:
	}
}

func (a *announcer) close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.done
}
