package app

import (
	"context"
	"errors"
	"net/http"

	"sheetq/jobs/export"
	"sheetq/store"
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

// statusClientClosed is the status logged for a request its client abandoned.
const statusClientClosed = 499

// serverError logs an unexpected failure and answers 500 without internals. A database
// held busy by another connection is not a server bug: that answers 503 with Retry-After,
// so clients (and their Idempotency-Key retries) come back instead of giving up.
func (s *server) serverError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client hung up first (a timeout under overload) and its work was abandoned
		// (an enqueue still queued for the group commit is dropped before any write).
		// Nobody reads the answer, and it is not a server error: 499, as nginx logs it.
		s.log.InfoContext(r.Context(), "client closed the request", "method", r.Method, "path", r.URL.Path)
		w.WriteHeader(statusClientClosed)
		return
	}
	if f, ok := s.storeFault(r, err); ok {
		writeFault(w, f)
		return
	}
	if store.IsBusy(err) {
		s.log.WarnContext(r.Context(), "database busy", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "store_busy",
			"the database is busy (another connection holds its lock); retry shortly")
		return
	}
	s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeProblem(w, http.StatusInternalServerError, "internal", "the server could not complete the request; see its log")
}
