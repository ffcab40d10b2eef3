package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"sheetq/internal/client"
)

// finalSeen is when the event stream first showed a job in a final state.
type finalSeen struct {
	at     time.Time
	status string
}

// eventFollower reads GET /api/v1/events on one connection, as a browser's EventSource
// would, and notes when each job reaches a final state. It reconnects with Last-Event-ID
// when the stream breaks, so no event is missed.
type eventFollower struct {
	api *client.Client

	mu     sync.Mutex
	finals map[string]finalSeen
	lastID string

	seen, reconnects atomic.Int64
	cancel           context.CancelFunc
	done             chan struct{}
}

func newEventFollower(api *client.Client) *eventFollower {
	return &eventFollower{api: api, finals: map[string]finalSeen{}, done: make(chan struct{})}
}

// start opens the stream and returns once the server has subscribed it (the response
// headers are sent after the subscription), so no event of the run can be missed.
func (f *eventFollower) start(ctx context.Context) error {
	ctx, f.cancel = context.WithCancel(ctx)
	resp, err := f.connect(ctx)
	if err != nil {
		f.cancel()
		return fmt.Errorf("event stream: %w", err)
	}
	go func() {
		defer close(f.done)
		for {
			f.read(resp)
			if ctx.Err() != nil {
				return
			}
			for {
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					return
				}
				f.reconnects.Add(1)
				if resp, err = f.connect(ctx); err == nil {
					break
				}
			}
		}
	}()
	return nil
}

func (f *eventFollower) stop() {
	f.cancel()
	<-f.done
}

func (f *eventFollower) connect(ctx context.Context) (*http.Response, error) {
	f.mu.Lock()
	last := f.lastID
	f.mu.Unlock()
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if last != "" {
		hdr.Set("Last-Event-ID", last)
	}
	return f.api.Request(ctx, http.MethodGet, "/api/v1/events", nil, hdr)
}

// read parses the stream until it ends.
func (f *eventFollower) read(resp *http.Response) {
	defer resp.Body.Close()
	_ = client.ReadEvents(resp.Body, func(e client.Event) bool {
		if e.Type != "" {
			f.dispatch(e.Type, e.Data, time.Now())
		}
		if e.ID != "" {
			f.mu.Lock()
			f.lastID = e.ID
			f.mu.Unlock()
		}
		return true
	})
}

// dispatch records final states; other events are only counted, to keep the client cheap.
func (f *eventFollower) dispatch(event string, data []byte, at time.Time) {
	f.seen.Add(1)
	switch event {
	case "succeeded", "completed_from_file", "failed", "canceled":
		var d struct {
			Job   *struct{ ID, Status string } `json:"job"`
			Event struct{ Status string }      `json:"event"`
		}
		if json.Unmarshal(data, &d) != nil || d.Job == nil {
			return
		}
		f.record(d.Job.ID, d.Event.Status, at)
	case "snapshot":
		var d struct {
			Jobs []struct{ ID, Status string } `json:"jobs"`
		}
		if json.Unmarshal(data, &d) != nil {
			return
		}
		for _, j := range d.Jobs {
			switch j.Status {
			case "SUCCEEDED", "FAILED", "CANCELED", "EXPIRED":
				f.record(j.ID, j.Status, at)
			}
		}
	}
}

func (f *eventFollower) record(id, status string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.finals[id]; !ok {
		f.finals[id] = finalSeen{at: at, status: status}
	}
}

// final returns when job id was first seen final.
func (f *eventFollower) final(id string) (finalSeen, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs, ok := f.finals[id]
	return fs, ok
}
