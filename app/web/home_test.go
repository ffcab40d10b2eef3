package web

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

func args(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The list's row tells exports apart and never shows a waiting export's leftovers.
func TestJobRowWords(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 3, 30, 0, time.UTC)
	p := &Pages{} // no catalog: every report is gone, and shows by its id
	base := store.Job{ID: "j1", Kind: "export", MaxAttempts: 3, CreatedAt: now.Add(-time.Minute), ProgressTotal: -1,
		Args: args(t, map[string]any{"report": "orders", "format": "csv",
			"params": map[string]any{"to": "2025-03-31", "from": "2025-03-01", "note": strings.Repeat("x", 80)}})}

	t.Run("finished", func(t *testing.T) {
		j := base
		j.Status, j.Attempt, j.CreatedBy = store.StatusSucceeded, 1, "alice"
		j.StartedAt, j.FinishedAt = now.Add(-50*time.Second), now.Add(-8*time.Second)
		j.ProgressRows, j.ProgressTotal, j.FileName, j.FileSize = 1200, 1200, "f", 2400
		berlin, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		r := p.jobRow(j, now, ui.TimesIn(berlin, now))
		if r.Title != "orders" || r.Format != "CSV" || r.CreatedBy != "alice" || r.Ran.Text != "42 s" || r.Ran.Live {
			t.Errorf("row %+v", r)
		}
		// In the viewer's zone, which the table's heading names (not each row).
		if r.Created != "2026-12-02 15:02" || r.CreatedISO != "2026-12-02T14:02:30Z" {
			t.Errorf("created %q / %q, want the viewer's zone without its name", r.Created, r.CreatedISO)
		}
		if !strings.HasPrefix(r.ParamFull, "from 2025-03-01, note xxx") || !strings.HasSuffix(r.ParamFull, ", to 2025-03-31") {
			t.Errorf("params in full %q", r.ParamFull)
		}
		if n := len([]rune(r.ParamSummary)); n != paramSummaryLen || !strings.HasSuffix(r.ParamSummary, "…") {
			t.Errorf("summary %q (%d runes), want cut at %d with an ellipsis", r.ParamSummary, n, paramSummaryLen)
		}
		if r.ZeroRows() {
			t.Error("1,200 rows taken for none")
		}
	})
	t.Run("zero rows", func(t *testing.T) {
		j := base
		j.Status, j.Attempt, j.ProgressRows, j.ProgressTotal = store.StatusSucceeded, 1, 0, 0
		if r := p.jobRow(j, now, ui.TimesIn(time.UTC, now)); !r.ZeroRows() {
			t.Errorf("0 rows not said: %+v", r)
		}
	})
	t.Run("running", func(t *testing.T) {
		j := base
		j.Status, j.Attempt, j.StartedAt, j.ProgressRows, j.ProgressTotal = store.StatusProcessing, 1, now.Add(-4*time.Second), 300, 1000
		r := p.jobRow(j, now, ui.TimesIn(time.UTC, now))
		if !r.Ran.Live || r.Ran.MS != 4000 || r.Ran.Text != "4 s so far" {
			t.Errorf("ran %+v, want live from 4 s", r.Ran)
		}
	})
	t.Run("recovered", func(t *testing.T) {
		// PENDING after a crash: attempt 1 was killed at 62,503 rows; run_at is past.
		j := base
		j.Status, j.Attempt, j.RunAt = store.StatusPending, 1, now.Add(-time.Minute)
		j.StartedAt, j.ProgressRows, j.ProgressTotal = now.Add(-2*time.Minute), 62503, 100000
		r := p.jobRow(j, now, ui.TimesIn(time.UTC, now))
		if r.Rows != 0 || r.TotalRows != -1 || r.Ran.Text != "" {
			t.Errorf("a waiting export shows leftovers: rows %d/%d, ran %q", r.Rows, r.TotalRows, r.Ran.Text)
		}
		if r.ProgressText != "waiting for a worker" || r.AttemptInfo != "attempt 2 of 3, waiting for a worker" {
			t.Errorf("recovered: %q / %q", r.ProgressText, r.AttemptInfo)
		}
	})
}

// Run again with changes opens the form with the form's query contract.
func TestRunAgainURL(t *testing.T) {
	u := runAgainURL("orders", map[string]any{"from": "2025-03-01", "limit": float64(10), "all": true}, "csv", true, "keep")
	parsed, err := url.Parse(u)
	if err != nil || parsed.Path != "/exports/new" {
		t.Fatalf("%q: %v", u, err)
	}
	q := parsed.Query()
	for k, want := range map[string]string{"report": "orders", "from": "2025-03-01", "limit": "10", "all": "true", "format": "csv", "bom": "1", "csv_formulas": "keep"} {
		if got := q.Get(k); got != want {
			t.Errorf("%s=%q, want %q (in %s)", k, got, want, u)
		}
	}
	// Neutralised formulas, the default, are not named.
	if u := runAgainURL("orders", nil, "csv", false, ""); strings.Contains(u, "csv_formulas") {
		t.Errorf("neutralised: %q names csv_formulas", u)
	}
}

// A value given twice in the prefill link counts as in the posted form: a field's first
// (url.Values.Get, FormValue), a box's last (its hidden "false" comes first).
func TestPrefillRepeatedValues(t *testing.T) {
	rep := export.Report{ID: "orders", Params: []export.Param{
		{Name: "limit", Type: export.TypeInt},
		{Name: "all", Type: export.TypeBool},
	}}
	q, err := url.ParseQuery("report=orders&limit=5&limit=7&all=false&all=true&format=csv&format=xlsx&bom=0&bom=1&csv_formulas=no&csv_formulas=keep")
	if err != nil {
		t.Fatal(err)
	}
	form := prefill(rep, q, time.UTC)
	for k, want := range map[string]string{"limit": "5", "all": "true", formatField: "csv", bomField: "true", formulasField: "keep"} {
		if got := form[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// The box's words are read as the posted form reads them (bomChecked): "no" is off.
	if form := prefill(rep, url.Values{"bom": {"no"}}, time.UTC); form[bomField] != nil {
		t.Errorf("bom=no prefilled the box: %q", form[bomField])
	}
	// So are csv_formulas': its own word keep, or a box's yes, keeps; neutralise, or
	// any other word, does not.
	for v, want := range map[string]bool{"keep": true, "KEEP": true, "1": true, "neutralise": false, "no": false, "sure": false} {
		if form := prefill(rep, url.Values{"csv_formulas": {v}}, time.UTC); (form[formulasField] != nil) != want {
			t.Errorf("csv_formulas=%s prefilled the box with %q, want it checked: %v", v, form[formulasField], want)
		}
	}
}
