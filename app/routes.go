package app

import (
	"log/slog"
	"net/http"

	"sheetq/app/events"
	"sheetq/assets"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// server holds what the HTTP handlers share.
type server struct {
	cfg      Config
	store    *store.Store
	engine   *jobs.Engine
	exports  *export.Kind
	catalog  *export.Catalog
	dir      DataDir
	log      *slog.Logger
	loopback bool
	hub      *events.Hub      // job events for GET /api/v1/events
	metrics  *metrics         // GET /metrics; nil serves no metrics
	webhooks *webhook.Handler // nil or without a secret: requests with a webhook are refused
	// gate is the engine's (jobs.Config.Gate): accepting an export takes its
	// foreground, so that workers yield to it.
	gate *jobs.Gate

	auth        *authenticator              // tokens and browser sessions (initAuth)
	crossOrigin *http.CrossOriginProtection // for cookie-authenticated changes and sign-in
	bodies      bodyGuard                   // deadline on request bodies (app/body.go)
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/exports", s.createExport)
	mux.HandleFunc("GET /api/v1/exports", s.listExports)
	mux.HandleFunc("GET /api/v1/exports/{id}", s.getExport)
	mux.HandleFunc("GET /api/v1/exports/{id}/file", s.getExportFile)
	mux.HandleFunc("POST /api/v1/exports/{id}/cancel", s.cancelExport)
	mux.HandleFunc("POST /api/v1/exports/{id}/retry", s.retryExport)
	mux.HandleFunc("DELETE /api/v1/exports/{id}", s.deleteExport)
	mux.HandleFunc("GET /api/v1/reports", s.listReports)
	mux.Handle("GET /api/v1/events", s.hub)
	mux.Handle(apiCatchAll, s.apiFallback(mux)) // 404 or 405, as problem+json
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /api/v1/stats", s.getStats)
	mux.HandleFunc("GET /api/v1/openapi.json", s.openAPI)
	mux.HandleFunc("GET /{$}", s.homePage)
	mux.HandleFunc("GET /exports/new", s.newExportPage)
	mux.HandleFunc("POST /exports", s.submitExportForm)
	mux.HandleFunc("GET /exports/{id}", s.exportPage)
	mux.HandleFunc("GET /exports/{id}/row", s.exportRowFragment)
	mux.HandleFunc("POST /exports/{id}/cancel", s.cancelExportForm)
	mux.HandleFunc("POST /exports/{id}/retry", s.retryExportForm)
	mux.HandleFunc("GET /reports", s.reportsPage)
	mux.Handle("GET /reports/events", s.hub.ChangeStream(s.catalog.Subscribe))
	mux.HandleFunc("GET /queue", s.queuePage)
	mux.Handle("GET /assets/", assets.Handler())

	// Sign-in for browsers when tokens are set (app/login.go, app/auth.go).
	mux.HandleFunc("GET /login", s.loginPage)
	mux.Handle("POST /login", s.sameOrigin(s.login))
	mux.Handle("POST /logout", s.sameOrigin(s.logout))

	// Security headers go on every answer, the Host check's refusals too; the
	// cross-origin check comes before authentication so that a forged form never
	// reaches it. X-Forwarded-* from trusted proxies is applied before anything looks
	// at the client's address, scheme or host. Body deadlines come first of all: they
	// need the server's own ResponseWriter.
	return s.bodies.wrap(s.forwarded(s.logRequests(s.metrics.instrument(mux, securityHeaders(s.checkHost(s.refuseCrossOrigin(s.authenticate(mux))))))))
}
