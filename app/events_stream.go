package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"sheetq/jobs/export"
	"sheetq/store"
)

// streamEvents is GET /api/v1/events: job events as Server-Sent Events. Each event's id
// is its job_events row id, so a reconnect with Last-Event-ID (or ?last_event_id=)
// replays exactly what was missed, in order, then continues live; when those events were
// pruned it first sends a snapshot of the jobs instead. ?job= follows one job.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	since, resume, err := lastEventID(r)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "bad_last_event_id", err.Error())
		return
	}
	jobID := r.URL.Query().Get("job")
	if jobID != "" {
		if _, err := s.store.Get(ctx, jobID); errors.Is(err, store.ErrNotFound) {
			writeProblem(w, http.StatusNotFound, "not_found", "no export job "+strconv.Quote(jobID))
			return
		} else if err != nil {
			s.serverError(w, r, err)
			return
		}
	}
	// Subscribe before reading the log: every event committed after the read below then
	// also reaches sub, and the replay below covers everything before it. Ids already
	// sent are skipped, so the seam has neither a gap nor a duplicate.
	sub, err := s.hub.subscribe(jobID)
	if err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; reconnect shortly")
		return
	}
	defer s.hub.unsubscribe(sub)
	first, last, err := s.store.EventRange(ctx)
	if err != nil {
		s.serverError(w, r, err)
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

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	out := sseWriter{w: w, rc: rc}
	hint := "retry: " + strconv.FormatInt(s.hub.cfg.Retry.Milliseconds(), 10) + "\n"
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
			err = s.sendSnapshot(ctx, out, jobID, pos)
		}
	default:
		pos = since
		if err = out.raw(hint + "\n"); err == nil {
			pos, err = s.replay(ctx, out, jobID, pos)
		}
	}
	if err != nil {
		s.streamEnded(ctx, err)
		return
	}

	keepAlive := time.NewTicker(s.hub.cfg.KeepAlive)
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
			s.streamEnded(ctx, err)
			return
		}
	}
}

// replay sends the stored events after pos (of jobID, or all) and returns the id of the
// last one sent.
func (s *server) replay(ctx context.Context, out sseWriter, jobID string, pos int64) (int64, error) {
	for {
		var (
			evs []store.Event
			err error
		)
		if jobID == "" {
			evs, err = s.store.EventsAfter(ctx, pos, tailPage)
		} else {
			evs, err = s.store.JobEventsAfter(ctx, jobID, pos, tailPage)
		}
		if err != nil {
			return pos, err
		}
		msgs, err := eventMessages(ctx, s.store, evs)
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

// snapshotJSON is the data of a snapshot event.
type snapshotJSON struct {
	Jobs []jobJSON `json:"jobs"`
}

// sendSnapshot sends the current state of every unfinished job (or of jobID, finished or
// not) as one event whose id is pos.
func (s *server) sendSnapshot(ctx context.Context, out sseWriter, jobID string, pos int64) error {
	var list []store.Job
	if jobID == "" {
		var err error
		if list, err = s.store.Unfinished(ctx); err != nil {
			return err
		}
	} else {
		j, err := s.store.Get(ctx, jobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil {
			list = append(list, j)
		}
	}
	snap := snapshotJSON{Jobs: make([]jobJSON, 0, len(list))}
	for _, j := range list {
		if j.Kind == export.Name {
			snap.Jobs = append(snap.Jobs, toJobJSON(j))
		}
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	return out.send(sseMessage{id: pos, job: jobID, event: "snapshot", data: data})
}

// streamEnded logs why a stream stopped early, unless the client simply went away.
func (s *server) streamEnded(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	s.log.DebugContext(ctx, "event stream ended", "err", err)
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
