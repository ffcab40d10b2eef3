package app

import (
	"net/http"
	"time"

	"sheetq/store"
	"sheetq/ui"
)

// listReports shows the reports that can be exported, with their params.
func (s *server) listReports(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"reports": s.exports.Reports()})
}

// healthz is the liveness probe: the process answers and the database reads.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	if err := s.store.Ping(r.Context()); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.cfg.Version, "running": s.engine.Running()})
}

// apiNotFound answers unknown API paths with problem+json, not the HTML 404.
func (s *server) apiNotFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, http.StatusNotFound, "no_route", "no API route "+r.Method+" "+r.URL.Path)
}

// serverError logs an unexpected failure and answers 500 without internals.
func (s *server) serverError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeProblem(w, http.StatusInternalServerError, "internal", "the server could not complete the request; see its log")
}

// homePage lists the newest exports.
func (s *server) homePage(w http.ResponseWriter, r *http.Request) {
	list, err := s.store.List(r.Context(), store.ListOptions{Limit: 50})
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	rows := make([]ui.JobRow, 0, len(list))
	for _, j := range list {
		jj := toJobJSON(j)
		row := ui.JobRow{ID: j.ID, Report: jj.Report, Status: string(j.Status), Rows: j.ProgressRows,
			TotalRows: j.ProgressTotal, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
			Created: j.CreatedAt.Local().Format(time.DateTime), DownloadURL: jj.DownloadURL}
		if jj.Error != nil {
			row.Error = jj.Error.Message
		}
		rows = append(rows, row)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	origin := "http://" + r.Host
	if err := ui.Home(ui.Meta{Version: s.cfg.Version, DataDir: s.dir.Root}, origin, rows).Render(r.Context(), w); err != nil {
		s.log.ErrorContext(r.Context(), "render home", "err", err)
	}
}
