package web

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"sheetq/app/metrics"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// queuePage is GET /queue: the queue now, and throughput and wait and run times over
// the last hour (?range=hour, the default) or day (?range=day). The figures are those
// of GET /api/v1/stats.
func (p *Pages) queuePage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := adminOnly(r, "The queue page"); err != nil {
		return err
	}
	rng := r.URL.Query().Get("range")
	if rng != "day" {
		rng = "hour"
	}
	st, err := metrics.ReadStats(ctx, p.store, p.engine)
	if err != nil {
		return err
	}
	tz := p.times(r)
	q := ui.QueueView{Range: rng, Zone: tz.Zone, WorkersBusy: st.Workers.Busy, WorkersTotal: st.Workers.Total,
		LateHeartbeats: st.LateHeartbeats, StalledCount: st.Stalled.Count,
		LateAfter:   ui.Duration(time.Duration(st.Stalled.LateHeartbeatSeconds * float64(time.Second))),
		NoRowsAfter: ui.Duration(time.Duration(st.Stalled.NoRowsSeconds * float64(time.Second))),
		Generated:   tz.ClockNamed(st.GeneratedAt), GeneratedISO: ui.ISO(st.GeneratedAt)}
	q.AbandonedAlive, q.AbandonedTotal = p.engine.Abandoned()
	for _, l := range st.Queues {
		q.Lanes = append(q.Lanes, ui.LaneView{Name: l.Name, Workers: l.Workers, Busy: l.Busy, Pending: l.Pending})
	}
	for _, status := range []store.Status{store.StatusPending, store.StatusProcessing, store.StatusSucceeded,
		store.StatusFailed, store.StatusCanceled, store.StatusExpired} {
		q.Counts = append(q.Counts, ui.CountView{Status: string(status), N: st.Counts[status]})
	}
	q.OldestPending = "none waiting"
	if st.OldestPendingAgeSeconds > 0 {
		q.OldestPending = ui.Duration(time.Duration(st.OldestPendingAgeSeconds*float64(time.Second)).Round(time.Second)) + " ago"
	}
	for _, sj := range st.Stalled.Jobs {
		reason := "no heartbeat for a while"
		if sj.Reason == store.StallNoRows {
			reason = "no row yet"
		}
		q.Stalled = append(q.Stalled, ui.StalledView{ID: sj.ID, Report: sj.Report, Attempt: sj.Attempt,
			Rows: ui.Count(sj.Rows), Reason: reason})
	}
	through, dur := st.Throughput.LastHour, st.Durations.LastHour
	if rng == "day" {
		through, dur = st.Throughput.LastDay, st.Durations.LastDay
	}
	buckets := make([]ui.Bucket, 0, len(through.Buckets))
	for _, b := range through.Buckets {
		buckets = append(buckets, ui.Bucket{Start: b.Start, Succeeded: b.Succeeded, Failed: b.Failed, Canceled: b.Canceled})
	}
	width := time.Duration(through.BucketSeconds) * time.Second
	q.Throughput = ui.ThroughputChart(buckets, width, tz)
	q.Wait, q.Run = ui.PercentileCharts(dur.Wait.Count, dur.Wait.P50, dur.Wait.P95, dur.Run.Count, dur.Run.P50, dur.Run.P95)
	q.Depth, q.DepthNote = p.depthChart(st.GeneratedAt, width, len(through.Buckets), tz)
	if err := p.jobsNow(ctx, &q, st.GeneratedAt, st.Counts, st.Queues); err != nil {
		return err
	}
	p.render(w, r, http.StatusOK, ui.Queue(p.meta(ctx, "queue", ""), q))
	return nil
}

