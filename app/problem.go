package app

import (
	"encoding/json"
	"net/http"
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
