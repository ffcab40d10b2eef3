package web

import "sheetq/app/problem"

// auditRoutes adds the Audit page's route (issue 39), when the pages have an audit log.
func (p *Pages) auditRoutes(mux problem.Mux) {
	if p.cfg.Audit == nil {
		return
	}
	mux.HandleFunc("GET /audit", p.handle(p.auditPage))
}
