package app

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"sheetq/jobs/export"
	"sheetq/store"
)

// getExport shows one job.
func (s *server) getExport(w http.ResponseWriter, r *http.Request) {
	job, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	if !job.Status.Final() {
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter(job)))
	}
	writeJSON(w, http.StatusOK, toJobJSON(job))
}

// loadJob fetches the {id} job or answers 404.
func (s *server) loadJob(w http.ResponseWriter, r *http.Request) (store.Job, bool) {
	id := r.PathValue("id")
	job, err := s.store.Get(r.Context(), id)
	if err == nil && job.Kind != export.Name {
		err = store.ErrNotFound // a webhook delivery is not an export
	}
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, "not_found", "no export with id "+strconv.Quote(id))
		return job, false
	}
	if err != nil {
		s.serverError(w, r, err)
		return job, false
	}
	return job, true
}

type listJSON struct {
	Exports    []jobJSON `json:"exports"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// listExports lists jobs newest first, with ?status=, ?report=, ?limit= and an opaque ?cursor=.
func (s *server) listExports(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := store.ListOptions{Kind: export.Name, Limit: 50}
	if v := q.Get("status"); v != "" {
		st := store.Status(strings.ToUpper(v))
		if !st.Valid() {
			writeProblem(w, http.StatusBadRequest, "bad_status",
				"status must be one of PENDING, PROCESSING, SUCCEEDED, FAILED, CANCELED, EXPIRED")
			return
		}
		opts.Status = st
	}
	opts.Report = q.Get("report")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeProblem(w, http.StatusBadRequest, "bad_limit", "limit must be a whole number from 1 to 1000")
			return
		}
		opts.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		seq, ok, err := s.cursorSeq(r.Context(), v)
		if err != nil {
			s.serverError(w, r, err)
			return
		}
		if !ok {
			writeProblem(w, http.StatusBadRequest, "bad_cursor", "cursor is not one this server gave out")
			return
		}
		opts.Before = seq
	}
	jobs, err := s.store.List(r.Context(), opts)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := listJSON{Exports: make([]jobJSON, 0, len(jobs))}
	for _, j := range jobs {
		out.Exports = append(out.Exports, toJobJSON(j))
	}
	if len(jobs) == opts.Limit {
		last := jobs[len(jobs)-1]
		out.NextCursor = encodeCursor(last)
	}
	writeJSON(w, http.StatusOK, out)
}

// A cursor is the Seq of the last job shown, encoded so clients treat it as opaque.
func encodeCursor(j store.Job) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(j.Seq, 10)))
}

// cursorSeq decodes a cursor into ListOptions.Before; ok is false for one this server did
// not give out. Cursors given out before listings went by insertion order hold
// "<created ms>.<job id>"; one of those resumes after its job while that job exists.
func (s *server) cursorSeq(ctx context.Context, c string) (seq int64, ok bool, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false, nil
	}
	head, id, legacy := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(head, 10, 64)
	switch {
	case err != nil:
		return 0, false, nil
	case !legacy:
		return n, n > 0, nil
	case id == "":
		return 0, false, nil
	}
	j, err := s.store.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	return j.Seq, err == nil, err
}

// writeJobAnswer answers with a job after a change: 200 once it is final, otherwise 202
// with where to look and when to look again.
func (s *server) writeJobAnswer(w http.ResponseWriter, job store.Job) {
	if job.Status.Final() {
		writeJSON(w, http.StatusOK, toJobJSON(job))
		return
	}
	w.Header().Set("Location", "/api/v1/exports/"+job.ID)
	w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter(job)))
	writeJSON(w, http.StatusAccepted, toJobJSON(job))
}
