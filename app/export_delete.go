package app

import (
	"errors"
	"net/http"
	"strconv"

	"sheetq/store"
)

// deleteExport removes a finished job, its events and its file.
func (s *server) deleteExport(w http.ResponseWriter, r *http.Request) {
	// loadJob answers 404 for an unknown id and for a job that is not an export.
	cur, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	id := cur.ID
	job, err := s.engine.Delete(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not_found", "no export with id "+strconv.Quote(id))
		return
	case errors.Is(err, store.ErrNotFinished):
		writeProblemValue(w, problem{Status: http.StatusConflict, Code: "not_finished", Job: job.ID,
			Detail: "the export is " + string(job.Status) + "; cancel it first (POST /api/v1/exports/" + job.ID + "/cancel)"})
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
