package jobs

import (
	"context"
	"time"

	"sheetq/store"
)

// dispatch claims the jobs of l's queue while l has free slots, sleeping until a
// wake-up, the next run_at of a delayed job of the queue, or the poll interval. Each lane
// has its own dispatcher and slots: a lane whose slots are all taken blocks only itself,
// and a due job of a full lane never wakes another (rule 27). With several slots free it
// claims as many jobs as there are free slots in one transaction (rule 28).
func (e *Engine) dispatch(l *lane) {
	defer e.loops.Done()
	ctx := e.runCtx
	for {
		select {
		case l.slots <- struct{}{}:
		case <-e.stopClaim:
			return
		}
		free := 1 + l.takeFree()
		select {
		case <-e.stopClaim:
			l.release(free)
			return
		default:
		}
		e.cfg.Gate.Await() // see Gate.Foreground: let the request being accepted commit first
		// A claim and the registration of its executions are one step for the reaper
		// (claimMu): a pause between the two must not make our own attempt look like
		// an orphan.
		e.claimMu.Lock()
		claimed, next, pending, err := e.claim(ctx, l.queue, free)
		xs := make([]*execution, len(claimed))
		xctxs := make([]context.Context, len(claimed))
		for i, job := range claimed {
			xs[i], xctxs[i] = e.register(l, job)
		}
		e.claimMu.Unlock()
		l.release(free - len(claimed))
		if len(claimed) > 0 {
			e.claimCommits.Add(1)
			e.claimed.Add(int64(len(claimed)))
			e.claimsBusy.Store(false)
			for range claimed {
				faultPoint("after-claim") // once per job, as each job reached it before batches
			}
			if len(claimed) > 1 {
				faultPoint("after-batch-claim") // the batch is committed; none of it has started
			}
			for i, x := range xs {
				e.start(xctxs[i], x)
			}
			if len(claimed) == free {
				continue // every free slot found a job: there may be more
			}
		}
		// Fewer jobs than free slots: the queue has nothing more runnable now.
		wait := e.cfg.PollInterval
		switch {
		case err == nil:
			e.claimsBusy.Store(false)
			if next == nil {
				if in, err := e.st.NextRunIn(ctx, l.queue); err == nil {
					next, pending = &in, true
				}
			}
			if pending {
				wait = min(wait, max(*next, time.Millisecond))
			}
		case store.IsBusy(err):
			// Another connection (a backup, an sqlite3 shell) holds the lock: not an
			// error of ours, and worth one line, not one per poll.
			if e.claimsBusy.CompareAndSwap(false, true) {
				e.log.WarnContext(ctx, "claims wait: the database is busy (another connection holds its lock)", "err", err)
			}
		default:
			e.log.ErrorContext(ctx, "claim failed", "queue", l.queue, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-l.wake:
		case <-t.C:
		case <-e.stopClaim:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// claim claims up to free jobs of queue. A ClaimNexter store also answers how long until
// the queue's next PENDING job is due (pending false: none is); from another store next
// is nil, and the dispatcher asks NextRunIn when it needs to know.
func (e *Engine) claim(ctx context.Context, queue string, free int) (claimed []store.Job, next *time.Duration, pending bool, err error) {
	if cn, ok := e.st.(ClaimNexter); ok {
		var in time.Duration
		claimed, in, pending, err = cn.ClaimBatchNext(ctx, e.cfg.WorkerID, queue, free)
		return claimed, &in, pending, err
	}
	claimed, err = e.st.ClaimBatch(ctx, e.cfg.WorkerID, queue, free)
	return claimed, nil, false, err
}

// takeFree takes every other slot of l that is free right now, without waiting, and
// returns how many it took.
func (l *lane) takeFree() int {
	n := 0
	for {
		select {
		case l.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
}

// release gives back n slots of l that were taken but found no job.
func (l *lane) release(n int) {
	for range n {
		<-l.slots
	}
}

// register records a claimed attempt as this engine's execution, holding the slot of
// l that the dispatcher took for it, and returns it with its context.
func (e *Engine) register(l *lane, job store.Job) (*execution, context.Context) {
	ctx, cancel := context.WithCancelCause(e.runCtx)
	x := &execution{
		job:    job,
		lane:   l,
		run:    newRun(e.cfg.TmpDir, job.ID, job.Kind, job.Args, job.Attempt, job.MaxAttempts),
		cancel: cancel,
		beat:   make(chan struct{}, 1),
	}
	x.run.onProgress = e.cfg.OnProgress
	x.run.beat = func() {
		select {
		case x.beat <- struct{}{}:
		default:
		}
	}
	x.run.resumed = func(rows int64) { e.resumed(ctx, x, rows) }
	x.run.gate = e.cfg.Gate
	if e.cfg.Nice != 0 && LowerPrioritySupported {
		x.run.nice = e.cfg.Nice
	}
	e.mu.Lock()
	e.running[x] = struct{}{}
	e.mu.Unlock()
	return x, ctx
}

// start runs a registered execution; when it ends, its slot is freed.
func (e *Engine) start(ctx context.Context, x *execution) {
	e.notify()
	e.execs.Add(1)
	go func() {
		defer e.execs.Done()
		defer func() {
			e.mu.Lock()
			delete(e.running, x)
			e.mu.Unlock()
			<-x.lane.slots
			x.lane.wakeUp()
		}()
		e.execute(ctx, x)
	}()
}
