package app

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"sheetq/ui"
)

// reportsPage is GET /reports: every report with its params and SQL, and every broken
// file with its error. With ?fragment=list it answers only the list, which the page's
// script fetches when a report file changes.
func (s *server) reportsPage(w http.ResponseWriter, r *http.Request) {
	entries := s.catalog.Entries()
	views := make([]ui.ReportView, 0, len(entries))
	for _, e := range entries {
		views = append(views, reportView(toReportJSON(e)))
	}
	if r.URL.Query().Get("fragment") == "list" {
		s.render(w, r, http.StatusOK, ui.ReportList(views))
		return
	}
	s.render(w, r, http.StatusOK, ui.Reports(s.meta(r.Context(), "reports", ""), cmp.Or(s.cfg.ReportsDir, s.dir.Reports()), views))
}

// reportView is a report as the reports page shows it.
func reportView(rj reportJSON) ui.ReportView {
	v := ui.ReportView{ID: rj.ID, Title: rj.Title, Description: rj.Description, Source: rj.Source,
		Sheet: rj.Sheet, File: rj.File, SQL: rj.SQL}
	for _, p := range rj.Params {
		pv := ui.ParamView{Name: p.Name, Type: string(p.Type), Label: p.Label}
		if p.Default != nil {
			pv.Default = fmt.Sprint(p.Default)
		} else {
			pv.Default = "(required)"
		}
		switch {
		case p.Min != nil && p.Max != nil:
			pv.Range = num(*p.Min) + " to " + num(*p.Max)
		case p.Min != nil:
			pv.Range = "at least " + num(*p.Min)
		case p.Max != nil:
			pv.Range = "at most " + num(*p.Max)
		}
		v.Params = append(v.Params, pv)
	}
	if le := rj.Error; le != nil {
		v.ErrFile = le.File
		v.ErrText = le.Message
		if le.File != "" && le.Line > 0 {
			v.ErrText = le.File + ":" + strconv.Itoa(le.Line) + ": " + le.Message
		} else if le.File != "" {
			v.ErrText = le.File + ": " + le.Message
		}
	}
	return v
}

// reportsChangedStream is GET /reports/events: a Server-Sent Event "change" each time
// the report files change on disk, so the reports page can fetch its list again.
func (s *server) reportsChangedStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	changed, unsubscribe := s.catalog.Subscribe()
	defer unsubscribe()
	stop := s.hub.Stopping()
	select {
	case <-stop:
		writeProblem(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; reconnect shortly")
		return
	default:
	}

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream lives for hours
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := sseWriter{w: w, rc: rc}
	if err := out.raw("retry: " + strconv.FormatInt(s.hub.cfg.Retry.Milliseconds(), 10) + "\n\n"); err != nil {
		return
	}
	keepAlive := time.NewTicker(s.hub.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-keepAlive.C:
			err = out.raw(": keep-alive\n\n")
		case <-changed:
			err = out.send(sseMessage{id: -1, event: "change", data: []byte("{}")})
		}
		if err != nil {
			return
		}
	}
}
