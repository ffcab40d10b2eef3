package events

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/jobs/export"
	"sheetq/store"
)

// ServeHTTP is GET /api/v1/events: job events as Server-Sent Events. Each event's id
// is the store's cursor just after it (opaque to clients: SQLite's is the job_events row
// id, PostgreSQL's is commit-safe and valid on every node), so a reconnect with
// Last-Event-ID (or ?last_event_id=), to this node or another of the same database,
// replays exactly what was missed, in order, then continues live; when those events were
// pruned it first sends a snapshot of the jobs instead. ?job= follows one job.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	since, jobID, prob := streamQuery(r)
	if prob != nil {
		prob.Write(w)
		return
	}
	filter := h.newFilter(ctx)
	if jobID != "" {
		j, err := h.st.Get(ctx, jobID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !filter.allowJob(j)) {
			problem.Write(w, http.StatusNotFound, "not_found", "no export job "+strconv.Quote(jobID))
			return
		} else if err != nil {
			h.report.Error(w, r, err)
			return
		}
	} else if err := filter.loadUnfinished(ctx, h.st); err != nil {
		h.report.Error(w, r, err)
		return
	}
	// Subscribe before reading the log: every event the tailer reads from then on also
	// reaches sub, and the replay below, which reads at least as far as the tailer had,
	// covers everything before. Live events at or behind the stream's position are
	// skipped, so the seam has neither a gap nor a duplicate, even when the client's
	// position came from another node whose tailer is ahead of this one's.
	sub, err := h.subscribe(jobID)
	if err != nil {
		problem.Write(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; reconnect shortly")
		return
	}
	defer h.unsubscribe(sub)
	// resume: replay after since; otherwise the stream starts at the head, after a
	// snapshot when since was given but its events are gone.
	resume := false
	if since != "" {
		resume, err = h.st.EventsKept(ctx, since)
		if errors.Is(err, store.ErrBadCursor) {
			problem.Write(w, http.StatusBadRequest, "bad_last_event_id", "Last-Event-ID must be the id of an event from this stream")
			return
		}
		if err != nil {
			h.report.Error(w, r, err)
			return
		}
	}
	var head string
	if !resume {
		if head, err = h.st.EventHead(ctx); err != nil {
			h.report.Error(w, r, err)
			return
		}
	}

	if !streamHeaders(w, r) {
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

	w.WriteHeader(http.StatusOK)

	out := sseWriter{w: w, rc: rc}
	hint := "retry: " + strconv.FormatInt(h.cfg.Retry.Milliseconds(), 10) + "\n"
	var pos string // the cursor of the last event this client has (or need not have)
	switch {
	case since == "":
		// An id line without data sets the client's last event id without dispatching
		// anything, so a reconnect before the first event still replays from here.
		pos = head
		err = out.raw(hint + "id: " + pos + "\n\n")
	case !resume:
		// The events after since were pruned (or since is not from this log): the
		// current state replaces them, and the stream goes on from the head.
		pos = head
		if err = out.raw(hint + "\n"); err == nil {
			err = h.sendSnapshot(ctx, out, filter, jobID, pos)
		}
	default:
		if err = out.raw(hint + "\n"); err == nil {
			pos, err = h.replay(ctx, out, filter, jobID, since)
		}
	}
	if err != nil {
		h.streamEnded(ctx, err)
		return
	}

	keepAlive := time.NewTicker(h.cfg.KeepAlive)
	defer keepAlive.Stop()
	// The tailer publishes in cursor order: once one live event is past pos, so is
	// every later one, and cursors need no more comparing.
	caughtUp := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.gone:
			return
		case <-keepAlive.C:
			err = out.raw(": keep-alive\n\n")
		case m := <-sub.ch:
			if m.cursor != "" && !caughtUp {
				if store.CompareCursors(m.cursor, pos) <= 0 {
					continue // replayed already, or the client had it
				}
				caughtUp = true
			}
			if !filter.allow(m) {
				continue
			}
			// Everything the tailer published at once goes out in one write: a burst
			// publishes a dozen events per read, and a flush per event cost a syscall
			// here and a wake-up in the client for each.
			if err = out.write(m); err == nil && len(sub.ch) == 0 {
				err = out.flush()
			}
		}
		if err != nil {
			h.streamEnded(ctx, err)
			return
		}
	}
}

