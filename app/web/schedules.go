package web

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"sheetq/app/schedules"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// schedulesPage is GET /schedules: every schedule, with its next run and Pause/Resume.
func (p *Pages) schedulesPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	list, err := p.cfg.Schedules.List(ctx)
	if err != nil {
		return err
	}
	tz := p.times(r)
	l := ui.ScheduleList{Deleted: r.URL.Query().Get("deleted"), Zone: tz.Zone}
	for _, sc := range list {
		l.Rows = append(l.Rows, p.scheduleRow(sc, tz, false))
	}
	p.render(w, r, http.StatusOK, ui.SchedulesPage(p.meta(ctx, "schedules", ""), l))
	return nil
}

// schedulePage is GET /schedules/{id}: the schedule, its next runs and its firings.
func (p *Pages) schedulePage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	sc, err := p.loadSchedule(r)
	if err != nil {
		return err
	}
	tz := p.times(r)
	d := ui.ScheduleDetail{Row: p.scheduleRow(sc, tz, true), Format: sc.Format, Zone: tz.Zone}
	if sc.BOM {
		d.Format += " with a byte order mark"
	}
	in := schedules.InputOf(sc)
	for _, k := range slices.Sorted(maps.Keys(in.Params)) {
		d.Params = append(d.Params, ui.KV{Name: k, Value: paramText(in.Params[k])})
	}
	if !sc.Paused {
		runs, err := p.cfg.Schedules.PreviewOf(ctx, sc)
		if err != nil {
			d.RunsError = "The next runs cannot be worked out: " + err.Error() + ". Edit the schedule to fix it."
		}
		d.Runs = previewRuns(runs, tz)
	}
	firings, err := p.cfg.Schedules.Firings(r.Context(), sc)
	if err != nil {
		return err
	}
	if len(firings) > 0 {
		// Where the latest export's file went: a delivery that keeps failing shows here.
		evs, err := p.store.Events(ctx, firings[0].ID)
		if err != nil {
			return err
		}
		d.DeliveriesOf = firings[0].ID
		for _, st := range deliver.Statuses(evs) {
			ds := ui.DeliveryStatus{Type: st.Type, Target: st.Target, State: st.State, Error: st.Error,
				AtISO: ui.ISO(st.At), At: tz.MinuteNamed(st.At)}
			if st.Attempt > 0 {
				ds.Attempt = strconv.Itoa(st.Attempt)
			}
			d.Deliveries = append(d.Deliveries, ds)
		}
	}
	for _, j := range firings {
		jj := export.JobJSON(j, "")
		f := ui.ScheduleFiring{ID: j.ID, Status: string(j.Status),
			CreatedISO: ui.ISO(j.CreatedAt), Created: tz.Minute(j.CreatedAt)}
		if jj.ScheduledFor != nil {
			f.ForISO, f.For = ui.ISO(*jj.ScheduledFor), tz.Minute(*jj.ScheduledFor)
		}
		if j.Status == store.StatusSucceeded {
			f.Rows = ui.Count(j.ProgressRows) + " rows"
			if j.ProgressRows == 1 {
				f.Rows = "1 row"
			}
			f.DownloadURL = jj.DownloadURL // none when only encrypted: the export page asks for a password
		}
		if jj.File != nil {
			f.Size = ui.Size(jj.File.Size)
		}
		d.Firings = append(d.Firings, f)
	}
	p.render(w, r, http.StatusOK, ui.SchedulePage(p.meta(ctx, "schedules", ""), d))
	return nil
}

// loadSchedule reads the schedule of the path's {id}, or the page that says there is none.
func (p *Pages) loadSchedule(r *http.Request) (store.Schedule, error) {
	id := r.PathValue("id")
	sc, err := p.cfg.Schedules.Get(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return sc, &pageError{status: http.StatusNotFound, title: "No such schedule",
			message: "There is no schedule " + id + ". It may have been deleted.",
			back:    ui.Link{Href: "/schedules", Text: "Back to the schedules"}}
	}
	return sc, err
}

// scheduleRow is a schedule as the list and its page show it, its times written by tz:
// named on the schedule's page (fields of their own), not in the list (which names the
// zone once).
func (p *Pages) scheduleRow(sc store.Schedule, tz ui.Times, named bool) ui.ScheduleRow {
	minute := tz.Minute
	if named {
		minute = tz.MinuteNamed
	}
	return ui.ScheduleRow{ID: sc.ID, Report: sc.Report, Title: p.reportTitle(sc.Report), Cron: sc.Cron,
		CronWords: cronWords(sc.Cron), TimeZone: sc.TimeZone, Paused: sc.Paused, Owner: sc.Owner,
		NextISO: ui.ISO(sc.NextRunAt), Next: minute(sc.NextRunAt),
		LastISO: ui.ISO(sc.LastFiredFor), Last: minute(sc.LastFiredFor),
		Deliveries: deliveriesText(sc.Deliver), Declared: sc.Owner == schedules.ConfigOwner}
}

