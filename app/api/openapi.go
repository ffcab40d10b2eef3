package api

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of the HTTP API, written by hand; the tests
// in app/openapi_test.go check it against the real answers of every route.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves the OpenAPI document.
func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDoc)
}
