package api

import (
	"errors"
	"net/http"

	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/store"
)

// cancelExport cancels a PENDING job at once (200 with the CANCELED job) or asks a
// PROCESSING one to stop (202: it stops within a heartbeat interval).
func (a *API) cancelExport(w http.ResponseWriter, r *http.Request) error {
	// loadJob answers 404 for an unknown id and for a job that is not an export.
	cur, err := a.loadJob(r)
	if err != nil {
		return err
	}
	if err := a.exports.Record(r.Context(), audit.ExportCanceled, cur, "asked through the API, while "+string(cur.Status)); err != nil {
		return err
	}
	job, err := a.engine.Cancel(r.Context(), cur.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound(cur.ID)
	case errors.Is(err, store.ErrFinished):
		p := problem.New(http.StatusConflict, "already_finished",
			"the export already ended "+string(job.Status)+"; there is nothing to cancel")
		p.Job = job.ID
		return p
	case err != nil:
		return err
	}
	a.writeJobAnswer(w, job)
	return nil
}
