package app

import (
	"net/http"
	"strings"
	"testing"
)

// A zone that only some hosts' zone files know ("right/UTC", a leap-second variant) is
// refused with 422 when a schedule is created or changed, whatever this host has, so that
// no node accepts a schedule that another cannot load and would pause (issue 36, 7e).
func TestScheduleRefusesHostOnlyZone(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true})
	ts.sched.Stop()
	for _, zone := range []string{"right/UTC", "posix/Europe/Berlin"} {
		res := ts.request("POST", "/api/v1/schedules",
			strings.NewReader(`{"report":"demo","cron":"@daily","timezone":"`+zone+`"}`), http.Header{"Content-Type": {"application/json"}})
		p := checkProblem(t, res, http.StatusUnprocessableEntity, "invalid_schedule")
		if p["field"] != "timezone" || !strings.Contains(p["detail"].(string), `unknown time zone "`+zone+`"`) {
			t.Errorf("create in %s: %s", zone, res.body)
		}
	}
	sc := ts.schedule("POST", "/api/v1/schedules", `{"report":"demo","cron":"@daily","timezone":"Etc/UTC"}`, http.StatusCreated)
	res := ts.request("PATCH", "/api/v1/schedules/"+sc.ID, strings.NewReader(`{"timezone":"right/UTC"}`),
		http.Header{"Content-Type": {"application/json"}})
	if p := checkProblem(t, res, http.StatusUnprocessableEntity, "invalid_schedule"); p["field"] != "timezone" {
		t.Errorf("change to right/UTC: %s", res.body)
	}
	ts.schedule("PATCH", "/api/v1/schedules/"+sc.ID, `{"timezone":"UTC"}`, http.StatusOK)
}