// depthChart is the queue depth over the range's buckets, and the note that says since
// when this server has sampled it.
func (p *Pages) depthChart(now time.Time, width time.Duration, n int, tz ui.Times) (ui.Chart, string) {
	// The sampler is the metrics' (app/metrics/depth.go); without them (a tool's app)
	// the chart has no samples.
	var slots []ui.DepthSlot
	note := "Not sampled by this server."
	if m := p.cfg.Metrics; m != nil && n > 0 {
		bs, since := m.QueueDepth(now, width, n)
		for _, b := range bs {
			slots = append(slots, ui.DepthSlot{Start: b.Start, Waiting: b.Waiting, Sampled: b.Sampled})
		}
		if !since.IsZero() {
			note = "The most jobs waiting (every queue) in each slot, sampled every " + ui.Duration(metrics.DepthEvery) +
				" since this server started, " + tz.ClockNamed(since) + "."
		}
	}
	return ui.DepthChart(slots, width, tz), note
}

// jobsNowListed is how many running and waiting exports the queue page lists; it says
// how many more there are.
const jobsNowListed = 50

// jobsNow lists the exports that run and the first that wait, with their place in
// their queue in claim order (priority, run_at, insertion order; store.ClaimBatch).
func (p *Pages) jobsNow(ctx context.Context, q *ui.QueueView, now time.Time, counts map[store.Status]int, queues []metrics.Queue) error {
	running, err := p.store.List(ctx, store.ListOptions{Kind: export.Name, Status: store.StatusProcessing, Limit: jobsNowListed})
	if err != nil {
		return err
	}
	// Longest running first: those are the ones to look at.
	slices.SortStableFunc(running, func(a, b store.Job) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, j := range running {
		elapsed := now.Sub(j.StartedAt).Round(time.Millisecond)
		rows := ui.Count(j.ProgressRows)
		if j.ProgressTotal >= 0 {
			rows += " of " + ui.Count(j.ProgressTotal)
		}
		q.Running = append(q.Running, ui.RunningView{ID: j.ID, Title: jobTitle(j), Queue: cmp.Or(j.Queue, store.DefaultQueue),
			Worker: j.Worker, RunningFor: ui.Duration(elapsed), ElapsedMS: elapsed.Milliseconds(), Rows: rows, Attempt: j.Attempt})
	}
	q.RunningMore = max(0, counts[store.StatusProcessing]-len(running))

	// The head of each queue that has waiting jobs, read in claim order (an index read
	// of jobsNowListed rows however deep the queue), so that each job's place is exact;
	// then the heads merged in that order.
	var pending []store.Job
	for _, l := range queues {
		if l.Pending == 0 {
			continue
		}
		head, err := p.store.PendingHead(ctx, l.Name, export.Name, jobsNowListed)
		if err != nil {
			return err
		}
		pending = append(pending, head...)
	}
	slices.SortStableFunc(pending, func(a, b store.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.Seq, b.Seq))
	})
	pos := map[string]int{}
	for _, j := range pending {
		queue := cmp.Or(j.Queue, store.DefaultQueue)
		pos[queue]++
		if len(q.Waiting) >= jobsNowListed {
			continue
		}
		waited := now.Sub(j.CreatedAt).Round(time.Millisecond)
		wv := ui.WaitingView{Position: pos[queue], ID: j.ID, Title: jobTitle(j), Queue: queue,
			WaitingFor: ui.Duration(waited), WaitMS: waited.Milliseconds()}
		if j.RunAt.After(now) {
			verb := "may start in "
			if j.Attempt > 0 {
				verb = "retry in "
			}
			wv.RetryIn = verb + ui.Duration(j.RunAt.Sub(now).Round(time.Second))
		}
		q.Waiting = append(q.Waiting, wv)
	}
	q.WaitingMore = max(0, counts[store.StatusPending]-len(q.Waiting))
	return nil
}

// jobTitle is an export's report title as it was accepted, else its report's id.
func jobTitle(j store.Job) string {
	var a export.Args
	if json.Unmarshal(j.Args, &a) != nil {
		return j.ID
	}
	if a.Spec != nil && a.Spec.Title != "" {
		return a.Spec.Title
	}
	return cmp.Or(a.Report, j.ID)
}
