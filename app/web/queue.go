package web

import (
	"net/http"
	"time"

	"sheetq/app/metrics"
	"sheetq/store"
	"sheetq/ui"
)

// queuePage is GET /queue: the queue now, and throughput and wait and run times over
// the last hour (?range=hour, the default) or day (?range=day). The figures are those
// of GET /api/v1/stats.
func (p *Pages) queuePage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rng := r.URL.Query().Get("range")
	if rng != "day" {
		rng = "hour"
	}
	st, err := metrics.ReadStats(ctx, p.store, p.engine)
	if err != nil {
		return err
	}
	q := ui.QueueView{Range: rng, WorkersBusy: st.Workers.Busy, WorkersTotal: st.Workers.Total,
		LateHeartbeats: st.LateHeartbeats, StalledCount: st.Stalled.Count,
		LateAfter:   ui.Duration(time.Duration(st.Stalled.LateHeartbeatSeconds * float64(time.Second))),
		NoRowsAfter: ui.Duration(time.Duration(st.Stalled.NoRowsSeconds * float64(time.Second))),
		Generated:   ui.Clock(st.GeneratedAt)}
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
	q.Throughput = ui.ThroughputChart(buckets, time.Duration(through.BucketSeconds)*time.Second)
	q.Wait = ui.PercentileChart("chart-wait", "Wait before start", dur.Wait.Count, dur.Wait.P50, dur.Wait.P95)
	q.Run = ui.PercentileChart("chart-run", "Run time", dur.Run.Count, dur.Run.P50, dur.Run.P95)
	p.render(w, r, http.StatusOK, ui.Queue(p.meta(ctx, "queue", ""), q))
	return nil
}
