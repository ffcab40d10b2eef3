package app

import (
	"encoding/json"
	"errors"
	"net/http"

	"sheetq/store"
)

// problem is an RFC 9457 problem detail, with a stable machine-readable code.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Param names the offending parameter of a validation error.
	Param string `json:"param,omitempty"`
	// Job is the existing job's id, where the problem is about one.
	Job string `json:"job,omitempty"`
}

// writeProblem answers with application/problem+json. The type URI is a stable
// relative reference per code, documented in the README.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	writeProblemValue(w, problem{Status: status, Code: code, Detail: detail})
}

func writeProblemValue(w http.ResponseWriter, p problem) {
	if p.Type == "" {
		p.Type = "/problems/" + p.Code
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// storeFault is how the API and the pages answer a failure of the database file or its
// disk: a client error it is not, and a bare 500 would hide what the operator must do.
type storeFault struct {
	status     int
	code       string
	retryAfter string // seconds; "" for none
	detail     string // for API clients
	title      string // for the error page
	message    string // for the error page: what happened and what to do
}

// faultOf returns the answer for err if it is a failure of the database file or its disk
// (store.ErrDiskFull, ErrReadOnly, ErrCorrupt, ErrIO).
func faultOf(err error) (storeFault, bool) {
	switch {
	case errors.Is(err, store.ErrDiskFull):
		// 507 Insufficient Storage (RFC 4918) says exactly this; Retry-After because it
		// passes once space is freed, and GET /readyz tells when.
		return storeFault{status: http.StatusInsufficientStorage, code: "disk_full", retryAfter: "60",
			detail:  "the disk that holds the database is full, so nothing was saved; free space on the server, then retry (GET /readyz answers 200 again once writing works)",
			title:   "The disk is full",
			message: "The server's disk is full, so nothing was saved. Free some space on the server (old exports, other files), then try again."}, true
	case errors.Is(err, store.ErrReadOnly):
		return storeFault{status: http.StatusServiceUnavailable, code: "store_read_only",
			detail:  "the database cannot be written (its file or folder is read-only); nothing was saved",
			title:   "The database is read-only",
			message: "sheetq cannot write its database (the file or its folder is read-only), so nothing was saved. The server log says which file."}, true
	case errors.Is(err, store.ErrCorrupt):
		return storeFault{status: http.StatusServiceUnavailable, code: "store_corrupt",
			detail:  "the database file is damaged; the server log says what to do",
			title:   "The database is damaged",
			message: "sheetq found its database file damaged. Stop it and run sheetq doctor; restore a copy made with sheetq backup."}, true
	case errors.Is(err, store.ErrIO):
		return storeFault{status: http.StatusServiceUnavailable, code: "store_io", retryAfter: "5",
			detail:  "the operating system failed a read or write of the database; nothing was saved; retry shortly",
			title:   "The database could not be read or written",
			message: "The operating system failed a read or write of the database, so nothing was saved. Try again in a moment; if this repeats, the server log says why."}, true
	}
	return storeFault{}, false
}

// storeFault returns the answer for err if it is a failure of the database file or its
// disk, after noting it for readiness and logging it: expected on a full disk, so a WARN
// per request, not an ERROR with a 500. The API and the pages both answer through it.
func (s *server) storeFault(r *http.Request, err error) (storeFault, bool) {
	f, ok := faultOf(err)
	if ok {
		s.store.NoteError(err)
		s.log.WarnContext(r.Context(), "database fault", "code", f.code, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return f, ok
}

// writeFault answers an API request with f as problem+json.
func writeFault(w http.ResponseWriter, f storeFault) {
	if f.retryAfter != "" {
		w.Header().Set("Retry-After", f.retryAfter)
	}
	writeProblem(w, f.status, f.code, f.detail)
}
