package problem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"sheetq/store"
)

// Fault is the answer to a failure of the database file or its disk: a client error it
// is not, and a bare 500 would hide what the operator must do.
type Fault struct {
	Status     int
	Code       string
	RetryAfter string // seconds; "" for none
	Detail     string // for API clients
	Title      string // for the error page
	Message    string // for the error page: what happened and what to do
}

// Problem is f as an API answer.
func (f Fault) Problem() *Problem {
	p := New(f.Status, f.Code, f.Detail)
	if f.RetryAfter != "" {
		p.With("Retry-After", f.RetryAfter)
	}
	return p
}

// FaultOf returns the answer for err if it is a failure of the database or its disk, by
// the kinds every store driver maps its errors to (store.ErrDiskFull, ErrReadOnly,
// ErrCorrupt, ErrIO, ErrUnavailable): no driver is named here.
func FaultOf(err error) (Fault, bool) {
	switch {
	case errors.Is(err, store.ErrDiskFull):
		// 507 Insufficient Storage (RFC 4918) says exactly this; Retry-After because it
		// passes once space is freed, and GET /readyz tells when.
		return Fault{Status: http.StatusInsufficientStorage, Code: "disk_full", RetryAfter: "60",
			Detail:  "the disk that holds the database is full, so nothing was saved; free space on the server, then retry (GET /readyz answers 200 again once writing works)",
			Title:   "The disk is full",
			Message: "The server's disk is full, so nothing was saved. Free some space on the server (old exports, other files), then try again."}, true
	case errors.Is(err, store.ErrReadOnly):
		return Fault{Status: http.StatusServiceUnavailable, Code: "store_read_only",
			Detail:  "the database cannot be written (its file or folder is read-only); nothing was saved",
			Title:   "The database is read-only",
			Message: "sheetq cannot write its database (the file or its folder is read-only), so nothing was saved. The server log says which file."}, true
	case errors.Is(err, store.ErrCorrupt):
		return Fault{Status: http.StatusServiceUnavailable, Code: "store_corrupt",
			Detail:  "the database file is damaged; the server log says what to do",
			Title:   "The database is damaged",
			Message: "sheetq found its database file damaged. Stop it and run sheetq doctor; restore a copy made with sheetq backup."}, true
	case errors.Is(err, store.ErrIO):
		return Fault{Status: http.StatusServiceUnavailable, Code: "store_io", RetryAfter: "5",
			Detail:  "the operating system failed a read or write of the database; nothing was saved; retry shortly",
			Title:   "The database could not be read or written",
			Message: "The operating system failed a read or write of the database, so nothing was saved. Try again in a moment; if this repeats, the server log says why."}, true
	case errors.Is(err, store.ErrUnavailable):
		// Several nodes on a database server: it is down, restarting or out of
		// connections. The request is not at fault and may work in a moment.
		return Fault{Status: http.StatusServiceUnavailable, Code: "store_unavailable", RetryAfter: "5",
			Detail:  "the database server does not answer, so the request may not have completed; retry shortly, with the same Idempotency-Key if it had one (GET /readyz answers 200 again once the server is back)",
			Title:   "The database does not answer",
			Message: "sheetq cannot reach its database server, so this may not have been saved. Look again in a moment before trying again; if this repeats, the server log says why."}, true
	}
	return Fault{}, false
}

// Unstorable is the answer to a value the store refused and would refuse again
// (store.ErrUnstorable: on PostgreSQL, a NUL character, issue 36): the request's values
// are checked before they reach the store, so this answers what a check missed, as the
// client's mistake, never as a 500.
func Unstorable(err error) (*Problem, bool) {
	if !errors.Is(err, store.ErrUnstorable) {
		return nil, false
	}
	return New(http.StatusUnprocessableEntity, "unstorable_value",
		"the request holds a NUL character (U+0000) or another value the database cannot store; send it without"), true
}

// Noter is told of each database fault a request met, so that readiness reflects it
// (a store.WriteHealth driver).
type Noter interface{ NoteError(err error) }

// StatusClientClosed is the status logged for a request its client abandoned.
const StatusClientClosed = 499

// Reporter answers the errors handlers return, and logs those that are not the client's.
type Reporter struct {
	// Store is noted of database faults; nil notes nothing.
	Store Noter
	// Log receives a WARN per database fault and an ERROR per unexpected failure.
	Log *slog.Logger
	// Refused is told of every 403 answered, with what it said is missing: the audit
	// log's "forbidden" entries (issue 39). nil tells nobody.
	Refused func(r *http.Request, detail string)
}

// Fault returns the answer for err if it is a failure of the database file or its disk,
// after noting it for readiness and logging it: expected on a full disk, so a WARN per
// request, not an ERROR with a 500. The API and the pages both answer through it.
func (rp Reporter) Fault(r *http.Request, err error) (Fault, bool) {
	f, ok := FaultOf(err)
	if ok {
		if rp.Store != nil {
			rp.Store.NoteError(err)
		}
		rp.Log.WarnContext(r.Context(), "database fault", "code", f.Code, "method", r.Method, "path", r.URL.Path, "err", err)
	}
	return f, ok
}

// ClientGone reports whether err is the abandoned work of a client that hung up first
// (a timeout under overload; an enqueue still queued for the group commit is dropped
// before any write), and if so logs it: nobody reads the answer, and it is not a server
// error, so it is logged as 499, as nginx does.
func (rp Reporter) ClientGone(r *http.Request, err error) bool {
	if r.Context().Err() == nil || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return false
	}
	rp.Log.InfoContext(r.Context(), "client closed the request", "method", r.Method, "path", r.URL.Path)
	return true
}

// Busy reports whether err is the database held busy by another connection, and if so
// logs it: not a server bug, so it answers 503 with Retry-After and clients (and their
// Idempotency-Key retries) come back instead of giving up.
func (rp Reporter) Busy(r *http.Request, err error) bool {
	if !errors.Is(err, store.ErrBusy) {
		return false
	}
	rp.Log.WarnContext(r.Context(), "database busy", "method", r.Method, "path", r.URL.Path, "err", err)
	return true
}

// Error answers err as problem+json: a *Problem as itself; a value the store cannot
// keep with 422 unstorable_value; a client gone with 499; a database fault with its
// Fault; a busy database with 503 store_busy; anything else, logged, with a 500 that
// shows no internals.
func (rp Reporter) Error(w http.ResponseWriter, r *http.Request, err error) {
	if p, ok := As(err); ok {
		if p.Status == http.StatusForbidden && rp.Refused != nil {
			rp.Refused(r, p.Detail)
		}
		p.Write(w)
		return
	}
	if p, ok := Unstorable(err); ok {
		rp.Log.InfoContext(r.Context(), "request refused: a value the store cannot keep", "method", r.Method, "path", r.URL.Path, "err", err)
		p.Write(w)
		return
	}
	if rp.ClientGone(r, err) {
		w.WriteHeader(StatusClientClosed)
		return
	}
	if f, ok := rp.Fault(r, err); ok {
		f.Problem().Write(w)
		return
	}
	if rp.Busy(r, err) {
		New(http.StatusServiceUnavailable, "store_busy",
			"the database is busy (another connection holds its lock); retry shortly").With("Retry-After", "1").Write(w)
		return
	}
	rp.Log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	Write(w, http.StatusInternalServerError, "internal", "the server could not complete the request; see its log")
}

// HandlerFunc is an HTTP handler that returns its failure instead of writing it; it
// returns nil once it has answered.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler adapts h: the error it returns is answered by Error. This is the one error
// style of the API's handlers.
func (rp Reporter) Handler(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			rp.Error(w, r, err)
		}
	}
}
