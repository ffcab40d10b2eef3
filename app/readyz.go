package app

import (
	"net/http"
)

// readyz is the readiness probe: 200 while the store can take writes, 503 problem+json
// with the reason while it cannot (a full disk, a read-only or damaged file), so that a
// load balancer or an orchestrator stops sending work that would fail. GET /healthz stays
// the liveness probe: a full disk is no reason to restart the process.
//
// The store remembers why its last write failed; while it has, each call (at most once a
// second) tries one small write, so readiness comes back on its own once space is freed,
// without waiting for a request to write.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.store.Ping(r.Context()); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "store_unavailable", "the database does not answer")
		return
	}
	if err := s.store.ProbeWrite(r.Context()); err != nil {
		f, ok := faultOf(err)
		if !ok {
			s.serverError(w, r, err)
			return
		}
		// Readiness is 503 whatever the fault (a 507 would read as a broken probe).
		writeProblem(w, http.StatusServiceUnavailable, f.code, "not ready: "+f.detail)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}
