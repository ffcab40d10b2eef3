package app

import (
	"net/http"
	"strings"
)

// apiCatchAll is the pattern that takes every API request no other route took.
const apiCatchAll = "/api/"

// probeMethods are the methods a 405's Allow header can list.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete}

// apiFallback answers API requests that no route took, as problem+json: 405 with an Allow
// header when the path has routes for other methods, 404 when it has none. The mux
// itself would answer 405, but the catch-all pattern matches every method and hides it,
// so the fallback asks the mux which other methods would have matched.
func (s *server) apiFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range probeMethods {
			probe := r.WithContext(r.Context()) // a shallow copy; only the method differs
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != apiCatchAll {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			s.apiNotFound(w, r)
			return
		}
		list := strings.Join(allow, ", ")
		w.Header().Set("Allow", list)
		writeProblem(w, http.StatusMethodNotAllowed, "method_not_allowed",
			r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+list)
	})
}
