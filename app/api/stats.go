package api

import (
	"net/http"

	"sheetq/app/metrics"
	"sheetq/app/problem"
)

// getStats answers GET /api/v1/stats for the UI's dashboard (metrics.ReadStats).
func (a *API) getStats(w http.ResponseWriter, r *http.Request) error {
	out, err := metrics.ReadStats(r.Context(), a.store, a.engine)
	if err != nil {
		return err
	}
	problem.WriteJSON(w, http.StatusOK, out)
	return nil
}
