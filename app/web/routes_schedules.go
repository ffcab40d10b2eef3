package web

import "net/http"

// scheduleRoutes adds the Schedules pages' routes (issue 20).
func (p *Pages) scheduleRoutes(mux *http.ServeMux) {
	_ = mux
}
