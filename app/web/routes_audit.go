package web

import "net/http"

// auditRoutes adds the Audit page's route (issue 39), when the pages have an audit log.
func (p *Pages) auditRoutes(mux *http.ServeMux) {
	if p.cfg.Audit == nil {
		return
	}
	mux.HandleFunc("GET /audit", p.handle(p.auditPage))
}
