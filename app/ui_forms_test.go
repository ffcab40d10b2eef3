package app

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sheetq/internal/apptest"
	"strings"
	"testing"
)

// A bool parameter's field sent as a script writes it (0, off, no) is false, not checked
// because it is not "false"; a word the report does not read is marked beside the field,
// and an empty one comes back unchecked, as it was taken.
func TestUIFormsBoolFieldReadsItsWords(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	apptest.WriteReport(t, ts.dir, "flag.sql", "-- title: Flag\n-- source: demo\n-- param: on bool \"On\" = true\n-- param: n int \"N\" = 1\n"+
		"SELECT :on, :n;\n")
	ts.WaitReport("flag")
	submit := func(on, n string) apptest.Response {
		key := apptest.FormOf(t, apptest.Page(t, ts.Get("/exports/new?report=flag"), http.StatusOK)).Get("idempotency_key")
		return ts.PostForm("/exports", url.Values{"report": {"flag"}, "idempotency_key": {key}, "on": {on}, "n": {n}}, nil)
	}
	for v, want := range map[string]bool{"0": false, "off": false, "no": false, "false": false, "yes": true, "true": true} {
		res := submit(v, "1")
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("on=%s: %d %s", v, res.StatusCode, res.Body)
		}
		if j, _ := ts.Job(strings.TrimPrefix(res.Header.Get("Location"), "/exports/")); j.Params["on"] != want {
			t.Errorf("on=%s: job has %v", v, j.Params["on"])
		}
	}
	doc := apptest.Page(t, submit("maybe", "1"), http.StatusUnprocessableEntity)
	if e := apptest.TID(doc, "error-on").Text(); !strings.Contains(e, "true or false") {
		t.Errorf("on=maybe: error %q", e)
	}
	doc = apptest.Page(t, submit("", "x"), http.StatusUnprocessableEntity)
	if _, on := apptest.TID(doc, "param-on").Attr("checked"); on {
		t.Error("on= (taken as false) came back checked")
	}

	sched := url.Values{"report": {"flag"}, "param.on": {"off"}, "param.n": {"1"}, "cron": {"0 6 * * *"}, "timezone": {"UTC"}}
	res := ts.PostForm("/schedules", sched, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("schedule: %d %s", res.StatusCode, res.Body)
	}
	var sc struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(ts.Get("/api/v1"+res.Header.Get("Location")).Body, &sc); err != nil || sc.Params["on"] != false {
		t.Errorf("schedule params %v (%v)", sc.Params, err)
	}
}
