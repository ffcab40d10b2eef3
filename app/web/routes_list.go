package web

import "net/http"

// listRoutes adds the routes of the exports list and of one export's page that are not
// in Routes: actions on one export or on many.
func (p *Pages) listRoutes(mux *http.ServeMux) {
	_ = mux
}
