package api

import (
	"net/http"

	"sheetq/app/exports"
	"sheetq/app/problem"
)

// listReports shows the reports that can be exported, with their params, and the
// files that failed to load with their errors: to a member, only the reports they may
// run, without their SQL (exports.ReportFor).
func (a *API) listReports(w http.ResponseWriter, r *http.Request) error {
	entries := a.cfg.Catalog.Entries()
	out := make([]exports.Report, 0, len(entries))
	for _, e := range entries {
		if a.exports.MayRunEntry(r.Context(), e) {
			out = append(out, a.exports.ReportWithResume(r.Context(), e))
		}
	}
	problem.WriteJSON(w, http.StatusOK, map[string]any{"reports": out})
	return nil
}
