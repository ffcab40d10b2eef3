package metrics

import (
	"context"
	"sync"
	"time"
)

// The queue depth over time (the Queue page's "Queue depth"): how many jobs waited
// (PENDING, in every queue), sampled from the store every DepthEvery into one slot per
// minute of the last day, each keeping the most seen in its minute.
//
// It is sampled, not computed from the job table, because the table keeps no history of
// a job's waits (a retry waits again; started_at is the last attempt's). It reads the
// store's count, so with several nodes sharing one database every node samples the same
// figure, the whole cluster's; its history starts when this process did.
const (
	DepthEvery = 5 * time.Second
	depthSlots = 24 * 60
)

// depthSlot is one minute of samples.
type depthSlot struct {
	minute  int64 // Unix minute; 0: never sampled
	waiting int   // the most seen in the minute
}

// Depth is the sampled queue depth of the last day; its zero value has no samples.
type Depth struct {
	mu      sync.Mutex
	slots   [depthSlots]depthSlot
	started time.Time // the first sample
}

// record notes n jobs waiting at t.
func (d *Depth) record(t time.Time, n int) {
	m := t.Unix() / 60
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started.IsZero() {
		d.started = t
	}
	s := &d.slots[m%depthSlots]
	if s.minute != m {
		*s = depthSlot{minute: m}
	}
	s.waiting = max(s.waiting, n)
}

// DepthBucket is the most jobs seen waiting within one bucket, and whether any sample
// fell in it.
type DepthBucket struct {
	Start   time.Time
	Waiting int
	Sampled bool
}

// Buckets are n buckets of width ending with the one that holds now, aligned as the
// store aligns its throughput buckets (on multiples of width since the epoch), so the
// two charts share their time axis; and when sampling started.
func (d *Depth) Buckets(now time.Time, width time.Duration, n int) ([]DepthBucket, time.Time) {
	w := width.Milliseconds()
	if w <= 0 || n <= 0 {
		return nil, time.Time{}
	}
	first := (now.UnixMilli()/w - int64(n-1)) * w
	out := make([]DepthBucket, n)
	for i := range out {
		out[i].Start = time.UnixMilli(first + int64(i)*w).UTC()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	nowMinute := now.Unix() / 60
	for _, s := range d.slots {
		if s.minute == 0 || s.minute > nowMinute || s.minute <= nowMinute-depthSlots {
			continue
		}
		i := (s.minute*60_000 - first) / w
		if i < 0 || i >= int64(n) {
			continue
		}
		out[i].Sampled = true
		out[i].Waiting = max(out[i].Waiting, s.waiting)
	}
	return out, d.started
}

// sampleDepth reads the jobs waiting now into m's depth.
func (m *Metrics) sampleDepth(ctx context.Context) error {
	pending, err := m.st.PendingByQueue(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, c := range pending {
		n += c
	}
	m.depth.record(m.st.Now(), n)
	return nil
}

// runDepth samples the depth every DepthEvery until Stop.
func (m *Metrics) runDepth() {
	defer m.bg.Done()
	t := time.NewTicker(DepthEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stopping:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), DepthEvery)
			if err := m.sampleDepth(ctx); err != nil {
				m.log.DebugContext(ctx, "sample the queue depth", "err", err)
			}
			cancel()
		}
	}
}

// QueueDepth is the jobs waiting over the last n buckets of width, sampled by this
// process (see Depth), and when its sampling started.
func (m *Metrics) QueueDepth(now time.Time, width time.Duration, n int) ([]DepthBucket, time.Time) {
	return m.depth.Buckets(now, width, n)
}
