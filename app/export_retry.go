package app

import (
	"context"
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
	job, err := s.retryJob(r.Context(), id)
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
	s.writeJobAnswer(w, job)
}

// retryJob puts a FAILED or CANCELED job back in the queue with a fresh attempt budget,
// for the API and the job page alike, and tells the workers and the event stream.
func (s *server) retryJob(ctx context.Context, id string) (store.Job, error) {
	return s.engine.Retry(ctx, id, s.cfg.MaxAttempts)
}
