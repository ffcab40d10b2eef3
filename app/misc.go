package app

import (
	"errors"
	"net/http"

	"sheetq/jobs/export"
)

// reportJSON is a report as GET /api/v1/reports shows it; a broken file is listed with
// its error instead of disappearing.
type reportJSON struct {
	ID          string         `json:"id"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	Source      string         `json:"source,omitempty"`
	Sheet       string         `json:"sheet,omitempty"`
	Params      []export.Param `json:"params"`
	Count       bool           `json:"count,omitempty"`
	SQL         string         `json:"sql,omitempty"`
	File        string         `json:"file,omitempty"`
	Error       *loadErrorJSON `json:"error,omitempty"`
}

type loadErrorJSON struct {
	Message string `json:"message"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
}

func toReportJSON(e export.Entry) reportJSON {
	r := e.Report
	out := reportJSON{ID: r.ID, Title: r.Title, Description: r.Description, Source: r.Source, Sheet: r.Sheet, Params: r.Params,
		Count: r.Count, SQL: r.Query, File: e.File}
	if out.Params == nil {
		out.Params = []export.Param{}
	}
	if e.Err != nil {
		le := &loadErrorJSON{Message: e.Err.Error(), File: e.File}
		var pe *export.ParseError
		if errors.As(e.Err, &pe) {
			le.Message, le.File, le.Line = pe.Msg, pe.File, pe.Line
		}
		out.Error = le
	}
	return out
}

// listReports shows the reports that can be exported, with their params, and the
// files that failed to load with their errors.
func (s *server) listReports(w http.ResponseWriter, r *http.Request) {
	entries := s.catalog.Entries()
	out := make([]reportJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, toReportJSON(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"reports": out})
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
