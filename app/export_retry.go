package app

import (
	"errors"
	"net/http"
	"strconv"

	"sheetq/store"
)

// retryExport runs a FAILED or CANCELED job again with a fresh attempt budget (the
// server's --max-attempts), keeping its history.
func (s *server) retryExport(w http.ResponseWriter, r *http.Request) {
	// loadJob answers 404 for an unknown id and for a job that is not an export.
	cur, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	id := cur.ID
	job, err := s.store.Retry(r.Context(), id, s.cfg.MaxAttempts)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not_found", "no export with id "+strconv.Quote(id))
		return
	case errors.Is(err, store.ErrNotRetryable):
		writeProblemValue(w, problem{Status: http.StatusConflict, Code: "not_retryable", Job: job.ID,
			Detail: "the export is " + string(job.Status) + "; only a FAILED or CANCELED export can be retried"})
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	s.engine.Wake()
	if s.hub != nil {
		s.hub.Notify() // the retried event is not the engine's, so it does not wake the hub
	}
	w.Header().Set("Location", "/api/v1/exports/"+job.ID)
	w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter(job)))
	writeJSON(w, http.StatusAccepted, toJobJSON(job))
}
