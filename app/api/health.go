package api

import (
	"context"
	"errors"
	"net/http"

	"sheetq/app/problem"
	"sheetq/internal/objstore"
)

// healthz is the liveness probe: the process answers and the database reads.
func (a *API) healthz(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.Ping(r.Context()); err != nil {
		return problem.New(http.StatusServiceUnavailable, "store_unavailable", err.Error())
	}
	problem.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": a.cfg.Version, "running": a.engine.Running()})
	return nil
}

// readyz is the readiness probe: 200 while the store can take writes, 503 problem+json
// with the reason while it cannot (a full disk, a read-only or damaged file), so that a
// load balancer or an orchestrator stops sending work that would fail. GET /healthz stays
// the liveness probe: a full disk is no reason to restart the process.
//
// The store remembers why its last write failed; while it has, each call (at most once a
// second) tries one small write, so readiness comes back on its own once space is freed,
// without waiting for a request to write.
//
// A bucket that holds the published files must take writes too (files_unavailable):
// every export would otherwise fail at its upload. Its probe's answer is kept for
// seconds (jobs.S3Files.CheckWritable), so that a frequent probe costs no request.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.Ping(r.Context()); err != nil {
		return problem.New(http.StatusServiceUnavailable, "store_unavailable", "the database does not answer")
	}
	if err := a.store.ProbeWrite(r.Context()); err != nil {
		f, ok := problem.FaultOf(err)
		if !ok {
			// Whatever the store answered, it is not taking writes: not ready, never a 500.
			a.cfg.Log.WarnContext(r.Context(), "readiness probe write failed", "err", err)
			return problem.New(http.StatusServiceUnavailable, "store_unavailable", "not ready: the database does not take writes")
		}
		// Readiness is 503 whatever the fault (a 507 would read as a broken probe).
		return problem.New(http.StatusServiceUnavailable, f.Code, "not ready: "+f.Detail)
	}
	if wf, ok := a.cfg.Files.(writableFiles); ok {
		// The detail stays generic: this route needs no token, and the bucket's name and
		// endpoint are for the log (S3Files logs each change of the answer).
		if err := wf.CheckWritable(r.Context()); errors.Is(err, objstore.ErrNoBucket) {
			return problem.New(http.StatusServiceUnavailable, "files_unavailable", "not ready: the file store's bucket does not exist")
		} else if err != nil {
			return problem.New(http.StatusServiceUnavailable, "files_unavailable", "not ready: the file store does not take writes")
		}
	}
	problem.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	return nil
}

// writableFiles is a file store that can tell whether it takes writes now: a bucket
// (jobs.S3Files). The data directory's exports/ folder is on the database's disk, whose
// writes ProbeWrite already checks.
type writableFiles interface {
	CheckWritable(ctx context.Context) error
}
