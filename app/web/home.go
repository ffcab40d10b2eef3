package web

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"sheetq/app/exports"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// HomePageSize is how many exports the home page shows at a time.
const HomePageSize = 50

// homePage lists the newest exports, filtered by ?status= and ?report=, a page at a
// time with ?cursor=.
func (p *Pages) homePage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	opts := store.ListOptions{Kind: export.Name, Limit: HomePageSize, Report: q.Get("report")}
	if v := q.Get("status"); v != "" {
		opts.Status = store.Status(strings.ToUpper(v))
		if !opts.Status.Valid() {
			return &pageError{status: http.StatusBadRequest, title: "Unknown status",
				message: "There is no status " + strconv.Quote(v) + ". Pick one from the list on the exports page."}
		}
	}
	if v := q.Get("cursor"); v != "" {
		seq, ok, err := p.exports.CursorSeq(r.Context(), v)
		if err != nil {
			return err
		}
		if !ok {
			return &pageError{status: http.StatusBadRequest, title: "This link has expired",
				message: "The \"load more\" link is not one this server gave out. Start again from the exports page."}
		}
		opts.Before = seq
	}
	ctx := r.Context()
	m := p.meta(ctx, "exports", "") // before the list: the stream replays what follows it
	list, err := p.store.List(ctx, opts)
	if err != nil {
		return err
	}
	now := p.store.Now()
	d := ui.HomeData{Status: string(opts.Status), Report: opts.Report,
		Filtered: opts.Status != "" || opts.Report != "", Paged: q.Get("cursor") != "", Origin: p.cfg.Middleware.PublicOrigin(r)}
	for _, j := range list {
		d.Rows = append(d.Rows, jobRow(j, now))
	}
	if len(list) == opts.Limit {
		last := list[len(list)-1]
		more := url.Values{"cursor": {exports.EncodeCursor(last)}}
		if opts.Status != "" {
			more.Set("status", string(opts.Status))
		}
		if opts.Report != "" {
			more.Set("report", opts.Report)
		}
		d.MoreURL = "/?" + more.Encode()
	}
	d.Statuses = []ui.Option{{Value: "", Text: "Any status", Selected: opts.Status == ""}}
	for _, st := range []store.Status{store.StatusPending, store.StatusProcessing, store.StatusSucceeded,
		store.StatusFailed, store.StatusCanceled, store.StatusExpired} {
		d.Statuses = append(d.Statuses, ui.Option{Value: string(st), Text: ui.StatusWord(string(st)), Selected: st == opts.Status})
	}
	d.Reports = []ui.Option{{Value: "", Text: "Any report", Selected: opts.Report == ""}}
	ids := []string{}
	for _, e := range p.cfg.Catalog.Entries() {
		ids = append(ids, e.Report.ID)
	}
	if opts.Report != "" && !slices.Contains(ids, opts.Report) {
		ids = append(ids, opts.Report) // a report removed since: its old exports still list
	}
	slices.Sort(ids)
	for _, id := range ids {
		d.Reports = append(d.Reports, ui.Option{Value: id, Text: id, Selected: id == opts.Report})
	}
	p.render(w, r, http.StatusOK, ui.Home(m, d))
	return nil
}

// exportRowFragment is GET /exports/{id}/row: one row of the exports table, which the
// home page's script fetches when an event says the export changed.
func (p *Pages) exportRowFragment(w http.ResponseWriter, r *http.Request) error {
	j, err := p.loadPageJob(r)
	if err != nil {
		return err
	}
	p.render(w, r, http.StatusOK, ui.ExportRow(jobRow(j, p.store.Now())))
	return nil
}

// loadPageJob fetches the {id} export, or returns the not-found page.
func (p *Pages) loadPageJob(r *http.Request) (store.Job, error) {
	j, err := p.exports.Load(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		return j, &pageError{status: http.StatusNotFound, title: "No such export",
			message: "There is no export with this id. It may have been deleted, or removed by retention after some days."}
	}
	return j, err
}

// jobRow is a job as the pages show it, with its progress in words as of now.
func jobRow(j store.Job, now time.Time) ui.JobRow {
	jj := export.JobJSON(j, "")
	row := ui.JobRow{ID: j.ID, Report: jj.Report, Status: string(j.Status), Rows: j.ProgressRows,
		TotalRows: j.ProgressTotal, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Created: ui.Clock(j.CreatedAt), CreatedISO: ui.ISO(j.CreatedAt), DownloadURL: jj.DownloadURL,
		CancelRequested: jj.CancelRequested}
	if jj.Error != nil {
		row.Error = jj.Error.Message
	}
	if j.Status == store.StatusProcessing && !j.StartedAt.IsZero() {
		row.StartedMS = j.StartedAt.UnixMilli()
	}
	retrying := j.Status == store.StatusPending && j.Attempt > 0
	if retrying {
		row.NextAttemptMS = j.RunAt.UnixMilli()
	}
	switch j.Status {
	case store.StatusPending:
		row.ProgressText = "waiting for a worker"
		if retrying {
			row.ProgressText = "waiting to try again"
		}
	case store.StatusProcessing:
		row.ProgressText = ui.ProgressText(j.ProgressRows, j.ProgressTotal,
			ui.Estimate(j.ProgressRows, j.ProgressTotal, now.Sub(j.StartedAt)))
	case store.StatusSucceeded:
		row.ProgressText = ui.Count(j.ProgressRows) + " rows"
	case store.StatusFailed:
		row.ProgressText = "failed"
	case store.StatusCanceled:
		row.ProgressText = "canceled"
	case store.StatusExpired:
		row.ProgressText = "file removed after the retention period"
	}
	row.AttemptInfo = attemptInfo(j, now)
	return row
}

// attemptInfo says which attempt a job is on, when it is not the first:
// "retrying, attempt 2 of 3, next try in 40 s".
func attemptInfo(j store.Job, now time.Time) string {
	max := strconv.Itoa(j.MaxAttempts)
	switch {
	case j.Status == store.StatusPending && j.Attempt > 0:
		s := "retrying, attempt " + strconv.Itoa(j.Attempt+1) + " of " + max
		if wait := j.RunAt.Sub(now); wait >= time.Second {
			return s + ", next try in " + ui.Duration(wait.Round(time.Second))
		}
		return s + ", next try now"
	case j.Attempt <= 1:
		return ""
	case j.Status == store.StatusProcessing:
		return "retrying, attempt " + strconv.Itoa(j.Attempt) + " of " + max
	case j.Status == store.StatusFailed:
		return "gave up after attempt " + strconv.Itoa(j.Attempt) + " of " + max
	default:
		return "took " + strconv.Itoa(j.Attempt) + " attempts"
	}
}
