package app

import (
	"net/http"
	"path"
	"strings"

	"sheetq/app/problem"
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
	if a.oidc != nil {
		a.oidc.Routes(mux) // GET /auth/login and GET /auth/callback
	}
	mux.Handle("GET /assets/", assets.Handler())
	return a.mw.Wrap(cleanAPIPaths(mux), a.metrics.Instrument(mux))
}

// cleanAPIPaths answers 404 for an API path that is not in its clean form, which
// ServeMux would redirect (301) to the clean one: /api/v1/exports/. names no export, and
// a client that follows the redirect turns DELETE /api/v1/exports/. into GET
// /api/v1/exports, the list, and reads 200 as "deleted". Pages keep the redirect: a
// browser cleans dot segments before it sends them.
func cleanAPIPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/api/") {
			clean := path.Clean(p)
			if strings.HasSuffix(p, "/") && clean != "/" {
				clean += "/"
			}
			if clean != p {
				problem.Write(w, http.StatusNotFound, "not_found", "no API resource at "+p+": a path with empty, . or .. segments names nothing")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
