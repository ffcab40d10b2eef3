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
	mux := &routeTable{ServeMux: http.NewServeMux()}
	defer func() { a.patterns = mux.patterns }()
	a.api.Routes(mux)
	mux.Handle("GET /api/v1/events", a.hub)
	mux.Handle("GET /reports/events", a.hub.ChangeStream(a.kind.catalog.Subscribe))
	a.pages.Routes(mux)
	if a.oidc != nil {
		a.oidc.Routes(mux) // GET /auth/login and GET /auth/callback
	}
	mux.Handle("GET /assets/", assets.Handler())
	return a.mw.Wrap(cleanAPIPaths(mux), a.metrics.Instrument(mux.ServeMux))
}

// routeTable is the server's mux, keeping every pattern registered on it: the route
// table that the permission matrix test requires an entry for each of
// (app.TestPermissionMatrix).
type routeTable struct {
	*http.ServeMux
	patterns []string
}

func (t *routeTable) Handle(pattern string, h http.Handler) {
	t.patterns = append(t.patterns, pattern)
	t.ServeMux.Handle(pattern, h)
}

func (t *routeTable) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	t.patterns = append(t.patterns, pattern)
	t.ServeMux.HandleFunc(pattern, h)
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
