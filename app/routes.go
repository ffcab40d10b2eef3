package app

import (
	"log/slog"
	"net/http"

	"sheetq/assets"
	"sheetq/jobs"
	"sheetq/jobs/export"
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
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/exports", s.createExport)
	mux.HandleFunc("GET /api/v1/exports", s.listExports)
	mux.HandleFunc("GET /api/v1/exports/{id}", s.getExport)
	mux.HandleFunc("GET /api/v1/exports/{id}/file", s.getExportFile)
	mux.HandleFunc("GET /api/v1/reports", s.listReports)
	mux.HandleFunc("/api/", s.apiNotFound)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /{$}", s.homePage)
	mux.Handle("GET /assets/", assets.Handler())
	return s.logRequests(s.checkHost(s.authenticate(mux)))
}
