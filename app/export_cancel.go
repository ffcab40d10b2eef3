package app

import (
	"errors"
	"net/http"
	"strconv"

	"sheetq/store"
)

// cancelExport cancels a PENDING job at once (200 with the CANCELED job) or asks a
// PROCESSING one to stop (202: it stops within a heartbeat interval).
func (s *server) cancelExport(w http.ResponseWriter, r *http.Request) {
	// loadJob answers 404 for an unknown id and for a job that is not an export.
	cur, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	id := cur.ID
	job, err := s.engine.Cancel(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not_found", "no export with id "+strconv.Quote(id))
		return
	case errors.Is(err, store.ErrFinished):
		writeProblemValue(w, problem{Status: http.StatusConflict, Code: "already_finished", Job: job.ID,
			Detail: "the export already ended " + string(job.Status) + "; there is nothing to cancel"})
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	s.writeJobAnswer(w, job)
}
