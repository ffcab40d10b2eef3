package app

import (
	"context"
	"net/http"
	"strconv"

	"github.com/a-h/templ"

	"sheetq/store"
	"sheetq/ui"
)

// meta is what every page's header needs; page names the current page, and job, when
// set, narrows the page's event stream to one export.
func (s *server) meta(ctx context.Context, page, job string) ui.Meta {
	m := ui.Meta{Version: s.cfg.Version, DataDir: s.dir.Root, Page: page, Events: "/api/v1/events"}
	// The stream starts after the newest event the page already reflects, so that an
	// event committed between rendering and connecting is replayed, not lost.
	if _, last, err := s.store.EventRange(ctx); err == nil {
		m.Events += "?last_event_id=" + strconv.FormatInt(last, 10)
		if job != "" {
			m.Events += "&job=" + job
		}
	} else if job != "" {
		m.Events += "?job=" + job
	}
	return m
}

// render writes a page with status; pages are never cached, since they show live state.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil {
		s.log.ErrorContext(r.Context(), "render page", "path", r.URL.Path, "err", err)
	}
}

// renderError shows a page that says what went wrong and what to do.
func (s *server) renderError(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	s.render(w, r, status, ui.ErrorPage(s.meta(r.Context(), "", ""), title, message))
}

// pageServerError logs an unexpected failure and shows an error page without internals.
func (s *server) pageServerError(w http.ResponseWriter, r *http.Request, err error) {
	if f, ok := s.storeFault(r, err); ok {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		s.renderError(w, r, f.status, f.title, f.message)
		return
	}
	if store.IsBusy(err) {
		s.log.WarnContext(r.Context(), "database busy", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		s.renderError(w, r, http.StatusServiceUnavailable, "sheetq is busy",
			"The database is held by another program for the moment. Nothing was lost; try again in a few seconds.")
		return
	}
	s.log.ErrorContext(r.Context(), "page failed", "method", r.Method, "path", r.URL.Path, "err", err)
	s.renderError(w, r, http.StatusInternalServerError, "Something went wrong",
		"sheetq could not show this page. Reload it in a moment; if this repeats, the server log says why.")
}
