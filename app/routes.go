package app

import (
	"net/http"

	"sheetq/assets"
)

// routes is one mux for the whole server: the JSON API (app/api), the event streams
// (app/events), the pages (app/web) and the static assets, behind the middleware
// (app/middleware) and the request metrics (app/metrics).
func (a *App) routes() http.Handler {
	mux := http.NewServeMux()
	a.api.Routes(mux)
	mux.Handle("GET /api/v1/events", a.hub)
	mux.Handle("GET /reports/events", a.hub.ChangeStream(a.kind.catalog.Subscribe))
	a.pages.Routes(mux)
	mux.Handle("GET /assets/", assets.Handler())
	return a.mw.Wrap(mux, a.metrics.Instrument(mux))
}
