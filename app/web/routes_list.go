package web

import (
	"net/http"
	"net/url"

	"sheetq/app/problem"
)

// listRoutes adds the routes of the exports list and of one export's page that are not
// in Routes: actions on one export or on many. Their forms post from sheetq's own
// pages, which the middleware's same-origin check holds them to, as for cancel.
func (p *Pages) listRoutes(mux problem.Mux) {
	h := p.handle
	mux.HandleFunc("POST /exports/{id}/delete", h(p.deleteExportForm))
	mux.HandleFunc("POST /exports/bulk", h(p.bulkExportsForm))
	if p.cfg.EncryptedFile != nil {
		mux.HandleFunc("POST /exports/{id}/file", h(p.encryptedFileForm))
		// The address a refused password form leaves in the bar: a reload, or the
		// page's live refresh, goes to the export's page rather than a 405.
		mux.HandleFunc("GET /exports/{id}/file", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/exports/"+url.PathEscape(r.PathValue("id")), http.StatusSeeOther)
		})
	}
}
