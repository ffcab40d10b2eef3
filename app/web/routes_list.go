package web

import "sheetq/app/problem"

// listRoutes adds the routes of the exports list and of one export's page that are not
// in Routes: actions on one export or on many. Their forms post from sheetq's own
// pages, which the middleware's same-origin check holds them to, as for cancel.
func (p *Pages) listRoutes(mux problem.Mux) {
	h := p.handle
	mux.HandleFunc("POST /exports/{id}/delete", h(p.deleteExportForm))
	mux.HandleFunc("POST /exports/bulk", h(p.bulkExportsForm))
	if p.cfg.EncryptedFile != nil {
		mux.HandleFunc("POST /exports/{id}/file", h(p.encryptedFileForm))
	}
}
