package schedules_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"sheetq/app/access"
	"sheetq/app/schedules"
	"sheetq/store"
	"sheetq/store/storetest"
)

// salesReport is open to the sales group and takes the runner's region.
const salesReport = `-- title: Sales by region
-- source: demo
-- access: sales
-- param: region text "Region" from=person.region
-- param: rows int = 2
SELECT :region, :rows;
`

// people are the identities the access tests act as; owners resolves a schedule's owner
// from it, as the app resolves tokens and people (an unknown name is store.ErrNotFound).
type people map[string]access.Who

func (p people) owners(_ context.Context, name string) (access.Who, error) {
	if w, ok := p[name]; ok {
		return w, nil
	}
	return access.Who{}, fmt.Errorf("%w: %q", store.ErrNotFound, name)
}

func as(w access.Who) context.Context { return access.With(context.Background(), w) }

// TestMembersSchedules: a member sees and changes only their own schedules of reports
// they may run; their email targets stay in the allowed domains; folder and webhook
// targets are an admin's to add; and a firing runs as the owner then: their attribute
// bound, refused once they lose the report or are no longer known (issue 39).
func TestMembersSchedules(t *testing.T) {
	t.Parallel()
	clock := storetest.ClockAt(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, testOpts{Now: clock.Now})
	h.writeReport("sales.sql", salesReport)
	ann := access.Who{Name: "ann@example.com", Kind: access.Person, Role: access.Member, Groups: []string{"sales"}, Attrs: map[string]string{"region": "North"}}
	bob := access.Who{Name: "bob@example.com", Kind: access.Person, Role: access.Member, Groups: []string{"hr"}, Attrs: map[string]string{"region": "South"}}
	admin := access.Who{Name: "ops", Kind: access.Token, Role: access.Admin}
	dir := people{ann.Name: ann, bob.Name: bob, admin.Name: admin}
	h.sched.Owners, h.sched.EmailDomains = dir.owners, []string{"example.com"}

	in := schedules.Input{Report: "sales", Cron: "0 6 * * *", TimeZone: "UTC",
		Deliver: json.RawMessage(`[{"type":"email","to":["team@example.com"]}]`)}
	sc, err := h.sched.Create(as(ann), in, ann.Name)
	if err != nil {
		t.Fatalf("ann's schedule: %v", err)
	}

	// Another member: the schedule does not exist for them, nor does the report.
	if _, err := h.sched.Get(as(bob), sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob reads ann's schedule: %v, want not found", err)
	}
	if list, err := h.sched.List(as(bob)); err != nil || len(list) != 0 {
		t.Fatalf("bob's list: %d schedules, %v; want none", len(list), err)
	}
	if _, err := h.sched.Edit(as(bob), sc.ID, func(in *schedules.Input) { in.Cron = "0 7 * * *" }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob edits ann's schedule: %v, want not found", err)
	}
	if _, err := h.sched.SetPaused(as(bob), sc.ID, true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob pauses ann's schedule: %v, want not found", err)
	}
	if err := h.sched.Delete(as(bob), sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob deletes ann's schedule: %v, want not found", err)
	}
	if _, err := h.sched.Create(as(bob), in, bob.Name); !notFound(err) {
		t.Fatalf("bob schedules the sales report: %v, want it unknown", err)
	}
	if list, err := h.sched.List(as(admin)); err != nil || len(list) != 1 {
		t.Fatalf("the admin's list: %d schedules, %v; want ann's", len(list), err)
	}

	// A row-level parameter is never the request's.
	sent := in
	sent.Params = map[string]any{"region": "South"}
	if _, err := h.sched.Create(as(ann), sent, ann.Name); err == nil || forbidden(err) {
		t.Fatalf("ann's schedule giving the region: %v, want a wrong field", err)
	}

	// Delivery limits.
	for _, target := range []string{`{"type":"email","to":["x@elsewhere.org"]}`, `{"type":"folder","path":"/srv/drop"}`,
		`{"type":"webhook","url":"https://hooks.example.com/x"}`} {
		if _, err := h.sched.Edit(as(ann), sc.ID, func(in *schedules.Input) { in.Deliver = json.RawMessage("[" + target + "]") }); !forbidden(err) {
			t.Fatalf("ann delivers to %s: %v, want forbidden", target, err)
		}
	}
	withFolder := json.RawMessage(`[{"type":"email","to":["team@example.com"]},{"type":"folder","path":"/srv/drop"}]`)
	if _, err := h.sched.Edit(as(admin), sc.ID, func(in *schedules.Input) { in.Deliver = withFolder }); err != nil {
		t.Fatalf("the admin adds a folder to ann's schedule: %v", err)
	}
	if _, err := h.sched.Edit(as(ann), sc.ID, func(in *schedules.Input) { in.Cron = "0 5 * * *" }); err != nil {
		t.Fatalf("ann changes the time of her schedule with the admin's folder: %v", err)
	}

	// Each firing runs as the owner now.
	clock.Advance(24 * time.Hour)
	h.fireDue(1, "as ann")
	fired := h.firings(sc.ID)
	if len(fired) != 1 || fired[0].Params["region"] != "North" {
		t.Fatalf("firing: %+v, want ann's region North bound", fired)
	}
	ann.Attrs["region"] = "East"
	dir[ann.Name] = ann
	clock.Advance(24 * time.Hour)
	h.fireDue(1, "with ann's new region")
	if fired = h.firings(sc.ID); len(fired) != 2 || fired[0].Params["region"] != "East" {
		t.Fatalf("firings: %+v, want the new region East on the latest", fired)
	}

	ann.Groups = []string{"hr"}
	dir[ann.Name] = ann
	clock.Advance(24 * time.Hour)
	h.fireDue(1, "after ann left sales")
	fired = h.firings(sc.ID)
	if j := h.waitStatus(fired[0].ID, store.StatusFailed); j.Error == nil || j.Error.Code != "forbidden" || j.Progress.Rows != 0 {
		t.Fatalf("the firing after ann left sales: %+v (error %+v), want failed forbidden with no rows", j, j.Error)
	}

	delete(dir, ann.Name)
	clock.Advance(24 * time.Hour)
	h.fireDue(1, "after ann is gone")
	fired = h.firings(sc.ID)
	if j := h.waitStatus(fired[0].ID, store.StatusFailed); j.Error == nil || j.Error.Code != "forbidden" {
		t.Fatalf("the firing of a gone owner: %+v (error %+v), want failed forbidden", j, j.Error)
	}
}

func notFound(err error) bool {
	for _, ie := range schedules.Fields(err) {
		if ie.NotFound {
			return true
		}
	}
	return false
}

func forbidden(err error) bool {
	for _, ie := range schedules.Fields(err) {
		if ie.Forbidden {
			return true
		}
	}
	return false
}
