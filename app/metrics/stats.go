package metrics

import (
	"context"
	"maps"
	"slices"
	"time"

	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// Stats is GET /api/v1/stats: the queue now, and how it did over the last hour and day.
type Stats struct {
	GeneratedAt time.Time            `json:"generated_at"`
	Counts      map[store.Status]int `json:"counts"`
	// OldestPendingAgeSeconds is how long the oldest runnable PENDING job has waited
	// since it became runnable; 0 when none waits.
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// Workers is the exports lane (--workers); Queues is every lane.
	Workers        Workers   `json:"workers"`
	Queues         []Queue   `json:"queues"`
	LateHeartbeats int       `json:"late_heartbeats"`
	Stalled        Stalled   `json:"stalled"`
	Throughput     Windows   `json:"throughput"`
	Durations      Durations `json:"durations"`
}

// Workers is the exports lane's worker pool now (--workers).
type Workers struct {
	Busy  int `json:"busy"`
	Total int `json:"total"`
}

// Queue is one lane (ARCHITECTURE.md, rule 27): its size, its jobs running now and its
// jobs waiting (PENDING, runnable or not), of every kind.
type Queue struct {
	Name    string `json:"name"`
	Workers int    `json:"workers"`
	Busy    int    `json:"busy"`
	Pending int    `json:"pending"`
}

// ReadQueues reads every lane of eng, the exports lane first, then by name. A queue
// that has PENDING jobs but no lane (a lane removed from the config) follows with 0
// workers: nothing runs its jobs, and the figures should show it.
func ReadQueues(ctx context.Context, st Store, eng *jobs.Engine) ([]Queue, error) {
	pending, err := st.PendingByQueue(ctx)
	if err != nil {
		return nil, err
	}
	var out []Queue
	for _, l := range eng.Lanes() {
		out = append(out, Queue{Name: l.Queue, Workers: l.Workers, Busy: l.Busy, Pending: pending[l.Queue]})
		delete(pending, l.Queue)
	}
	for _, name := range slices.Sorted(maps.Keys(pending)) {
		out = append(out, Queue{Name: name, Pending: pending[name]})
	}
	return out, nil
}

// Stalled is how many running exports look stalled, the first of them, and the
// thresholds.
type Stalled struct {
	// Count is how many running jobs look stalled; Jobs lists the first of them.
	Count int          `json:"count"`
	Jobs  []StalledJob `json:"jobs"`
	// The thresholds: a heartbeat older than LateHeartbeatSeconds is late; an attempt
	// running longer than NoRowsSeconds without a row looks stuck.
	LateHeartbeatSeconds float64 `json:"late_heartbeat_seconds"`
	NoRowsSeconds        float64 `json:"no_rows_seconds"`
}

// StalledJob is a running export that looks stalled.
type StalledJob struct {
	ID          string            `json:"id"`
	Report      string            `json:"report"`
	Attempt     int               `json:"attempt"`
	Reason      store.StallReason `json:"reason"`
	Rows        int64             `json:"rows"`
	StartedAt   *time.Time        `json:"started_at"`
	HeartbeatAt *time.Time        `json:"heartbeat_at"`
}

// Windows holds a figure over the last hour and the last day.
type Windows struct {
	LastHour Throughput `json:"last_hour"`
	LastDay  Throughput `json:"last_day"`
}

// Throughput counts finished exports in buckets of BucketSeconds.
type Throughput struct {
	BucketSeconds int      `json:"bucket_seconds"`
	Buckets       []Bucket `json:"buckets"`
}

// Bucket is the exports that finished within one bucket, by final state.
type Bucket struct {
	Start     time.Time `json:"start"`
	Finished  int       `json:"finished"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Canceled  int       `json:"canceled"`
}

// Durations are percentiles of wait and run times over the last hour and day.
type Durations struct {
	LastHour WaitRun `json:"last_hour"`
	LastDay  WaitRun `json:"last_day"`
}

// WaitRun is the percentiles of the time before the start and of the run time.
type WaitRun struct {
	Wait Percentiles `json:"wait"`
	Run  Percentiles `json:"run"`
}

// Percentiles are the median and the 95th percentile of Count durations, in seconds
// (null without any).
type Percentiles struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50_seconds"`
	P95   *float64 `json:"p95_seconds"`
}

// maxStalledListed bounds the stalled jobs listed; the count says how many there are.
const maxStalledListed = 20

// ReadStats reads the queue's figures, for GET /api/v1/stats and the queue page.
// Everything but the workers is about exports: webhook deliveries, jobs too, have their
// own timeline.
func ReadStats(ctx context.Context, st Store, eng *jobs.Engine) (Stats, error) {
	cfg := eng.Config()
	now := st.Now()
	late := lateAfter(cfg)
	// Halfway to the stall guard, or five minutes when the guard is off: long enough
	// for a slow query's first row, short enough to be worth a look.
	noRows := 5 * time.Minute
	if cfg.StallAfter > 0 {
		noRows = cfg.StallAfter / 2
	}

	all, err := st.QueueStats(ctx, now, now.Add(-late), export.Name)
	if err != nil {
		return Stats{}, err
	}
	qs := all[export.Name]
	queues, err := ReadQueues(ctx, st, eng)
	if err != nil {
		return Stats{}, err
	}
	// Workers keeps its meaning from before lanes: the --workers pool, now the exports
	// lane; the other lanes are in Queues.
	var workers Workers
	for _, q := range queues {
		if q.Name == store.DefaultQueue {
			workers = Workers{Busy: q.Busy, Total: q.Workers}
		}
	}
	stalled, stalledCount, err := st.StalledJobs(ctx, export.Name, now.Add(-late), now.Add(-noRows), maxStalledListed)
	if err != nil {
		return Stats{}, err
	}
	out := Stats{
		GeneratedAt:             now.UTC(),
		Counts:                  qs.Counts,
		OldestPendingAgeSeconds: oldestPendingAge(qs, now).Seconds(),
		Workers:                 workers,
		Queues:                  queues,
		LateHeartbeats:          qs.LateHeartbeats,
		Stalled: Stalled{Count: stalledCount, Jobs: make([]StalledJob, 0, len(stalled)),
			LateHeartbeatSeconds: late.Seconds(), NoRowsSeconds: noRows.Seconds()},
	}
	for _, sj := range stalled {
		j := export.JobJSON(sj.Job, "")
		out.Stalled.Jobs = append(out.Stalled.Jobs, StalledJob{ID: j.ID, Report: j.Report, Attempt: j.Attempt,
			Reason: sj.Reason, Rows: j.Progress.Rows, StartedAt: j.StartedAt, HeartbeatAt: j.HeartbeatAt})
	}
	for _, win := range []struct {
		through *Throughput
		dur     *WaitRun
		width   time.Duration
		n       int
	}{
		{&out.Throughput.LastHour, &out.Durations.LastHour, 5 * time.Minute, 12},
		{&out.Throughput.LastDay, &out.Durations.LastDay, time.Hour, 24},
	} {
		buckets, err := st.Throughput(ctx, export.Name, now, win.width, win.n)
		if err != nil {
			return Stats{}, err
		}
		*win.through = Throughput{BucketSeconds: int(win.width.Seconds()), Buckets: make([]Bucket, 0, len(buckets))}
		for _, b := range buckets {
			win.through.Buckets = append(win.through.Buckets, Bucket{Start: b.Start,
				Finished: b.Succeeded + b.Failed + b.Canceled, Succeeded: b.Succeeded, Failed: b.Failed, Canceled: b.Canceled})
		}
		ds, err := st.Durations(ctx, export.Name, now.Add(-win.width*time.Duration(win.n)))
		if err != nil {
			return Stats{}, err
		}
		*win.dur = WaitRun{Wait: toPercentiles(ds.Wait), Run: toPercentiles(ds.Run)}
	}
	return out, nil
}

func toPercentiles(p store.Percentiles) Percentiles {
	out := Percentiles{Count: p.Count}
	if p.Count > 0 {
		p50, p95 := p.P50.Seconds(), p.P95.Seconds()
		out.P50, out.P95 = &p50, &p95
	}
	return out
}
