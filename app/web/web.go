// Package web owns the page handlers: the exports list and its rows, the export page and
// its buttons, the new-export form, the reports page, the queue page and the sign-in
// page; templ components in package ui draw them, from the view models built here. The
// reports page's change stream is app/events' (Hub.ChangeStream) (ARCHITECTURE.md,
// "Parts").
//
// Every handler has the shape problem.HandlerFunc and returns its failure: a *pageError
// (what went wrong and what to do, with a status), or an error that becomes the page for
// a database fault, a busy database or a server error. A handler never both writes an
// error page and returns an error.
package web

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/app/exports"
	"sheetq/app/metrics"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/app/schedules"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// DeliverySettings is what the schedule form asks of the deliveries (*deliver.Handler).
type DeliverySettings interface {
	CanEmail() bool
	CanCopy() bool
}

// Config is what the page handlers share.
type Config struct {
	// Exports accepts, loads and retries exports (shared with the API).
	Exports *exports.Service
	// Catalog lists the reports.
	Catalog *export.Catalog
	// Gate is the engine's: accepting a form takes its foreground, as for the API.
	Gate *jobs.Gate
	// Middleware checks sign-in tokens and sets session cookies.
	Middleware *middleware.Stack
	// DataDir is shown in the page header; ReportsDir on the reports page.
	DataDir, ReportsDir string
	// Version is shown in the page header.
	Version string
	// Log receives render failures and the sign-in log lines.
	Log *slog.Logger
	// Problems notes database faults and tells a client gone or a busy database.
	Problems problem.Reporter
	// Schedules keeps the scheduled exports (issue 20).
	Schedules *schedules.Service
	// Deliveries says which delivery settings this server has, for the schedule form's
	// hints; nil: the form gives none.
	Deliveries DeliverySettings
	// Metrics samples the queue depth that the Queue page charts; nil (a tool's app
	// without metrics) leaves the chart without samples.
	Metrics *metrics.Metrics
	// Audit is the audit log (issue 39), which admins read on the Audit page; nil serves
	// no /audit.
	Audit *audit.Log
	// EncryptedFile answers with an export's xlsx file encrypted with a password (the
	// API's, shared so that the export page's form and POST /api/v1/exports/{id}/file
	// serve the same bytes): a problem, with nothing written, when the job has no file
	// to give. Nil: the page offers no encrypted download.
	EncryptedFile func(w http.ResponseWriter, r *http.Request, job store.Job, password string) error
}

// Pages is the page handlers.
type Pages struct {
	cfg     Config
	exports *exports.Service
	store   exports.Store
	engine  *jobs.Engine
}

// New returns the pages over cfg.
func New(cfg Config) *Pages {
	return &Pages{cfg: cfg, exports: cfg.Exports, store: cfg.Exports.Store, engine: cfg.Exports.Engine}
}

// Routes adds the pages' routes to mux.
func (p *Pages) Routes(mux problem.Mux) {
	h := p.handle
	mux.HandleFunc("GET /{$}", h(p.homePage))
	mux.HandleFunc("GET /exports/new", h(p.newExportPage))
	mux.HandleFunc("POST /exports", h(p.submitExportForm))
	mux.HandleFunc("GET /exports/{id}", h(p.exportPage))
	mux.HandleFunc("GET /exports/{id}/row", h(p.exportRowFragment))
	mux.HandleFunc("POST /exports/{id}/cancel", h(p.cancelExportForm))
	mux.HandleFunc("POST /exports/{id}/retry", h(p.retryExportForm))
	mux.HandleFunc("GET /reports", h(p.reportsPage))
	mux.HandleFunc("GET /queue", h(p.queuePage))
	p.listRoutes(mux)
	p.formRoutes(mux)
	p.scheduleRoutes(mux)
	p.auditRoutes(mux)

	// Sign-in for browsers when tokens are set (login.go, app/middleware/auth.go).
	mux.HandleFunc("GET /login", h(p.loginPage))
	mux.Handle("POST /login", p.cfg.Middleware.SameOrigin(h(p.login)))
	mux.Handle("POST /logout", p.cfg.Middleware.SameOrigin(h(p.logout)))

	// Every other path (the API has its own catch-all, "/api/"): a page in the layout.
	mux.Handle(pagesCatchAll, h(p.fallback(mux)))
	for _, pattern := range postOnly() {
		mux.Handle(pattern, h(p.fallback(mux)))
	}
}

// pagesCatchAll is the pattern that takes every request no other route took.
const pagesCatchAll = "/"

// postOnly are GET patterns of paths that only take a form's POST, which a GET route
// with a wildcard would otherwise take for an id: a GET of /exports/bulk (the address
// of a bulk action's page, entered again) is not an export named "bulk" but a 405.
func postOnly() []string { return []string{"GET /exports/bulk", "GET /schedules/preview"} }

