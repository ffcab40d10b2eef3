package api

import (
	"net/http"
	"strings"

	"sheetq/app/problem"
)

// apiCatchAll is the pattern that takes every API request no other route took.
const apiCatchAll = "/api/"

// probePaths are the API's paths outside /api/ (the probes and the metrics, for
// machines too): each has a method-less pattern, so that another method is the API's
// 405 problem, not the pages' HTML one.
func probePaths() []string { return []string{"/healthz", "/readyz", "/metrics"} }

// fallback answers API requests that no route took, as problem+json: 405 with an Allow
// header when the path has routes for other methods, 404 when it has none. The mux
// itself would answer 405, but the catch-all pattern matches every method and hides it,
// so the fallback asks the mux which other methods would have matched.
func (a *API) fallback(mux problem.Mux) problem.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		allow := problem.AllowedMethods(mux, r, append(probePaths(), apiCatchAll)...)
		if len(allow) == 0 {
			return problem.New(http.StatusNotFound, "no_route", "no API route "+r.Method+" "+r.URL.Path)
		}
		list := strings.Join(allow, ", ")
		return problem.New(http.StatusMethodNotAllowed, "method_not_allowed",
			r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+list).With("Allow", list)
	}
}
