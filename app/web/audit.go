package web

import (
	"net/http"
	"net/url"

	"sheetq/app/access"
	"sheetq/app/audit"
	"sheetq/store"
	"sheetq/ui"
)

// auditPageSize is how many entries a page of the Audit page shows.
const auditPageSize = 50

// auditPage is GET /audit, for admins only: the audit log newest first, filtered by
// actor, action and export, a page at a time (?cursor= from the Older link), with a
// link to the same entries as csv (GET /api/v1/audit?format=csv).
func (p *Pages) auditPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if who := access.From(ctx); !who.IsAdmin() {
		// The refusal goes on the record as every 403 does (problem.Reporter.Refused).
		return &pageError{status: http.StatusForbidden, title: "Not allowed",
			message: "The Audit page is for admins. Ask an admin of this sheetq if you need to know who did what."}
	}
	q := r.URL.Query()
	f := store.AuditFilter{Actor: q.Get("actor"), Action: q.Get("action"), Job: q.Get("job"), Limit: auditPageSize}
	if f.Action != "" && !audit.IsAction(f.Action) {
		return &pageError{status: http.StatusBadRequest, title: "No such action",
			message: "The audit log has no action " + f.Action + ".", back: ui.Link{Href: "/audit", Text: "Back to the audit log"}}
	}
	if c := q.Get("cursor"); c != "" {
		seq, ok := audit.ParseCursor(c)
		if !ok {
			return &pageError{status: http.StatusBadRequest, title: "This page of the audit log does not exist",
				message: "The address names a page that sheetq did not give out.", back: ui.Link{Href: "/audit", Text: "Back to the audit log"}}
		}
		f.Before = seq
	}
	es, err := p.cfg.Audit.Entries(ctx, f)
	if err != nil {
		return err
	}
	tz := p.times(r)
	filters := url.Values{}
	for name, v := range map[string]string{"actor": f.Actor, "action": f.Action, "job": f.Job} {
		if v != "" {
			filters.Set(name, v)
		}
	}
	d := ui.AuditLog{Actor: f.Actor, Job: f.Job, Filtered: len(filters) > 0, Zone: tz.Zone,
		Actions: []ui.Option{{Value: "", Text: "any action", Selected: f.Action == ""}}}
	for _, a := range audit.Actions {
		d.Actions = append(d.Actions, ui.Option{Value: a, Text: a, Selected: a == f.Action})
	}
	for _, e := range es {
		d.Rows = append(d.Rows, ui.AuditRow{At: tz.Clock(e.At), ISO: ui.ISO(e.At), Actor: e.Actor, Action: e.Action,
			Job: e.Job, Report: e.Report, IP: e.IP, Detail: e.Detail})
	}
	withFilters := func(path string, extra url.Values) string {
		v := url.Values{}
		for k, vs := range filters {
			v[k] = vs
		}
		for k, vs := range extra {
			v[k] = vs
		}
		if len(v) == 0 {
			return path
		}
		return path + "?" + v.Encode()
	}
	if len(es) == f.Limit {
		d.OlderURL = withFilters("/audit", url.Values{"cursor": {audit.EncodeCursor(es[len(es)-1].Seq)}})
	}
	if f.Before > 0 {
		d.NewestURL = withFilters("/audit", nil)
	}
	d.CSVURL = withFilters("/api/v1/audit", url.Values{"format": {"csv"}})
	p.render(w, r, http.StatusOK, ui.AuditPage(p.meta(ctx, "audit", ""), d))
	return nil
}