// fallback answers requests that no route took with a page inside the layout, whose
// navigation is the way back: 405 with an Allow header when the path has routes for
// other methods (a form posted to a page, say), 404 when it has none.
func (p *Pages) fallback(mux problem.Mux) problem.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if allow := problem.AllowedMethods(mux, r, append(postOnly(), pagesCatchAll)...); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return &pageError{status: http.StatusMethodNotAllowed, title: "Not allowed here",
				message: "This page does not take a " + r.Method + " request."}
		}
		return &pageError{status: http.StatusNotFound, title: "Page not found",
			message: "There is no page at " + r.URL.Path + "."}
	}
}

// pageError is a page that says what went wrong and what to do, which a handler returns.
type pageError struct {
	status         int
	title, message string
	// close asks for the connection to be closed (a body that may still be arriving).
	close bool
	// back is the way on that the page offers; zero: back to the exports.
	back ui.Link
}

func (e *pageError) Error() string { return strconv.Itoa(e.status) + " " + e.title }

// adminOnly is the 403 page for a member, which what ("The queue page") names; nil
// for an admin.
func adminOnly(r *http.Request, what string) error {
	if access.From(r.Context()).IsAdmin() {
		return nil
	}
	return forbidden(what + " is for admins only. Ask an admin if you need it.")
}

// forbidden is the 403 page: message says what is missing.
func forbidden(message string) *pageError {
	return &pageError{status: http.StatusForbidden, title: "Not allowed", message: message}
}

// handle adapts a handler: the error it returns is shown as a page (ServeError).
func (p *Pages) handle(h problem.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			p.ServeError(w, r, err)
		}
	}
}

// ServeError shows err as a page: a *pageError as itself; a database fault, a busy
// database or anything else (logged) as a page that says what to do, without internals.
func (p *Pages) ServeError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *pageError
	if errors.As(err, &pe) {
		if pe.status == http.StatusForbidden && p.cfg.Problems.Refused != nil {
			p.cfg.Problems.Refused(r, pe.message)
		}
		if pe.close {
			w.Header().Set("Connection", "close")
		}
		p.render(w, r, pe.status, ui.ErrorPage(p.meta(r.Context(), "", ""), pe.title, pe.message, pe.back))
		return
	}
	if errors.Is(err, schedules.ErrDeclared) {
		p.RenderError(w, r, http.StatusConflict, "This schedule is kept in the config file", err.Error())
		return
	}
	if errors.Is(err, schedules.ErrBusy) {
		p.RenderError(w, r, http.StatusConflict, "This schedule kept changing", "Others changed it while your edit was saved, so it was not; open it again and repeat the edit.")
		return
	}
	if prob, ok := problem.Unstorable(err); ok {
		p.RenderError(w, r, prob.Status, "This cannot be saved", sentence(prob.Detail))
		return
	}
	if f, ok := p.cfg.Problems.Fault(r, err); ok {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		p.RenderError(w, r, f.Status, f.Title, f.Message)
		return
	}
	if p.cfg.Problems.Busy(r, err) {
		w.Header().Set("Retry-After", "1")
		p.RenderError(w, r, http.StatusServiceUnavailable, "sheetq is busy",
			"The database is held by another program for the moment. Nothing was lost; try again in a few seconds.")
		return
	}
	p.cfg.Log.ErrorContext(r.Context(), "page failed", "method", r.Method, "path", r.URL.Path, "err", err)
	p.RenderError(w, r, http.StatusInternalServerError, "Something went wrong",
		"sheetq could not show this page. Reload it in a moment; if this repeats, the server log says why.")
}

// meta is what every page's header needs; page names the current page, and job, when
// set, narrows the page's event stream to one export.
func (p *Pages) meta(ctx context.Context, page, job string) ui.Meta {
	m := ui.Meta{Version: p.cfg.Version, DataDir: p.cfg.DataDir, Page: page, Events: "/api/v1/events",
		Admin: access.From(ctx).IsAdmin(), Audit: p.cfg.Audit != nil && access.From(ctx).IsAdmin()}
	if who := access.From(ctx); who.Kind != access.Local && who.Name != "" {
		m.SignedIn = cmp.Or(who.Display, who.Name)
		if who.Display != "" && who.Display != who.Name {
			m.SignedIn += " (" + who.Name + ")"
		}
	}
	// The stream starts after the newest event the page already reflects, so that an
	// event committed between rendering and connecting is replayed, not lost. The
	// cursor is opaque (metrics.Store's EventHead, from either store).
	if head, err := p.store.EventHead(ctx); err == nil {
		m.Events += "?last_event_id=" + url.QueryEscape(head)
		if job != "" {
			m.Events += "&job=" + job
		}
	} else if job != "" {
		m.Events += "?job=" + job
	}
	return m
}

// render writes a page with status; pages are never cached, since they show live state.
func (p *Pages) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, zone := viewerZone(r)
	ctx := ui.WithViewerZone(r.Context(), zone, r.Method == http.MethodGet)
	if err := c.Render(ctx, w); err != nil {
		p.cfg.Log.ErrorContext(r.Context(), "render page", "path", r.URL.Path, "err", err)
	}
}

// RenderError shows a page that says what went wrong and what to do; the middleware
// shows its refusals of browsers' requests with it too.
func (p *Pages) RenderError(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	p.render(w, r, status, ui.ErrorPage(p.meta(r.Context(), "", ""), title, message, ui.Link{}))
}
