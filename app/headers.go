package app

import (
	"net/http"
	"strings"
)

// contentSecurityPolicy allows only our own scripts, styles and connections: no inline
// script or style attribute runs, and no other site may frame the pages.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"

// securityHeaders sets the headers every response carries, pages and API alike.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY") // for browsers that predate frame-ancestors
		next.ServeHTTP(w, r)
	})
}

// crossOrigin refuses unsafe requests (POST, DELETE, ...) that a browser marks as coming
// from another site: the CSRF protection of the HTML forms, and of the API for browsers.
// Clients that send neither Origin nor Sec-Fetch-Site (curl, the CLI, scripts) are not
// browsers and pass; they cannot be made to send a request by a hostile page.
func (s *server) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			writeProblem(w, http.StatusForbidden, "cross_origin",
				"cross-origin requests that change state are refused; call the API from a script or the same origin")
			return
		}
		s.renderError(w, r, http.StatusForbidden, "This form came from another site",
			"The request was refused because it did not come from a sheetq page. Go back to sheetq, reload the page and try again.")
	}))
	return cop.Handler(next)
}