// pauseScheduleForm and resumeScheduleForm are POST /schedules/{id}/pause and /resume:
// back to the page the button was on (the list or the schedule's page).
func (p *Pages) pauseScheduleForm(w http.ResponseWriter, r *http.Request) error {
	return p.setPausedForm(w, r, true)
}

func (p *Pages) resumeScheduleForm(w http.ResponseWriter, r *http.Request) error {
	return p.setPausedForm(w, r, false)
}

func (p *Pages) setPausedForm(w http.ResponseWriter, r *http.Request, paused bool) error {
	sc, err := p.loadSchedule(r)
	if err != nil {
		return err
	}
	if _, err := p.cfg.Schedules.SetPaused(r.Context(), sc.ID, paused); err != nil {
		var ie *schedules.InputError
		if errors.As(err, &ie) {
			// Resuming checks the schedule again: its report may have gone meanwhile.
			return &pageError{status: http.StatusUnprocessableEntity, title: "This schedule cannot be resumed",
				message: sentence(ie.Message) + " Edit the schedule to fix it.",
				back:    ui.Link{Href: "/schedules/" + sc.ID + "/edit", Text: "Edit the schedule"}}
		}
		return err
	}
	back := "/schedules/" + sc.ID
	if r.PostFormValue("back") == "list" {
		back = "/schedules"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

// deleteScheduleForm is POST /schedules/{id}/delete: without confirm=yes a page that
// asks (so it works without JavaScript); with it, the schedule goes and its exports stay.
func (p *Pages) deleteScheduleForm(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	sc, err := p.loadSchedule(r)
	if err != nil {
		if r.PostFormValue("confirm") == "yes" {
			var pe *pageError
			if errors.As(err, &pe) && pe.status == http.StatusNotFound {
				// Deleted meanwhile (a second click, another tab): what was asked is done.
				http.Redirect(w, r, "/schedules?deleted="+url.QueryEscape(id), http.StatusSeeOther)
				return nil
			}
		}
		return err
	}
	if r.PostFormValue("confirm") != "yes" {
		p.render(w, r, http.StatusOK, ui.ConfirmPage(p.meta(r.Context(), "schedules", ""), ui.Confirm{
			Title: "Delete this schedule?",
			Message: "This deletes the schedule of " + p.reportTitle(sc.Report) + " (" + sc.Cron + ", " + sc.TimeZone +
				"). It will not fire again; the exports it made stay.",
			Action: "/schedules/" + sc.ID + "/delete", Button: "Delete the schedule", Danger: true,
			Back: ui.Link{Href: "/schedules/" + sc.ID, Text: "Keep it and go back"},
		}))
		return nil
	}
	if err := p.cfg.Schedules.Delete(r.Context(), sc.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	http.Redirect(w, r, "/schedules?deleted="+url.QueryEscape(sc.ID), http.StatusSeeOther)
	return nil
}

// previewRuns are firings as the pages show them: in the viewer's zone (tz), which
// the list of them names once.
func previewRuns(runs []schedules.Firing, tz ui.Times) []ui.ScheduleRun {
	out := make([]ui.ScheduleRun, 0, len(runs))
	for _, f := range runs {
		run := ui.ScheduleRun{ISO: ui.ISO(f.At), At: tz.Day(f.At)}
		for _, k := range slices.Sorted(maps.Keys(f.Params)) {
			run.Params = append(run.Params, ui.KV{Name: k, Value: paramText(f.Params[k])})
		}
		out = append(out, run)
	}
	return out
}

// deliveriesText sums up where a schedule's files go: "email to ann@example.com; webhook
// hooks.example.com; folder /srv/reports (encrypted)", or "" for nowhere. A target
// with a password says "encrypted", never where the password is.
func deliveriesText(raw json.RawMessage) string {
	var ts []struct {
		Type     string   `json:"type"`
		To       []string `json:"to"`
		URL      string   `json:"url"`
		Path     string   `json:"path"`
		Password string   `json:"password"`
	}
	if json.Unmarshal(raw, &ts) != nil {
		return ""
	}
	var parts []string
	for _, t := range ts {
		switch t.Type {
		case "email":
			parts = append(parts, "email to "+strings.Join(t.To, ", "))
		case "webhook":
			host := t.URL
			if u, err := url.Parse(t.URL); err == nil && u.Host != "" {
				host = u.Host
			}
			parts = append(parts, "webhook "+host)
		case "folder":
			parts = append(parts, "folder "+t.Path)
		default:
			parts = append(parts, cmp.Or(t.Type, "?"))
		}
		if t.Password != "" {
			parts[len(parts)-1] += " (encrypted)"
		}
	}
	return strings.Join(parts, "; ")
}