// replay sends the stored events after pos (of jobID, or all) and returns the cursor
// after the last one read, written as the store writes it.
func (h *Hub) replay(ctx context.Context, out sseWriter, filter *streamFilter, jobID, pos string) (string, error) {
	for {
		var (
			evs  []store.CursorEvent
			next string
			err  error
		)
		if jobID == "" {
			evs, next, err = h.st.EventsSince(ctx, pos, tailPage)
		} else {
			evs, next, err = h.st.JobEventsSince(ctx, jobID, pos, tailPage)
		}
		if err != nil {
			return pos, err
		}
		msgs, err := eventMessages(ctx, h.st, evs)
		if err != nil {
			return pos, err
		}
		for _, m := range msgs {
			if !filter.allow(m) {
				continue
			}
			if err := out.write(m); err != nil {
				return pos, err
			}
		}
		if err := out.flush(); err != nil {
			return pos, err
		}
		// Past the events skipped as well as those sent (a webhook job's).
		pos = next
		if len(evs) < tailPage {
			return pos, nil
		}
	}
}

// sendSnapshot sends the current state of every unfinished job (or of jobID, finished or
// not) as one event whose id is pos.
func (h *Hub) sendSnapshot(ctx context.Context, out sseWriter, filter *streamFilter, jobID, pos string) error {
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
		if j.Kind == export.Name && filter.allowJob(j) {
			snap.Jobs = append(snap.Jobs, export.JobJSON(j, ""))
		}
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	return out.send(sseMessage{cursor: pos, job: jobID, event: "snapshot", data: data})
}

// streamEnded logs why a stream stopped early, unless the client simply went away.
func (h *Hub) streamEnded(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	h.log.DebugContext(ctx, "event stream ended", "err", err)
}

// streamHeaders sets an event stream's headers. For a HEAD it also answers and returns
// false: the server drops a HEAD answer's body without an error, so a stream would never
// notice and would hold the connection, which the client reuses for its next request,
// for good.
func streamHeaders(w http.ResponseWriter, r *http.Request) bool {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return false
	}
	return true
}

// streamQuery reads where a reconnecting client left off (since, "": nowhere) and the
// job it follows ("": every job), or the 400 that refuses the request. since is the
// Last-Event-ID header, or ?last_event_id= for clients that cannot set headers. The
// header wins, since a browser reconnecting to a URL that carries the parameter sends a
// newer id in it. The store judges the cursor (EventsKept). A query string that cannot
// be read, or that gives job or last_event_id twice, is refused: url.Values.Get would
// drop the one it cannot read and keep the first of the others, and the stream would
// start from the present (or follow another job) without a word, losing what the
// client asked to replay.
func streamQuery(r *http.Request) (since, jobID string, prob *problem.Problem) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", "", problem.New(http.StatusBadRequest, "bad_query",
			"the query string cannot be read ("+err.Error()+"); escape its values with percent-encoding")
	}
	for _, name := range []string{"job", "last_event_id"} {
		if len(q[name]) > 1 {
			return "", "", problem.New(http.StatusBadRequest, "bad_query",
				name+" is given "+strconv.Itoa(len(q[name]))+" times; give it once")
		}
	}
	if ids := r.Header.Values("Last-Event-ID"); len(ids) > 1 {
		return "", "", problem.New(http.StatusBadRequest, "bad_last_event_id",
			"Last-Event-ID is given "+strconv.Itoa(len(ids))+" times; send it once")
	}
	since = r.Header.Get("Last-Event-ID")
	if since == "" {
		since = q.Get("last_event_id")
	}
	return since, q.Get("job"), nil
}

// sseWriter writes Server-Sent Events. send flushes each one; write leaves it in the
// response's buffer for a flush after the events that go with it.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes one event and flushes it.
func (o sseWriter) send(m sseMessage) error {
	if err := o.write(m); err != nil {
		return err
	}
	return o.flush()
}

func (o sseWriter) flush() error { return o.rc.Flush() }

// write writes one event, its id line (unless it has none), type and data, without
// flushing it.
func (o sseWriter) write(m sseMessage) error {
	b := make([]byte, 0, len(m.cursor)+len(m.event)+len(m.data)+32)
	if m.cursor != "" {
		b = append(b, "id: "...)
		b = append(b, m.cursor...)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, m.event...)
	b = append(b, "\ndata: "...)
	b = append(b, m.data...) // compact JSON: one line
	b = append(b, "\n\n"...)
	_, err := o.w.Write(b)
	return err
}

// raw writes s as it is (a hint, a comment) and flushes it.
func (o sseWriter) raw(s string) error {
	if _, err := o.w.Write([]byte(s)); err != nil {
		return err
	}
	return o.rc.Flush()
}
