package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"sheetq/app/exports"
	"sheetq/internal/apptest"
	"sheetq/jobs/export"
	"sheetq/store"
)

// columnsReport is a report with a description, column lines and a filename pattern.
const columnsReport = `-- title: Labelled
-- description: Orders of a period,
-- description: with money as money.
-- source: demo
-- param: from date "From" = 2025-01-01
-- column: unit_price "Unit price" number(#,##0.00;[Red]-#,##0.00)
-- column: created_at "Created" datetime
-- column: id
-- filename: orders-{from}
SELECT :from;
`

// checkContract validates one exchange (a GET of path) against the OpenAPI document
// the server serves, which must be the embedded one and valid OpenAPI 3.1: the request,
// and the response's status, Content-Type and body. The whole document against every
// route is checked in package app (TestOpenAPIMatchesTheServer).
func checkContract(t *testing.T, ts *testServer, path string) {
	t.Helper()
	served := ts.Get("/api/v1/openapi.json")
	embedded, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if served.StatusCode != http.StatusOK || !bytes.Equal(served.Body, embedded) {
		t.Fatalf("GET /api/v1/openapi.json: status %d, not the embedded document", served.StatusCode)
	}
	doc, err := libopenapi.NewDocument(served.Body)
	if err != nil {
		t.Fatalf("parse the OpenAPI document: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("build validator: %v", errs)
	}
	describe := func(errs []*verrors.ValidationError) string {
		var b strings.Builder
		for _, e := range errs {
			b.WriteString("  - " + e.Message + ": " + e.Reason)
			for _, se := range e.SchemaValidationErrors {
				b.WriteString("\n      " + se.FieldPath + " (" + se.KeywordLocation + "): " + se.Reason)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the OpenAPI document is invalid:\n%s", describe(verrs))
	}
	res := ts.Get(path)
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, errs := v.ValidateHttpRequestSync(req); !ok {
		t.Errorf("GET %s: the request does not match the document:\n%s", path, describe(errs))
	}
	hr := *res.Response
	hr.Body = io.NopCloser(bytes.NewReader(res.Body))
	if ok, errs := v.ValidateHttpResponse(req, &hr); !ok {
		t.Errorf("GET %s -> %d: the response does not match the document:\n%s\nbody: %s", path, res.StatusCode, describe(errs), res.Body)
	}
}

// GET /api/v1/reports shows a report's column lines (name, label, type, format), its
// filename pattern and its description, in the shape the OpenAPI document declares;
// a report without column lines has an empty list.
func TestAPIReportsShowColumns(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "labelled.sql", columnsReport)
	var list struct {
		Reports []exports.Report `json:"reports"`
	}
	var got exports.Report
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		res := ts.Get("/api/v1/reports")
		if err := json.Unmarshal(res.Body, &list); err != nil {
			t.Fatalf("status %d: %v: %s", res.StatusCode, err, res.Body)
		}
		for _, r := range list.Reports {
			if r.ID == "labelled" {
				got = r
				return true, ""
			}
		}
		return false, "labelled not listed yet"
	})
	want := []export.ColumnSpec{
		{Name: "unit_price", Label: "Unit price", Type: export.TypeNumber, Format: "#,##0.00;[Red]-#,##0.00"},
		{Name: "created_at", Label: "Created", Type: export.TypeDatetime},
		{Name: "id"},
	}
	if got.Error != nil || !reflect.DeepEqual(got.Columns, want) || got.Filename != "orders-{from}" ||
		got.Description != "Orders of a period,\nwith money as money." {
		t.Errorf("labelled: %+v", got)
	}
	// The JSON's field names, as docs/reports-and-sources.md and the document give them.
	var compact bytes.Buffer
	if err := json.Compact(&compact, ts.Get("/api/v1/reports").Body); err != nil {
		t.Fatal(err)
	}
	raw := compact.String()
	for _, s := range []string{
		`"columns":[{"name":"unit_price","label":"Unit price","type":"number","format":"#,##0.00;[Red]-#,##0.00"},` +
			`{"name":"created_at","label":"Created","type":"datetime"},{"name":"id"}]`,
		`"filename":"orders-{from}"`,
	} {
		if !strings.Contains(raw, s) {
			t.Errorf("the JSON lacks %s:\n%s", s, raw)
		}
	}
	for _, r := range list.Reports {
		if r.ID == "demo" && (r.Columns == nil || len(r.Columns) != 0) {
			t.Errorf("demo columns %#v, want an empty list", r.Columns)
		}
	}
	checkContract(t, ts, "/api/v1/reports")
}

// A report's "-- filename:" pattern names the download: the job's file.name and the
// file's Content-Disposition carry the parameters, made safe (the / in a text param
// becomes -), with the format's extension.
func TestDownloadNamedByPattern(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "named.sql", `-- title: Named
-- source: demo
-- param: rows int = 3
-- param: from date
-- param: region text
-- filename: orders {region} {from}
SELECT :rows, :from, :region;
`)
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(string(ts.Get("/api/v1/reports").Body), `"named"`), "named not loaded yet"
	})
	j := ts.Create(`{"report":"named","params":{"from":"2025-03-01","region":"north/east"}}`)
	j, _ = ts.WaitStatus(j.ID, store.StatusSucceeded)
	const want = "orders north-east 2025-03-01.xlsx"
	if j.File == nil || j.File.Name != want {
		t.Fatalf("file %+v, want name %q", j.File, want)
	}
	res := ts.Get("/api/v1/exports/" + j.ID + "/file")
	_, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
	if res.StatusCode != http.StatusOK || err != nil || params["filename"] != want {
		t.Fatalf("status %d, Content-Disposition %q (%v); want filename %q", res.StatusCode, res.Header.Get("Content-Disposition"), err, want)
	}
}
