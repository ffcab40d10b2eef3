package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Event is one server-sent event of /api/v1/events: its id (empty for progress and
// deleted, which are never replayed), its type, and its data lines joined with "\n".
type Event struct {
	ID, Type string
	Data     []byte
}

// ReadEvents parses the text/event-stream r and calls fn with each event at the blank
// line that ends it, until r ends or fails or fn returns false. Blocks with nothing but
// comments (the keep-alives) are skipped.
func ReadEvents(r io.Reader, fn func(Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a snapshot event can be large
	var ev Event
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if ev.ID != "" || ev.Type != "" || len(ev.Data) > 0 {
				if !fn(ev) {
					return nil
				}
			}
			ev = Event{}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Type = value
		case "data":
			if len(ev.Data) > 0 {
				ev.Data = append(ev.Data, '\n')
			}
			ev.Data = append(ev.Data, value...)
		case "id":
			ev.ID = value
		}
	}
	return sc.Err()
}

// Events opens GET /api/v1/events (only job's events when job is not empty), replaying
// what followed lastID when it is not empty, and calls fn with each event until the
// stream ends or fails, ctx ends, or fn returns false. It returns the id of the last
// event seen (lastID when none had one) and why the stream ended: nil when it simply
// ended, a *Problem when the server refused it.
func (c *Client) Events(ctx context.Context, job, lastID string, fn func(Event) bool) (string, error) {
	path := "/api/v1/events"
	if job != "" {
		path += "?job=" + url.QueryEscape(job)
	}
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		hdr.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Request(ctx, http.MethodGet, path, nil, hdr)
	if err != nil {
		return lastID, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return lastID, fmt.Errorf("the server answered %q, not an event stream (a proxy that buffers it?)", ct)
	}
	err = ReadEvents(resp.Body, func(e Event) bool {
		if e.ID != "" {
			lastID = e.ID
		}
		return fn(e)
	})
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return lastID, err
}
