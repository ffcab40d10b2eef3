package events

import (
	"net/http"
	"strconv"
	"time"

	"sheetq/app/problem"
)

// ChangeStream serves a Server-Sent Event "change" (data {}) each time subscribe's
// channel fires, such as GET /reports/events for the report files on disk, so that a page
// fetches its list again. It has no ids and no replay: a page that reconnects reloads the
// list anyway. It shares the hub's keep-alive and retry hint, and ends when the hub
// stops, which graceful shutdown does not do for a stream by itself.
func (h *Hub) ChangeStream(subscribe func() (changed <-chan struct{}, unsubscribe func())) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		changed, unsubscribe := subscribe()
		defer unsubscribe()
		select {
		case <-h.stopping:
			problem.Write(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; reconnect shortly")
			return
		default:
		}

		if !streamHeaders(w, r) {
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{}) // a stream lives for hours
		w.WriteHeader(http.StatusOK)
		out := sseWriter{w: w, rc: rc}
		if err := out.raw("retry: " + strconv.FormatInt(h.cfg.Retry.Milliseconds(), 10) + "\n\n"); err != nil {
			return
		}
		keepAlive := time.NewTicker(h.cfg.KeepAlive)
		defer keepAlive.Stop()
		for {
			var err error
			select {
			case <-ctx.Done():
				return
			case <-h.stopping:
				return
			case <-keepAlive.C:
				err = out.raw(": keep-alive\n\n")
			case <-changed:
				err = out.send(sseMessage{event: "change", data: []byte("{}")})
			}
			if err != nil {
				return
			}
		}
	})
}
