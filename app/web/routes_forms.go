package web

import "sheetq/app/problem"

// formRoutes adds the routes of the New export form and the Queue page that are not in
// Routes.
func (p *Pages) formRoutes(mux problem.Mux) {
	mux.HandleFunc("GET /exports/new/estimate", p.handle(p.estimateFragment))
}
