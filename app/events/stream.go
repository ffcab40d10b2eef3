package events

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/jobs/export"
	"sheetq/store"
)

// ServeHTTP is GET /api/v1/events: job events as Server-Sent Events. Each event's id
// is its job_events row id, so a reconnect with Last-Event-ID (or ?last_event_id=)
// replays exactly what was missed, in order, then continues live; when those events were
// pruned it first sends a snapshot of the jobs instead. ?job= follows one job.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	since, resume, err := lastEventID(r)
	if err != nil {
		problem.Write(w, http.StatusBadRequest, "bad_last_event_id", err.Error())
		return
	}
	jobID := r.URL.Query().Get("job")
	if jobID != "" {
		if _, err := h.st.Get(ctx, jobID); errors.Is(err, store.ErrNotFound) {
			problem.Write(w, http.StatusNotFound, "not_found", "no export job "+strconv.Quote(jobID))
			return
		} else if err != nil {
			h.report.Error(w, r, err)
			return
		}
	}
	// Subscribe before reading the log: every event committed after the read below then
	// also reaches sub, and the replay below covers everything before it. Ids already
	// sent are skipped, so the seam has neither a gap nor a duplicate.
	sub, err := h.subscribe(jobID)
	if err != nil {
		problem.Write(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; reconnect shortly")
		return
	}
	defer h.unsubscribe(sub)
	first, last, err := h.st.EventRange(ctx)
	if err != nil {
		h.report.Error(w, r, err)
		return
	}

	rc := http.NewResponseController(w)
	// A stream lives for hours: it must not inherit a server-wide write timeout.
	_ = rc.SetWriteDeadline(time.Time{})
	// A write blocked on a client that stopped reading would keep this handler (and a
	// graceful shutdown) waiting: when the hub drops the client or stops, a deadline in
	// the past makes that write fail at once. The watcher ends before the handler does,
	// so it never touches a connection that serves a later request.
	watchDone, handlerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-sub.gone:
			_ = rc.SetWriteDeadline(time.Now())
		case <-handlerDone:
		}
	}()
	defer func() { close(handlerDone); <-watchDone }()

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	out := sseWriter{w: w, rc: rc}
	hint := "retry: " + strconv.FormatInt(h.cfg.Retry.Milliseconds(), 10) + "\n"
	var pos int64 // the id of the last event this client has (or need not have)
	switch {
	case !resume:
		// An id line without data sets the client's last event id without dispatching
		// anything, so a reconnect before the first event still replays from here.
		pos = last
		err = out.raw(hint + "id: " + strconv.FormatInt(pos, 10) + "\n\n")
	case since < first-1 || since > last:
		// The events after since were pruned (or since is not from this log): the
		// current state replaces them, and the stream goes on from the newest event.
		pos = last
		if err = out.raw(hint + "\n"); err == nil {
			err = h.sendSnapshot(ctx, out, jobID, pos)
		}
	default:
		pos = since
		if err = out.raw(hint + "\n"); err == nil {
			pos, err = h.replay(ctx, out, jobID, pos)
		}
	}
	if err != nil {
		h.streamEnded(ctx, err)
		return
	}

	keepAlive := time.NewTicker(h.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.gone:
			return
		case <-keepAlive.C:
			err = out.raw(": keep-alive\n\n")
		case m := <-sub.ch:
			if m.id >= 0 {
				if m.id <= pos {
					continue // replayed already
				}
				pos = m.id
			}
			err = out.send(m)
		}
		if err != nil {
			h.streamEnded(ctx, err)
			return
		}
	}
}

// replay sends the stored events after pos (of jobID, or all) and returns the id of the
// last one sent.
func (h *Hub) replay(ctx context.Context, out sseWriter, jobID string, pos int64) (int64, error) {
	for {
		var (
			evs []store.Event
			err error
		)
		if jobID == "" {
			evs, err = h.st.EventsAfter(ctx, pos, tailPage)
		} else {
			evs, err = h.st.JobEventsAfter(ctx, jobID, pos, tailPage)
		}
		if err != nil {
			return pos, err
		}
		msgs, err := eventMessages(ctx, h.st, evs)
		if err != nil {
			return pos, err
		}
		for _, m := range msgs {
			if err := out.send(m); err != nil {
				return pos, err
			}
			pos = m.id
		}
		if len(evs) < tailPage {
			return pos, nil
		}
	}
}

// sendSnapshot sends the current state of every unfinished job (or of jobID, finished or
// not) as one event whose id is pos.
func (h *Hub) sendSnapshot(ctx context.Context, out sseWriter, jobID string, pos int64) error {
	var list []store.Job
	if jobID == "" {
		var err error
		if list, err = h.st.Unfinished(ctx); err != nil {
			return err
		}
	} else {
		j, err := h.st.Get(ctx, jobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil {
			list = append(list, j)
		}
	}
	snap := apiv1.Snapshot{Jobs: make([]apiv1.Job, 0, len(list))}
	for _, j := range list {
		if j.Kind == export.Name {
			snap.Jobs = append(snap.Jobs, export.JobJSON(j, ""))
		}
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	return out.send(sseMessage{id: pos, job: jobID, event: "snapshot", data: data})
}

// streamEnded logs why a stream stopped early, unless the client simply went away.
func (h *Hub) streamEnded(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	h.log.DebugContext(ctx, "event stream ended", "err", err)
}

// lastEventID reads where a reconnecting client left off: the Last-Event-ID header, or
// ?last_event_id= for clients that cannot set headers. The header wins, since a browser
// reconnecting to a URL that carries the parameter sends a newer id in it.
func lastEventID(r *http.Request) (id int64, ok bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return 0, false, nil
	}
	id, err = strconv.ParseInt(v, 10, 64)
	if err != nil || id < 0 {
		return 0, false, errors.New("Last-Event-ID must be the id of an event from this stream, a non-negative integer")
	}
	return id, true, nil
}

// sseWriter writes Server-Sent Events and flushes each one.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes one event: its id line (unless it has none), type and data.
func (o sseWriter) send(m sseMessage) error {
	b := make([]byte, 0, len(m.event)+len(m.data)+40)
	if m.id >= 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, m.id, 10)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, m.event...)
	b = append(b, "\ndata: "...)
	b = append(b, m.data...) // compact JSON: one line
	b = append(b, "\n\n"...)
	if _, err := o.w.Write(b); err != nil {
		return err
	}
	return o.rc.Flush()
}

// raw writes s as it is (a hint, a comment) and flushes it.
func (o sseWriter) raw(s string) error {
	if _, err := o.w.Write([]byte(s)); err != nil {
		return err
	}
	return o.rc.Flush()
}
