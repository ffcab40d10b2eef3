package app

import (
	"context"
	"net/http"
	"time"

	"sheetq/jobs/export"
	"sheetq/store"
)

// statsJSON is GET /api/v1/stats: the queue now, and how it did over the last hour and day.
type statsJSON struct {
	GeneratedAt time.Time            `json:"generated_at"`
	Counts      map[store.Status]int `json:"counts"`
	// OldestPendingAgeSeconds is how long the oldest runnable PENDING job has waited
	// since it became runnable; 0 when none waits.
	OldestPendingAgeSeconds float64       `json:"oldest_pending_age_seconds"`
	Workers                 workersJSON   `json:"workers"`
	LateHeartbeats          int           `json:"late_heartbeats"`
	Stalled                 stalledJSON   `json:"stalled"`
	Throughput              windowsJSON   `json:"throughput"`
	Durations               durationsJSON `json:"durations"`
}

type workersJSON struct {
	Busy  int `json:"busy"`
	Total int `json:"total"`
}

type stalledJSON struct {
	// Count is how many running jobs look stalled; Jobs lists the first of them.
	Count int              `json:"count"`
	Jobs  []stalledJobJSON `json:"jobs"`
	// The thresholds: a heartbeat older than LateHeartbeatSeconds is late; an attempt
	// running longer than NoRowsSeconds without a row looks stuck.
	LateHeartbeatSeconds float64 `json:"late_heartbeat_seconds"`
	NoRowsSeconds        float64 `json:"no_rows_seconds"`
}

type stalledJobJSON struct {
	ID          string            `json:"id"`
	Report      string            `json:"report"`
	Attempt     int               `json:"attempt"`
	Reason      store.StallReason `json:"reason"`
	Rows        int64             `json:"rows"`
	StartedAt   *time.Time        `json:"started_at"`
	HeartbeatAt *time.Time        `json:"heartbeat_at"`
}

type windowsJSON struct {
	LastHour throughputJSON `json:"last_hour"`
	LastDay  throughputJSON `json:"last_day"`
}

type throughputJSON struct {
	BucketSeconds int          `json:"bucket_seconds"`
	Buckets       []bucketJSON `json:"buckets"`
}

type bucketJSON struct {
	Start     time.Time `json:"start"`
	Finished  int       `json:"finished"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Canceled  int       `json:"canceled"`
}

type durationsJSON struct {
	LastHour waitRunJSON `json:"last_hour"`
	LastDay  waitRunJSON `json:"last_day"`
}

type waitRunJSON struct {
	Wait percentilesJSON `json:"wait"`
	Run  percentilesJSON `json:"run"`
}

type percentilesJSON struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50_seconds"`
	P95   *float64 `json:"p95_seconds"`
}

// maxStalledListed bounds the stalled jobs listed; the count says how many there are.
const maxStalledListed = 20

// getStats answers GET /api/v1/stats for the UI's dashboard. Everything but the workers
// is about exports: webhook deliveries, jobs too, have their own timeline.
func (s *server) getStats(w http.ResponseWriter, r *http.Request) {
	out, err := s.stats(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// stats reads the queue's figures, for GET /api/v1/stats and the queue page.
func (s *server) stats(ctx context.Context) (statsJSON, error) {
	cfg := s.engine.Config()
	now := s.store.Now()
	late := lateAfter(cfg)
	// Halfway to the stall guard, or five minutes when the guard is off: long enough
	// for a slow query's first row, short enough to be worth a look.
	noRows := 5 * time.Minute
	if cfg.StallAfter > 0 {
		noRows = cfg.StallAfter / 2
	}

	all, err := s.store.QueueStats(ctx, now, now.Add(-late), export.Name)
	if err != nil {
		return statsJSON{}, err
	}
	qs := all[export.Name]
	stalled, stalledCount, err := s.store.StalledJobs(ctx, export.Name, now.Add(-late), now.Add(-noRows), maxStalledListed)
	if err != nil {
		return statsJSON{}, err
	}
	out := statsJSON{
		GeneratedAt:             now.UTC(),
		Counts:                  qs.Counts,
		OldestPendingAgeSeconds: oldestPendingAge(qs, now).Seconds(),
		Workers:                 workersJSON{Busy: s.engine.Running(), Total: cfg.Workers},
		LateHeartbeats:          qs.LateHeartbeats,
		Stalled: stalledJSON{Count: stalledCount, Jobs: make([]stalledJobJSON, 0, len(stalled)),
			LateHeartbeatSeconds: late.Seconds(), NoRowsSeconds: noRows.Seconds()},
	}
	for _, sj := range stalled {
		j := toJobJSON(sj.Job)
		out.Stalled.Jobs = append(out.Stalled.Jobs, stalledJobJSON{ID: j.ID, Report: j.Report, Attempt: j.Attempt,
			Reason: sj.Reason, Rows: j.Progress.Rows, StartedAt: j.StartedAt, HeartbeatAt: j.HeartbeatAt})
	}
	for _, win := range []struct {
		through *throughputJSON
		dur     *waitRunJSON
		width   time.Duration
		n       int
	}{
		{&out.Throughput.LastHour, &out.Durations.LastHour, 5 * time.Minute, 12},
		{&out.Throughput.LastDay, &out.Durations.LastDay, time.Hour, 24},
	} {
		buckets, err := s.store.Throughput(ctx, export.Name, now, win.width, win.n)
		if err != nil {
			return statsJSON{}, err
		}
		*win.through = throughputJSON{BucketSeconds: int(win.width.Seconds()), Buckets: make([]bucketJSON, 0, len(buckets))}
		for _, b := range buckets {
			win.through.Buckets = append(win.through.Buckets, bucketJSON{Start: b.Start,
				Finished: b.Succeeded + b.Failed + b.Canceled, Succeeded: b.Succeeded, Failed: b.Failed, Canceled: b.Canceled})
		}
		ds, err := s.store.Durations(ctx, export.Name, now.Add(-win.width*time.Duration(win.n)))
		if err != nil {
			return statsJSON{}, err
		}
		*win.dur = waitRunJSON{Wait: toPercentilesJSON(ds.Wait), Run: toPercentilesJSON(ds.Run)}
	}
	return out, nil
}

func toPercentilesJSON(p store.Percentiles) percentilesJSON {
	out := percentilesJSON{Count: p.Count}
	if p.Count > 0 {
		p50, p95 := p.P50.Seconds(), p.P95.Seconds()
		out.P50, out.P95 = &p50, &p95
	}
	return out
}
