package api

import (
	"errors"
	"net/http"

	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/store"
)

// deleteExport removes a finished job, its events and its file (jobs.Engine.Delete).
func (a *API) deleteExport(w http.ResponseWriter, r *http.Request) error {
	// loadJob answers 404 for an unknown id and for a job that is not an export.
	cur, err := a.loadJob(r)
	if err != nil {
		return err
	}
	if err := a.exports.Record(r.Context(), audit.ExportDeleted, cur, "asked through the API, while "+string(cur.Status)); err != nil {
		return err
	}
	job, err := a.engine.Delete(r.Context(), cur.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound(cur.ID)
	case errors.Is(err, store.ErrNotFinished):
		p := problem.New(http.StatusConflict, "not_finished",
			"the export is "+string(job.Status)+"; cancel it first (POST /api/v1/exports/"+job.ID+"/cancel)")
		p.Job = job.ID
		return p
	case err != nil:
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
