// Package problem owns the HTTP layer's error answers: RFC 9457 problem details
// (application/problem+json) with a stable code per problem, and the answer to a failure
// of the database file or its disk. The JSON API, the pages, the event streams and the
// middleware all answer through it, so that one failure reads the same everywhere
// (ARCHITECTURE.md, "Parts").
package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"sheetq/internal/apiv1"
)

// Problem is an RFC 9457 problem detail, with a stable machine-readable code. It is
// also an error, so that a handler returns it and one adapter (Reporter.Handler) writes
// it: a handler never both writes a problem and returns one.
type Problem struct {
	// Problem is the JSON body (internal/apiv1, the shape the client reads too). An empty
	// Type means "/problems/<code>"; an empty Title, the status text.
	apiv1.Problem

	// Header holds headers sent with the answer (Retry-After, Allow, Connection).
	Header http.Header `json:"-"`
}

// New returns a problem with status, code and detail.
func New(status int, code, detail string) *Problem {
	return &Problem{Problem: apiv1.Problem{Status: status, Code: code, Detail: detail}}
}

// NotFound is the answer for an id that names no export.
func NotFound(id string) *Problem {
	return New(http.StatusNotFound, "not_found", "no export with id "+strconv.Quote(id))
}

// Error says the problem for logs and tests.
func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// With returns p with header name set to value.
func (p *Problem) With(name, value string) *Problem {
	if p.Header == nil {
		p.Header = http.Header{}
	}
	p.Header.Set(name, value)
	return p
}

// Write answers with p as application/problem+json.
func (p *Problem) Write(w http.ResponseWriter) {
	v := *p
	if v.Type == "" {
		v.Type = "/problems/" + v.Code
	}
	if v.Title == "" {
		v.Title = http.StatusText(v.Status)
	}
	h := w.Header()
	for k, vs := range v.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(v.Status)
	_ = json.NewEncoder(w).Encode(v)
}

// Write answers with a problem of status, code and detail: for middleware, which has no
// handler to return it from.
func Write(w http.ResponseWriter, status int, code, detail string) {
	New(status, code, detail).Write(w)
}

// As returns the problem in err's chain, if any.
func As(err error) (*Problem, bool) {
	var p *Problem
	ok := errors.As(err, &p)
	return p, ok
}

// WriteJSON answers with v as indented JSON, never cached: the API's success answers,
// beside its problems.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
