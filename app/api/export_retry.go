package api

import (
	"errors"
	"net/http"

	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/store"
)

// retryExport runs a FAILED or CANCELED job again with a fresh attempt budget (the
// server's --max-attempts), keeping its history.
func (a *API) retryExport(w http.ResponseWriter, r *http.Request) error {
	// loadJob answers 404 for an unknown id and for a job that is not an export.
	cur, err := a.loadJob(r)
	if err != nil {
		return err
	}
	if err := a.exports.Record(r.Context(), audit.ExportRetried, cur, "asked through the API, while "+string(cur.Status)); err != nil {
		return err
	}
	job, err := a.exports.Retry(r.Context(), cur.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return problem.NotFound(cur.ID)
	case errors.Is(err, store.ErrNotRetryable):
		p := problem.New(http.StatusConflict, "not_retryable",
			"the export is "+string(job.Status)+"; only a FAILED or CANCELED export can be retried")
		p.Job = job.ID
		return p
	case err != nil:
		return err
	}
	a.writeJobAnswer(w, job)
	return nil
}
