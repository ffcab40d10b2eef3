package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"sheetq/internal/apiv1"
)

// Wait follows job until it ends, calling update with each state it learns of: the
// event stream (GET /api/v1/events?job=ID), reconnecting with Last-Event-ID when it
// drops, and polling every 2 s when the stream cannot be had (a proxy that buffers it,
// say). It returns the last state seen, with ctx's error when ctx ended first.
func (c *Client) Wait(ctx context.Context, job Job, update func(Job)) (Job, error) {
	if update == nil {
		update = func(Job) {}
	}
	if job.Finished() {
		return job, nil
	}
	var lastID string
	failures := 0
	for failures < 3 {
		connected, err := c.follow(ctx, &job, &lastID, update)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return job, err
		}
		if job.Finished() {
			return job, nil
		}
		if connected {
			failures = 0
		} else {
			failures++
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(time.Duration(failures) * 500 * time.Millisecond):
		}
	}
	// Polling: the stream is unavailable.
	netErrs := 0
	for {
		j, _, err := c.GetJob(ctx, job.ID)
		switch {
		case err == nil:
			netErrs = 0
			job = j
			update(job)
			if job.Finished() {
				return job, nil
			}
		case ctx.Err() != nil:
			return job, ctx.Err()
		default:
			if Refused(err) {
				return job, err
			}
			if netErrs++; netErrs > 15 {
				return job, err
			}
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// follow reads the job's event stream until the job ends or the stream drops.
// connected reports whether the stream was opened; err is only a fatal error (a
// refusal, or the context ending).
func (c *Client) follow(ctx context.Context, job *Job, lastID *string, update func(Job)) (connected bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if *lastID != "" {
		hdr.Set("Last-Event-ID", *lastID)
	}
	resp, err := c.Request(ctx, http.MethodGet, "/api/v1/events?job="+url.QueryEscape(job.ID), nil, hdr)
	if err != nil {
		if Refused(err) {
			return false, err
		}
		return false, nil
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return false, nil
	}
	// The job may have ended before the stream was opened: look once.
	if j, _, err := c.GetJob(ctx, job.ID); err == nil {
		*job = j
		update(*job)
		if job.Finished() {
			return true, nil
		}
	}
	// A stream that goes silent past two keep-alives (15 s each) is dead.
	watchdog := time.AfterFunc(40*time.Second, cancel)
	defer watchdog.Stop()
	body := &watched{r: resp.Body, reset: func() { watchdog.Reset(40 * time.Second) }}
	_ = ReadEvents(body, func(e Event) bool {
		if e.ID != "" {
			*lastID = e.ID
		}
		if len(e.Data) > 0 {
			apply(e, job, update)
		}
		return !job.Finished()
	})
	return true, nil
}

// watched is a reader that calls reset whenever bytes arrive: the keep-alives too.
type watched struct {
	r     io.Reader
	reset func()
}

func (w *watched) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.reset()
	}
	return n, err
}

// apply updates job from one event about it: progress, a snapshot, or an event that
// carries the job.
func apply(e Event, job *Job, update func(Job)) {
	switch e.Type {
	case "progress":
		var p apiv1.ProgressEvent
		if json.Unmarshal(e.Data, &p) == nil && p.ID == job.ID {
			job.Progress.Rows, job.Progress.TotalRows = p.Rows, p.TotalRows
			update(*job)
		}
	case "snapshot":
		var s apiv1.Snapshot
		if json.Unmarshal(e.Data, &s) == nil {
			for _, j := range s.Jobs {
				if j.ID == job.ID {
					*job = j
					update(*job)
				}
			}
		}
	default:
		var m apiv1.StateEvent
		if json.Unmarshal(e.Data, &m) == nil && m.Job != nil && m.Job.ID == job.ID {
			*job = *m.Job
			update(*job)
		}
	}
}
