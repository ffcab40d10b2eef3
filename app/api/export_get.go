package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"sheetq/app/exports"
	"sheetq/app/problem"
	"sheetq/internal/apiv1"
	"sheetq/jobs/export"
	"sheetq/store"
)

// getExport shows one job.
func (a *API) getExport(w http.ResponseWriter, r *http.Request) error {
	job, err := a.loadJob(r)
	if err != nil {
		return err
	}
	if !job.Status.Final() {
		w.Header().Set("Retry-After", strconv.Itoa(a.exports.RetryAfter(job)))
	}
	problem.WriteJSON(w, http.StatusOK, export.JobJSON(job, ""))
	return nil
}

type listJSON struct {
	Exports    []apiv1.Job `json:"exports"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// listExports lists jobs newest first, with ?status=, ?report=, ?limit= and an opaque ?cursor=.
func (a *API) listExports(w http.ResponseWriter, r *http.Request) error {
	q, err := listQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	opts := store.ListOptions{Kind: export.Name, Limit: 50}
	if v := q.Get("status"); v != "" {
		st := store.Status(strings.ToUpper(v))
		if !st.Valid() {
			return problem.New(http.StatusBadRequest, "bad_status",
				"status must be one of PENDING, PROCESSING, SUCCEEDED, FAILED, CANCELED, EXPIRED")
		}
		opts.Status = st
	}
	opts.Report = q.Get("report")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return problem.New(http.StatusBadRequest, "bad_limit", "limit must be a whole number from 1 to 1000")
		}
		opts.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		seq, ok, err := a.exports.CursorSeq(r.Context(), v)
		if err != nil {
			return err
		}
		if !ok {
			return problem.New(http.StatusBadRequest, "bad_cursor", "cursor is not one this server gave out")
		}
		opts.Before = seq
	}
	jobs, err := a.store.List(r.Context(), exports.ListFor(r.Context(), opts))
	if err != nil {
		return err
	}
	out := listJSON{Exports: make([]apiv1.Job, 0, len(jobs))}
	if len(jobs) == opts.Limit {
		out.NextCursor = exports.EncodeCursor(jobs[len(jobs)-1])
	}
	for _, j := range a.exports.Filter(r.Context(), jobs) {
		out.Exports = append(out.Exports, export.JobJSON(j, ""))
	}
	problem.WriteJSON(w, http.StatusOK, out)
	return nil
}

// listQuery parses the list's query string, or returns the 400 that refuses it.
// url.Values.Get would quietly drop what it cannot read (a bad escape, a ';') and keep
// only the first of a repeated parameter, answering 200 with a listing the client did
// not ask for: ?status=FAILED&status=CANCELED is not an OR.
func listQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, problem.New(http.StatusBadRequest, "bad_query",
			"the query string cannot be read ("+err.Error()+"); escape its values with percent-encoding")
	}
	for _, name := range []string{"status", "report", "limit", "cursor"} {
		if len(q[name]) > 1 {
			return nil, problem.New(http.StatusBadRequest, "bad_query",
				name+" is given "+strconv.Itoa(len(q[name]))+" times; give it once")
		}
	}
	return q, nil
}
