package api_test

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sheetq/internal/apiv1"
	"sheetq/internal/apptest"
	"sheetq/jobs/export"
	"sheetq/store"
)

// formulaSource is a real SQLite source, "cells", whose text column holds what a
// spreadsheet would run, beside a column of negative numbers; the report "cells"
// exports it.
func formulaSource(t *testing.T) map[string]export.Source {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cells.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE cells (id INTEGER PRIMARY KEY, note TEXT, amount REAL);
		INSERT INTO cells (note, amount) VALUES ('=1+2', -5), ('+cmd|'' /C calc''!A0', -1.5e3), ('-12', -0.25), ('@SUM(A1)', 0), ('a=b', 1);`); err != nil {
		t.Fatal(err)
	}
	src, err := export.OpenSource("cells", export.SourceConfig{Driver: "sqlite", Path: path}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.(io.Closer).Close() })
	return map[string]export.Source{"cells": src}
}

const cellsReport = `-- title: Cells
-- source: cells
SELECT note, amount FROM cells ORDER BY id;
`

// A csv export through the API neutralises formulas unless asked to keep them: the
// request's csv_formulas ("neutralise", "keep" or absent) decides what the downloaded
// file holds, the job says "keep" when it was asked for (and nothing otherwise), the
// numbers are written as numbers either way, and the audit log's entry of a request
// that kept them says so.
func TestCSVFormulasThroughTheAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Sources: formulaSource(t), Audit: true})
	apptest.WriteReport(t, ts.dir, "cells.sql", cellsReport)
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(string(ts.Get("/api/v1/reports").Body), `"cells"`), "cells not loaded yet"
	})
	neutralised := [][]string{
		{"note", "amount"},
		{"'=1+2", "-5"},
		{"'+cmd|' /C calc'!A0", "-1500"},
		{"'-12", "-0.25"},
		{"'@SUM(A1)", "0"},
		{"a=b", "1"},
	}
	kept := [][]string{
		{"note", "amount"},
		{"=1+2", "-5"},
		{"+cmd|' /C calc'!A0", "-1500"},
		{"-12", "-0.25"},
		{"@SUM(A1)", "0"},
		{"a=b", "1"},
	}
	for _, tc := range []struct {
		body     string
		formulas string // the job's csv_formulas
		want     [][]string
	}{
		{`{"report":"cells","format":"csv"}`, "", neutralised},
		{`{"report":"cells","format":"csv","csv_formulas":"neutralise"}`, "", neutralised},
		{`{"report":"cells","format":"csv","csv_formulas":"keep","bom":true}`, "keep", kept},
	} {
		j := ts.Create(tc.body)
		if j.Format != "csv" || j.CSVFormulas != tc.formulas {
			t.Fatalf("%s: accepted job has format %q, csv_formulas %q; want csv, %q", tc.body, j.Format, j.CSVFormulas, tc.formulas)
		}
		done, res := ts.WaitStatus(j.ID, store.StatusSucceeded)
		if done.CSVFormulas != tc.formulas || bytes.Contains(res.Body, []byte("csv_formulas")) != (tc.formulas != "") {
			t.Errorf("%s: GET shows csv_formulas %q in %s; want %q", tc.body, done.CSVFormulas, res.Body, tc.formulas)
		}
		file := ts.Get("/api/v1/exports/" + j.ID + "/file")
		if file.StatusCode != http.StatusOK {
			t.Fatalf("%s: download %d %s", tc.body, file.StatusCode, file.Body)
		}
		got, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(file.Body, []byte("\uFEFF")))).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v: %q", tc.body, err, file.Body)
		}
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: file holds %q, want %q", tc.body, got, tc.want)
		}
	}

	res := ts.Get("/api/v1/audit?action=export_requested")
	var page apiv1.AuditPage
	if err := json.Unmarshal(res.Body, &page); err != nil || len(page.Entries) != 3 {
		t.Fatalf("audit: %d %s (%v); want 3 export_requested entries", res.StatusCode, res.Body, err)
	}
	var details []string
	for _, e := range page.Entries {
		details = append(details, e.Detail)
	}
	if want := []string{"format csv, formulas kept", "format csv", "format csv"}; !slices.Equal(details, want) {
		t.Errorf("audit details (newest first) %q, want %q", details, want)
	}
}

// csv_formulas takes "neutralise" or "keep", and "keep" only with csv: any other value,
// or "keep" with xlsx (named or not), is a 422 invalid_format that says what to send; a
// value of the wrong JSON type is a malformed body. None makes a job. "neutralise" with
// xlsx is accepted: it is what an xlsx file does anyway.
func TestCSVFormulasRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	for _, tc := range []struct {
		body, code, detail string
		status             int
	}{
		{`{"report":"demo","format":"csv","csv_formulas":"Keep"}`, "invalid_format", `csv_formulas "Keep": want "neutralise" (the default) or "keep"`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"csv","csv_formulas":"neutralize"}`, "invalid_format", `want "neutralise" (the default) or "keep"`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"csv","csv_formulas":"yes"}`, "invalid_format", `want "neutralise" (the default) or "keep"`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"xlsx","csv_formulas":"keep"}`, "invalid_format", `"csv_formulas": "keep" applies to csv files only; ask for "format": "csv" with it`, http.StatusUnprocessableEntity},
		{`{"report":"demo","csv_formulas":"keep"}`, "invalid_format", `"csv_formulas": "keep" applies to csv files only`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"pdf","csv_formulas":"keep"}`, "invalid_format", `format "pdf": want "xlsx" or "csv"`, http.StatusUnprocessableEntity},
		{`{"report":"demo","format":"csv","csv_formulas":true}`, "malformed_json", "", http.StatusBadRequest},
		{`{"report":"demo","format":"csv","csv_formulas":null,"csv_formulas":"keep"}`, "malformed_json", "more than once", http.StatusBadRequest},
	} {
		p := apptest.CheckProblem(t, ts.Post(tc.body, ""), tc.status, tc.code)
		if d, _ := p["detail"].(string); !strings.Contains(d, tc.detail) {
			t.Errorf("%s: detail %q, want it to say %q", tc.body, d, tc.detail)
		}
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("refused requests made %d jobs", n)
	}
	for _, body := range []string{`{"report":"demo","format":"xlsx","csv_formulas":"neutralise"}`, `{"report":"demo","csv_formulas":"neutralise"}`} {
		if j := ts.Create(body); j.Format != "xlsx" || j.CSVFormulas != "" {
			t.Errorf("%s: job has format %q, csv_formulas %q", body, j.Format, j.CSVFormulas)
		}
	}
}

// csv_formulas is part of a request's idempotency hash: the same key asking to keep
// formulas after a request that neutralised them is a 422 naming the first job; naming
// the default, "neutralise", is the same request as naming none.
func TestCSVIdempotencyCoversFormulas(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	first := apptest.DecodeJob(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv"}`, "key-f"))
	same := ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv","csv_formulas":"neutralise"}`, "key-f")
	if same.StatusCode != http.StatusAccepted || apptest.DecodeJob(t, same).ID != first.ID || same.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("neutralise named: status %d, body %s; want a replay of %s", same.StatusCode, same.Body, first.ID)
	}
	p := apptest.CheckProblem(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv","csv_formulas":"keep"}`, "key-f"),
		http.StatusUnprocessableEntity, "idempotency_key_reused")
	if p["job"] != first.ID {
		t.Errorf("reused key names job %v, want %s", p["job"], first.ID)
	}

	kept := apptest.DecodeJob(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv","csv_formulas":"keep"}`, "key-k"))
	apptest.CheckProblem(t, ts.Post(`{"report":"demo","params":{"rows":3},"format":"csv"}`, "key-k"), http.StatusUnprocessableEntity, "idempotency_key_reused")
	again := ts.Post(`{"csv_formulas":"keep","format":"csv","report":"demo","params":{"rows":"3"}}`, "key-k")
	if again.StatusCode != http.StatusAccepted || apptest.DecodeJob(t, again).ID != kept.ID {
		t.Fatalf("the same request: status %d, body %s; want a replay of %s", again.StatusCode, again.Body, kept.ID)
	}
	if n := ts.jobCount(); n != 2 {
		t.Fatalf("%d jobs, want 2", n)
	}
}
