package middleware

import (
	"net/http"
	"strings"

	"sheetq/app/problem"
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

// refuseCrossOrigin refuses unsafe requests (POST, DELETE, ...) that a browser marks as
// coming from another site: the CSRF protection of the HTML forms, and of the API for
// browsers. Clients that send neither Origin nor Sec-Fetch-Site (curl, the CLI, scripts)
// are not browsers and pass; they cannot be made to send a request by a hostile page.
// s.crossOrigin trusts the --base-url origin too (New), for a proxy that rewrites Host.
func (s *Stack) refuseCrossOrigin(next http.Handler) http.Handler {
	return s.crossOrigin.Handler(next)
}

// refusedCrossOrigin answers a request the cross-origin check refused.
func (s *Stack) refusedCrossOrigin(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") || s.cfg.Refused == nil {
		problem.Write(w, http.StatusForbidden, "cross_origin",
			"cross-origin requests that change state are refused; call the API from a script or the same origin")
		return
	}
	s.cfg.Refused(w, r, http.StatusForbidden, "This form came from another site",
		"The request was refused because it did not come from a sheetq page. Go back to sheetq, reload the page and try again.")
}

// SameOrigin refuses cross-site form posts to h (a page elsewhere posting a token of its
// choosing would sign the browser in as someone else).
func (s *Stack) SameOrigin(h http.HandlerFunc) http.Handler {
	return s.crossOrigin.Handler(h)
}
