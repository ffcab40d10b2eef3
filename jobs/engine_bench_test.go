package jobs_test

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// BenchmarkLifecycle is no-op jobs per second through the whole engine: enqueue, claim,
// a handler that returns nil without a file, and success, with two workers.
func BenchmarkLifecycle(b *testing.B) {
	h := newHarness(b)
	cfg := h.config()
	cfg.Workers = 2
	cfg.Heartbeat, cfg.StaleAfter = time.Second, time.Minute
	var succeeded atomic.Int64
	all := make(chan struct{})
	var want int64
	h.st2 = afterSucceed{h.st, func() {
		if succeeded.Add(1) == atomic.LoadInt64(&want) {
			close(all)
		}
	}}
	noop := jobs.HandlerFunc(func(context.Context, *jobs.Run) error { return nil })
	e := h.start(b, cfg, map[string]jobs.Handler{"noop": noop})
	atomic.StoreInt64(&want, int64(b.N))
	b.ResetTimer()
	for range b.N {
		enqueue(b, e, "noop", 0)
	}
	recv(b, "every job to succeed", all)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkIdlePickup is how long an idle engine takes to start a job's handler: from
// Enqueue returning (the job is durable) to the handler running, and from before Enqueue.
func BenchmarkIdlePickup(b *testing.B) {
	h := newHarness(b)
	// A job due in a day makes the idle dispatcher read the clock just before it sleeps;
	// the benchmark starts each round only after the dispatcher has been quiet a while,
	// so that it measures the wake-up path from sleep, not a claim already under way.
	enqueueStore(b, h.st, "noop", store.NewJob{RunAt: time.Now().Add(24 * time.Hour)})
	dispatched := make(chan struct{}, 1)
	cfg := h.config()
	cfg.Workers = 1
	cfg.Heartbeat, cfg.StaleAfter = time.Second, time.Hour
	cfg.Now = func() time.Time {
		if calledFrom("sheetq/jobs.(*Engine).dispatch") {
			select {
			case dispatched <- struct{}{}:
			default:
			}
		}
		return time.Now()
	}
	started := make(chan time.Time, 1)
	finished := make(chan struct{}, 1)
	h.st2 = afterSucceed{h.st, func() { finished <- struct{}{} }}
	e := h.start(b, cfg, map[string]jobs.Handler{
		"noop": jobs.HandlerFunc(func(context.Context, *jobs.Run) error {
			started <- time.Now()
			return nil
		}),
	})
	quiet := func() {
		for {
			select {
			case <-dispatched:
			case <-time.After(3 * time.Millisecond):
				return
			}
		}
	}
	pickups := make([]time.Duration, 0, b.N)
	total := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		quiet()
		b.StartTimer()
		t0 := time.Now()
		enqueue(b, e, "noop", 0)
		t1 := time.Now()
		t2 := recv(b, "the handler to start", started)
		b.StopTimer()
		pickups = append(pickups, t2.Sub(t1))
		total = append(total, t2.Sub(t0))
		recv(b, "the job to finish", finished)
		b.StartTimer()
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	mean, p95 := stats(pickups)
	b.ReportMetric(us(mean), "pickup-mean-us")
	b.ReportMetric(us(p95), "pickup-p95-us")
	mean, p95 = stats(total)
	b.ReportMetric(us(mean), "enqueue+pickup-mean-us")
	b.ReportMetric(us(p95), "enqueue+pickup-p95-us")
}

func stats(ds []time.Duration) (mean, p95 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s)), s[(len(s)*95+99)/100-1]
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// calledFrom reports whether fn is on the caller's stack.
func calledFrom(fn string) bool {
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if f.Function == fn {
			return true
		}
		if !more {
			return false
		}
	}
}

// afterSucceed is the real store with a call after each recorded success, so that a
// benchmark learns of successes without reading the table on every change (OnChange
// carries no job).
type afterSucceed struct {
	jobs.Store
	fn func()
}

// QueuesWrites passes the store's answer on, so that the engine hands a store that
// queues its writes each end as it comes, as in production (rule 31).
func (s afterSucceed) QueuesWrites() bool {
	q, ok := s.Store.(interface{ QueuesWrites() bool })
	return ok && q.QueuesWrites()
}

func (s afterSucceed) FinishBatch(ctx context.Context, fs []store.Finish) []store.Finished {
	res := s.Store.FinishBatch(ctx, fs)
	for i, r := range res {
		if r.Err == nil && fs[i].Outcome == store.Succeeded {
			s.fn()
		}
	}
	return res
}

// BenchmarkOneByOne is no-op jobs enqueued one at a time from one goroutine into an
// engine of 100 workers on SQLite (bench/river's one-by-one), with the production
// store: enqueues, claims and ends share the writer's commits (rule 31). It reports
// jobs/s, the write transactions and the writes (enqueues, claims, ends) each job cost
// (sqlite.Store.WriteStats), and the share of the time the writer was in a transaction.
func BenchmarkOneByOne(b *testing.B) {
	for _, mode := range []struct {
		name      string
		unbatched bool
	}{{"queued", false}, {"unbatched", true}} {
		b.Run(mode.name, func(b *testing.B) {
			h := newHarness(b)
			h.st = h.openStoreWith(b, sqlite.Options{Unbatched: mode.unbatched})
			cfg := h.config()
			cfg.Workers = 100
			cfg.Heartbeat, cfg.StaleAfter = time.Second, time.Minute
			var handled atomic.Int64
			changed := make(chan struct{}, 1)
			cfg.OnChange = func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
			noop := jobs.HandlerFunc(func(context.Context, *jobs.Run) error { handled.Add(1); return nil })
			e := h.start(b, cfg, map[string]jobs.Handler{"noop": noop})
			d := h.st.Driver().(*sqlite.Store)
			before := d.WriteStats()
			var busy atomic.Int64
			d.ObserveWrites(func(t time.Duration) { busy.Add(int64(t)) })
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				enqueue(b, e, "noop", 0)
			}
			for {
				if handled.Load() >= int64(b.N) {
					c, err := h.st.Counts(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if c[store.StatusSucceeded] >= b.N {
						break
					}
				}
				recv(b, "a change", changed)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			// The process's CPU time a job took (user and system, every goroutine): unlike
			// jobs/s it hardly moves with what else the machine runs.
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/job")
			if !mode.unbatched {
				after := d.WriteStats()
				b.ReportMetric(float64(after.Commits-before.Commits)/float64(b.N), "commits/job")
				b.ReportMetric(float64(after.Writes-before.Writes)/float64(b.N), "writes/job")
				b.ReportMetric(float64(busy.Load())/float64(b.Elapsed()), "writer-busy")
			}
		})
	}
}
