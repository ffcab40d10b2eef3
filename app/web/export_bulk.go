package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"sheetq/app/audit"
	"sheetq/app/exports"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// bulkMax is the most exports one bulk action takes: a selection can hold no more
// than the list shows (homeMaxRows); a filter is read in pages of that size up to it.
const bulkMax = 10 * homeMaxRows

// A bulk action: what it does to each export it may touch, in words.
type bulkAction struct {
	verb, past string // "Delete", "Deleted"
	// applies says whether the action may touch a job of this status, and if not, why
	// it is left ("still waiting or running").
	applies func(store.Status) (bool, string)
}

var bulkActions = map[string]bulkAction{
	"retry": {verb: "Retry", past: "Retried", applies: func(s store.Status) (bool, string) {
		return s == store.StatusFailed, "not failed"
	}},
	"cancel": {verb: "Cancel", past: "Canceled", applies: func(s store.Status) (bool, string) {
		return !s.Final(), "already ended"
	}},
	"delete": {verb: "Delete", past: "Deleted", applies: func(s store.Status) (bool, string) {
		return s.Final(), "still waiting or running"
	}},
}

// bulkExportsForm is POST /exports/bulk from the list's bulk form: action (retry,
// cancel or delete) on the ticked exports (id, repeated) or, with scope=filter, on
// every export that the list's filters (status, report) match. Without confirm=yes it
// answers with a page that says how many it will touch and asks; with it, it acts and
// shows what was done to each export and what was refused.
func (p *Pages) bulkExportsForm(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return &pageError{status: http.StatusBadRequest, title: "Unreadable form", message: "The form could not be read. Go back, reload the list and try again."}
	}
	f := r.PostForm
	status, report, scope := f.Get("status"), f.Get("report"), f.Get("scope")
	listURL := "/"
	if v := filterValues(status, report); len(v) > 0 {
		listURL += "?" + v.Encode()
	}
	back := ui.Link{Href: listURL, Text: "Back to the exports"}
	act, ok := bulkActions[f.Get("action")]
	if !ok {
		return &pageError{status: http.StatusBadRequest, title: "Unknown action",
			message: "Pick Retry failed, Cancel or Delete under the list.", back: back}
	}
	if status != "" && !store.Status(status).Valid() {
		return &pageError{status: http.StatusBadRequest, title: "Unknown status",
			message: "There is no status " + strconv.Quote(status) + ". Pick one from the list on the exports page.", back: back}
	}
	var jobs []store.Job
	switch scope {
	case "filter":
		var err error
		if jobs, err = p.matching(r.Context(), store.Status(status), report); err != nil {
			return err
		}
	case "selected", "":
		ids := f["id"]
		if len(ids) == 0 {
			return &pageError{status: http.StatusBadRequest, title: "Nothing selected",
				message: "Tick the exports to act on in the list, or choose to act on every export the filters match.", back: back}
		}
		if len(ids) > homeMaxRows {
			ids = ids[:homeMaxRows]
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			j, err := p.exports.Load(r.Context(), id)
			if errors.Is(err, store.ErrNotFound) {
				jobs = append(jobs, store.Job{ID: id}) // gone: said so below
				continue
			}
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
	default:
		return &pageError{status: http.StatusBadRequest, title: "Unknown choice",
			message: "Act on the selected exports or on every export the filters match.", back: back}
	}

	if f.Get("confirm") != "yes" {
		n := 0
		for _, j := range jobs {
			if ok, _ := act.applies(j.Status); ok && j.Status != "" {
				n++
			}
		}
		fields := []ui.KV{{Name: "action", Value: f.Get("action")}, {Name: "scope", Value: scope},
			{Name: "status", Value: status}, {Name: "report", Value: report}}
		var items []string
		if scope != "filter" {
			for _, j := range jobs {
				fields = append(fields, ui.KV{Name: "id", Value: j.ID})
				if len(items) < 20 {
					items = append(items, p.reportTitle(export.ReportOf(j))+" · "+j.ID)
				}
			}
		}
		c := ui.Confirm{Title: act.verb + " " + plural(n, "export") + "?", Action: "/exports/bulk", Fields: fields,
			Button: act.verb + " " + plural(n, "export"), Danger: act.verb != "Retry", Back: back, Items: items,
			Message: confirmMessage(act, scope, len(jobs), n)}
		p.render(w, r, http.StatusOK, ui.ConfirmPage(p.meta(r.Context(), "", ""), c))
		return nil
	}

	res := ui.BulkResult{Title: act.verb + ": done", Back: back}
	done, refused := 0, map[string]int{}
	var order []string
	for _, j := range jobs {
		o := ui.BulkOutcome{ID: j.ID, Title: p.reportTitle(export.ReportOf(j))}
		why, err := p.bulkOne(r.Context(), f.Get("action"), act, j)
		if err != nil {
			return err
		}
		if why == "" {
			done++
			o.Done, o.Text = true, strings.ToLower(act.past)
			o.Gone = act.verb == "Delete"
		} else {
			if refused[why] == 0 {
				order = append(order, why)
			}
			refused[why]++
			o.Text = "left: " + why
			o.Gone = why == "gone already"
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	res.Summary = act.past + " " + strconv.Itoa(done)
	for _, why := range order {
		res.Summary += "; " + strconv.Itoa(refused[why]) + " " + why + " " + wereLeft(refused[why])
	}
	res.Summary += "."
	p.render(w, r, http.StatusOK, ui.BulkResultPage(p.meta(r.Context(), "", ""), res))
	return nil
}

// bulkOne does the action to one export with the operations its page's buttons use; it
// returns why it was left ("" when done). A status that changed since the list was
// read is checked again by the operation itself.
func (p *Pages) bulkOne(ctx context.Context, name string, act bulkAction, j store.Job) (string, error) {
	if j.Status == "" {
		return "gone already", nil
	}
	if ok, why := act.applies(j.Status); !ok {
		return why, nil
	}
	action := map[string]string{"retry": audit.ExportRetried, "cancel": audit.ExportCanceled, "delete": audit.ExportDeleted}[name]
	if err := p.exports.Record(ctx, action, j, "asked on the exports page, for a selection, while "+string(j.Status)); err != nil {
		return "", err
	}
	var err error
	switch name {
	case "retry":
		_, err = p.exports.Retry(ctx, j.ID)
		if errors.Is(err, store.ErrNotRetryable) {
			return "not failed", nil
		}
	case "cancel":
		_, err = p.engine.Cancel(ctx, j.ID)
		if errors.Is(err, store.ErrFinished) {
			return "already ended", nil
		}
	case "delete":
		_, err = p.engine.Delete(ctx, j.ID)
		if errors.Is(err, store.ErrNotFinished) {
			return "still waiting or running", nil
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return "gone already", nil
	}
	return "", err
}

// matching lists every export the filters match, newest first, up to bulkMax.
func (p *Pages) matching(ctx context.Context, status store.Status, report string) ([]store.Job, error) {
	var all []store.Job
	opts := exports.ListFor(ctx, store.ListOptions{Kind: export.Name, Status: status, Report: report, Limit: homeMaxRows})
	for len(all) < bulkMax {
		list, err := p.store.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, p.exports.Filter(ctx, list)...)
		if len(list) < opts.Limit {
			break
		}
		opts.Before = list[len(list)-1].Seq
	}
	return all, nil
}

// confirmMessage says, before a bulk action, how many exports it will touch and how
// many it leaves.
func confirmMessage(act bulkAction, scope string, all, n int) string {
	of := "Of the " + plural(all, "selected export") + ", "
	if scope == "filter" {
		of = "Of the " + plural(all, "export") + " the filters match, "
	}
	s := of + strconv.Itoa(n) + " can be " + strings.ToLower(act.past) + "."
	if left := all - n; left > 0 {
		s += " The other " + strconv.Itoa(left) + " will be left as they are."
	}
	if act.verb == "Delete" {
		s += " Deleting removes each export's file and history; it cannot be undone."
	}
	return s
}

// filterValues is the list's query for these filters.
func filterValues(status, report string) url.Values {
	v := url.Values{}
	if status != "" {
		v.Set("status", status)
	}
	if report != "" {
		v.Set("report", report)
	}
	return v
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func wereLeft(n int) string {
	if n == 1 {
		return "was left"
	}
	return "were left"
}
