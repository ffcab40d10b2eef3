package app

import (
	"net/http"
	"sheetq/internal/apptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rangeReport declares a period whose end must follow its start (after=from).
const rangeReport = `-- title: Period
-- source: demo
-- param: from date "From" = 2025-01-01
-- param: to date "To" after=from = 2025-02-01
SELECT :from, :to;
`

// An end on or before the start is refused before anything is accepted: the API answers
// 422 naming "to", the form marks the To field and keeps the values, and no job is
// created either way. A later end is accepted.
func TestParamAfterRefusesAnEndBeforeTheStart(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "period.sql", rangeReport)
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		res := ts.Get("/exports/new?report=period")
		return res.StatusCode == http.StatusOK, "period report not loaded: " + strconv.Itoa(res.StatusCode)
	})

	for _, to := range []string{"2025-03-01", "2025-02-28"} {
		p := apptest.CheckProblem(t, ts.Post(`{"report":"period","params":{"from":"2025-03-01","to":"`+to+`"}}`, ""),
			http.StatusUnprocessableEntity, "invalid_param")
		if p["param"] != "to" || !strings.Contains(p["detail"].(string), "must be after From (2025-03-01)") {
			t.Errorf("to %s: problem %v", to, p)
		}
	}
	// The default "from" counts too: to alone, before it.
	p := apptest.CheckProblem(t, ts.Post(`{"report":"period","params":{"to":"2024-12-31"}}`, ""), http.StatusUnprocessableEntity, "invalid_param")
	if p["param"] != "to" {
		t.Errorf("to before the default from: problem %v", p)
	}

	doc := apptest.Page(t, ts.Get("/exports/new?report=period"), http.StatusOK)
	form := apptest.FormOf(t, doc)
	form.Set("from", "2025-03-31")
	form.Set("to", "2025-03-01")
	doc = apptest.Page(t, ts.PostForm("/exports", form, nil), http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "error-to").Text(); !strings.Contains(got, "after From (2025-03-31)") {
		t.Errorf("error-to %q", got)
	}
	if got := apptest.TID(doc, "error-from").Text(); got != "" {
		t.Errorf("from is fine, but error-from says %q", got)
	}
	if v := apptest.TID(doc, "param-to").AttrOr("value", ""); v != "2025-03-01" {
		t.Errorf("the form lost the value sent: to %q", v)
	}
	if n := ts.jobCount(); n != 0 {
		t.Fatalf("%d jobs after refused requests, want 0", n)
	}

	j := ts.Create(`{"report":"period","params":{"from":"2025-03-01","to":"2025-03-02"}}`)
	if j.Params["to"] != "2025-03-02" {
		t.Errorf("accepted params %v", j.Params)
	}
}
