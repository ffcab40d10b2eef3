package app

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"sheetq/app/exports"
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

// GET /api/v1/reports shows a report's column lines (name, label, type, format), its
// filename pattern and its description, in the shape the OpenAPI document declares;
// a report without column lines has an empty list.
func TestAPIReportsShowColumns(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	writeReport(t, ts, "labelled.sql", columnsReport)
	var list struct {
		Reports []exports.Report `json:"reports"`
	}
	var got exports.Report
	waitFor(t, 10*time.Second, func() (bool, string) {
		res := ts.get("/api/v1/reports")
		if err := json.Unmarshal(res.body, &list); err != nil {
			t.Fatalf("status %d: %v: %s", res.StatusCode, err, res.body)
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
	if err := json.Compact(&compact, ts.get("/api/v1/reports").body); err != nil {
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
	c := newContract(t, ts)
	c.do(exchange{op: "GET /api/v1/reports", status: 200, checkRequest: true})
}

// The Reports page lists a report's columns and its download name pattern.
func TestUIReportsPageShowsColumns(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	writeReport(t, ts, "labelled.sql", columnsReport)
	var doc *goquery.Document
	waitFor(t, 10*time.Second, func() (bool, string) {
		doc = page(t, ts.get("/reports"), http.StatusOK)
		return doc.Find(`[data-testid="report"][data-id="labelled"]`).Length() == 1, "labelled not shown yet"
	})
	r := doc.Find(`[data-testid="report"][data-id="labelled"]`)
	var rows []string
	tid(r, "report-columns").Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
		var cells []string
		tr.Find("td").Each(func(_ int, td *goquery.Selection) { cells = append(cells, strings.TrimSpace(td.Text())) })
		rows = append(rows, strings.Join(cells, "|"))
	})
	want := []string{"unit_price|Unit price|number|#,##0.00;[Red]-#,##0.00", "created_at|Created|datetime|", "id|||"}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("columns table %q, want %q", rows, want)
	}
	if got := strings.TrimSpace(tid(r, "report-filename").Text()); got != "orders-{from}" {
		t.Errorf("report-filename %q", got)
	}
	if got := r.Text(); !strings.Contains(got, "with money as money.") {
		t.Errorf("the description is not shown: %q", got)
	}
	// A report without column lines shows no columns table.
	if n := tid(doc.Find(`[data-testid="report"][data-id="demo"]`), "report-columns").Length(); n != 0 {
		t.Errorf("demo shows %d columns tables", n)
	}
}

// A report's "-- filename:" pattern names the download: the job's file.name and the
// file's Content-Disposition carry the parameters, made safe (the / in a text param
// becomes -), with the format's extension.
func TestDownloadNamedByPattern(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	writeReport(t, ts, "named.sql", `-- title: Named
-- source: demo
-- param: rows int = 3
-- param: from date
-- param: region text
-- filename: orders {region} {from}
SELECT :rows, :from, :region;
`)
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(string(ts.get("/api/v1/reports").body), `"named"`), "named not loaded yet"
	})
	j := ts.create(`{"report":"named","params":{"from":"2025-03-01","region":"north/east"}}`)
	j, _ = ts.waitStatus(j.ID, store.StatusSucceeded)
	const want = "orders north-east 2025-03-01.xlsx"
	if j.File == nil || j.File.Name != want {
		t.Fatalf("file %+v, want name %q", j.File, want)
	}
	res := ts.get("/api/v1/exports/" + j.ID + "/file")
	_, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
	if res.StatusCode != http.StatusOK || err != nil || params["filename"] != want {
		t.Fatalf("status %d, Content-Disposition %q (%v); want filename %q", res.StatusCode, res.Header.Get("Content-Disposition"), err, want)
	}
}
