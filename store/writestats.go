package store

import (
	"sync/atomic"
	"time"
)

// WriteBounds are the upper bounds, in seconds, of WriteStats' buckets: from half a
// millisecond, about one commit with its fsync on a quiet disk, up to seconds, a disk
// that stalls.
var WriteBounds = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// WriteStats is a histogram of write transactions on SQLite's one writer connection:
// each accepted group of requests, claim, end, heartbeat and change, from BEGIN until
// COMMIT (or ROLLBACK) returned. The time includes waiting for the connection, the
// commit's fsync, and the WAL checkpoint that the commit crossing wal_autocheckpoint
// runs, so a slow disk and the checkpoints show here as the time every write on the
// writer waits for.
type WriteStats struct {
	Count   uint64
	Sum     float64  // seconds
	Buckets []uint64 // Buckets[i]: transactions that took at most WriteBounds[i], cumulative
}

// writeHist counts write transactions into WriteBounds' buckets; its methods are safe
// for concurrent use.
type writeHist struct {
	counts [15]atomic.Uint64 // one per bound, and the last for longer ones
	sumNS  atomic.Int64
}

func (h *writeHist) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(WriteBounds) && s > WriteBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNS.Add(int64(d))
}

func (h *writeHist) stats() WriteStats {
	st := WriteStats{Buckets: make([]uint64, len(WriteBounds))}
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		if i < len(WriteBounds) {
			st.Buckets[i] = n
		}
	}
	st.Count = n
	st.Sum = float64(h.sumNS.Load()) / float64(time.Second)
	return st
}

// WriteStats reports the write transactions since Open (see WriteStats).
func (s *Store) WriteStats() WriteStats { return s.writes.stats() }
