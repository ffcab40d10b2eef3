package problem

import (
	"net/http"
	"slices"
)

// probeMethods are the methods a 405's Allow header can list.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete}

// AllowedMethods lists the methods that a route of mux other than the catch-all
// patterns would take r's path with. A catch-all pattern ("/api/", "/") matches every
// method, so the mux no longer answers 405 by itself; its fallback asks this instead.
func AllowedMethods(mux Mux, r *http.Request, catchAll ...string) []string {
	var allow []string
	for _, m := range probeMethods {
		probe := r.WithContext(r.Context()) // a shallow copy; only the method differs
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && !slices.Contains(catchAll, pattern) {
			allow = append(allow, m)
		}
	}
	return allow
}

// Mux is where the API and the pages register their routes: an *http.ServeMux, or the
// app's table over one, which keeps every pattern so that the permission matrix test
// can require an entry for each (app.TestPermissionMatrix).
type Mux interface {
	Handle(pattern string, handler http.Handler)
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
	Handler(r *http.Request) (h http.Handler, pattern string)
}
