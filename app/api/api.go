// Package api owns the JSON API's handlers (HTTP API v1): exports (create, list, get,
// file, cancel, retry, delete), reports, stats, the health and readiness probes, the
// OpenAPI document and the problem+json answers to routes that do not exist. One file
// per action. The event stream (GET /api/v1/events) is app/events' (ARCHITECTURE.md,
// "Parts").
//
// Every handler has the shape problem.HandlerFunc: it returns its failure (a
// *problem.Problem, or an error that problem.Reporter turns into 499, a database fault,
// 503 or 500) and never writes a problem itself.
package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"sheetq/app/audit"
	"sheetq/app/exports"
	"sheetq/app/metrics"
	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/app/schedules"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// Config is what the API's handlers share.
type Config struct {
	// Exports accepts, loads and retries exports (shared with the pages).
	Exports *exports.Service
	// Catalog lists the reports.
	Catalog *export.Catalog
	// Webhooks checks a request's webhook; nil or without a secret, requests with a
	// webhook are refused.
	Webhooks *webhook.Handler
	// Gate is the engine's (jobs.Config.Gate): accepting an export takes its
	// foreground, so that workers yield to it.
	Gate *jobs.Gate
	// Middleware answers a request body that did not arrive in time.
	Middleware *middleware.Stack
	// Metrics serves GET /metrics; nil serves no metrics.
	Metrics *metrics.Metrics
	// DataDir is the data directory and ExportsDir its folder of published files.
	DataDir, ExportsDir string
	// Files is where the published files are (jobs.OpenFiles); nil is ExportsDir
	// (jobs.LocalFiles, which serves a file only from inside the data directory).
	Files jobs.Files
	// Download says how a file in a bucket reaches the client: streamed through this
	// node (DownloadStream, the default) or by a redirect to a presigned URL
	// (DownloadRedirect). A local file is always streamed.
	Download Download
	// Version is shown in GET /healthz.
	Version string
	// Log receives the handlers' warnings.
	Log *slog.Logger
	// Problems answers what handlers return.
	Problems problem.Reporter
	// Schedules keeps the scheduled exports (issue 20); nil serves no /api/v1/schedules.
	Schedules *schedules.Service
	// Audit is the audit log (issue 39); nil serves no /api/v1/audit.
	Audit *audit.Log
}

// API is the JSON API's handlers.
type API struct {
	cfg     Config
	exports *exports.Service
	store   exports.Store
	engine  *jobs.Engine
}

// New returns the API over cfg.
func New(cfg Config) *API {
	if cfg.Files == nil {
		cfg.Files = jobs.NewLocalFiles(cfg.ExportsDir)
	}
	return &API{cfg: cfg, exports: cfg.Exports, store: cfg.Exports.Store, engine: cfg.Exports.Engine}
}

// Routes adds the API's routes to mux, the 404/405 fallback for /api/ included.
func (a *API) Routes(mux problem.Mux) {
	h := a.cfg.Problems.Handler
	mux.HandleFunc("POST /api/v1/exports", h(a.createExport))
	mux.HandleFunc("GET /api/v1/exports", h(a.listExports))
	mux.HandleFunc("GET /api/v1/exports/{id}", h(a.getExport))
	mux.HandleFunc("GET /api/v1/exports/{id}/file", h(a.getExportFile))
	mux.HandleFunc("POST /api/v1/exports/{id}/file", h(a.postExportFile))
	mux.HandleFunc("POST /api/v1/exports/{id}/cancel", h(a.cancelExport))
	mux.HandleFunc("POST /api/v1/exports/{id}/retry", h(a.retryExport))
	mux.HandleFunc("DELETE /api/v1/exports/{id}", h(a.deleteExport))
	mux.HandleFunc("GET /api/v1/reports", h(a.listReports))
	if a.cfg.Schedules != nil {
		mux.HandleFunc("POST /api/v1/schedules", h(a.createSchedule))
		mux.HandleFunc("GET /api/v1/schedules", h(a.listSchedules))
		mux.HandleFunc("POST /api/v1/schedules/preview", h(a.previewSchedule))
		mux.HandleFunc("GET /api/v1/schedules/{id}", h(a.getSchedule))
		mux.HandleFunc("PATCH /api/v1/schedules/{id}", h(a.patchSchedule))
		mux.HandleFunc("DELETE /api/v1/schedules/{id}", h(a.deleteSchedule))
		mux.HandleFunc("POST /api/v1/schedules/{id}/pause", h(a.pauseSchedule))
		mux.HandleFunc("POST /api/v1/schedules/{id}/resume", h(a.resumeSchedule))
		mux.HandleFunc("GET /api/v1/schedules/{id}/exports", h(a.scheduleFirings))
	}
	if a.cfg.Audit != nil {
		mux.HandleFunc("GET /api/v1/audit", h(a.getAudit))
	}
	mux.Handle(apiCatchAll, h(a.fallback(mux))) // 404 or 405, as problem+json
	for _, path := range probePaths() {
		mux.Handle(path, h(a.fallback(mux))) // 405, as problem+json
	}
	mux.HandleFunc("GET /healthz", h(a.healthz))
	mux.HandleFunc("GET /readyz", h(a.readyz))
	metricsH := a.cfg.Metrics.Handler()
	mux.HandleFunc("GET /metrics", h(adminOnly("the metrics", func(w http.ResponseWriter, r *http.Request) error {
		metricsH.ServeHTTP(w, r)
		return nil
	})))
	mux.HandleFunc("GET /api/v1/stats", h(adminOnly("the queue's statistics", a.getStats)))
	mux.HandleFunc("GET /api/v1/openapi.json", a.openAPI)
}

// adminOnly answers 403 to a member: what names what is for admins.
func adminOnly(what string, next problem.HandlerFunc) problem.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := exports.AdminOnly(r.Context(), what); err != nil {
			return err
		}
		return next(w, r)
	}
}

// loadJob fetches the {id} export, or returns the 404 problem.
func (a *API) loadJob(r *http.Request) (store.Job, error) {
	id := r.PathValue("id")
	job, err := a.exports.Load(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return job, problem.NotFound(id)
	}
	return job, err
}

// writeJobAnswer answers with a job after a change: 200 once it is final, otherwise 202
// with where to look and when to look again.
func (a *API) writeJobAnswer(w http.ResponseWriter, job store.Job) {
	if job.Status.Final() {
		problem.WriteJSON(w, http.StatusOK, export.JobJSON(job, ""))
		return
	}
	w.Header().Set("Location", "/api/v1/exports/"+job.ID)
	w.Header().Set("Retry-After", strconv.Itoa(a.exports.RetryAfter(job)))
	problem.WriteJSON(w, http.StatusAccepted, export.JobJSON(job, ""))
}
