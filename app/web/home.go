package web

import (
	"context"
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

// homeMaxRows is the most rows ?n= may ask for at once (the store's List limit).
const homeMaxRows = 1000

// homePage lists the newest exports, filtered by ?status= and ?report=, a page at a
// time with ?cursor=. ?n= shows that many rows at once: the script keeps it in the URL
// as "Load more" appends pages, so that a reload shows the same rows. ?q= finds an
// export by its id, or lists those among the newest homeMaxRows whose id starts with it.
func (p *Pages) homePage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var (
		notice   string
		prefixed []store.Job // ?q= as an id prefix: the exports it matches
	)
	if id := strings.TrimSpace(q.Get("q")); id != "" {
		j, err := p.exports.Load(r.Context(), id)
		switch {
		case err == nil:
			http.Redirect(w, r, "/exports/"+url.PathEscape(j.ID), http.StatusSeeOther)
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if prefixed, err = p.idPrefix(r.Context(), id); err != nil {
			return err
		}
		switch len(prefixed) {
		case 0:
			notice = "No export has the id " + strconv.Quote(id) + ", nor one that starts with it among the newest " +
				ui.Count(homeMaxRows) + ". Paste the whole id, as on the export's page; the list below is unchanged."
		case 1:
			http.Redirect(w, r, "/exports/"+url.PathEscape(prefixed[0].ID), http.StatusSeeOther)
			return nil
		default:
			notice = ui.Count(int64(len(prefixed))) + " exports among the newest " + ui.Count(homeMaxRows) +
				" have an id that starts with " + strconv.Quote(id) + "."
		}
	}
	if id := q.Get("deleted"); id != "" {
		notice = "Deleted the export " + id + ", its file and its history."
	}
	limit := HomePageSize
	if n, err := strconv.Atoi(q.Get("n")); err == nil && n > 0 {
		limit = min(n, homeMaxRows)
	}
	opts := store.ListOptions{Kind: export.Name, Limit: limit, Report: q.Get("report")}
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
	list := prefixed
	if len(prefixed) == 0 {
		var err error
		if list, err = p.store.List(ctx, exports.ListFor(ctx, opts)); err != nil {
			return err
		}
	}
	full := len(list) == opts.Limit && len(prefixed) == 0
	var last store.Job
	if full {
		last = list[len(list)-1]
	}
	list = p.exports.Filter(ctx, list)
	now, tz := p.store.Now(), p.times(r)
	d := ui.HomeData{Zone: tz.Zone, Status: string(opts.Status), Report: opts.Report, Query: q.Get("q"), Notice: notice,
		Filtered: opts.Status != "" || opts.Report != "" || len(prefixed) > 0, Paged: q.Get("cursor") != "" || len(prefixed) > 0,
		Origin: p.cfg.Middleware.PublicOrigin(r)}
	for _, j := range list {
		d.Rows = append(d.Rows, p.jobRow(j, now, tz))
	}
	if full {
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
		if p.exports.MayRunEntry(ctx, e) {
			ids = append(ids, e.Report.ID)
		}
	}
	if opts.Report != "" && !slices.Contains(ids, opts.Report) {
		ids = append(ids, opts.Report) // a report removed since: its old exports still list
	}
	slices.Sort(ids)
	for _, id := range ids {
		d.Reports = append(d.Reports, ui.Option{Value: id, Text: p.reportTitle(id), Selected: id == opts.Report})
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
	p.render(w, r, http.StatusOK, ui.ExportRow(p.jobRow(j, p.store.Now(), p.times(r))))
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

// idPrefix lists the exports among the newest homeMaxRows whose id starts with
// prefix (any case): the store looks up whole ids only, so a prefix is matched here.
func (p *Pages) idPrefix(ctx context.Context, prefix string) ([]store.Job, error) {
	list, err := p.store.List(ctx, exports.ListFor(ctx, store.ListOptions{Kind: export.Name, Limit: homeMaxRows}))
	if err != nil {
		return nil, err
	}
	list = p.exports.Filter(ctx, list)
	prefix = strings.ToLower(prefix)
	var out []store.Job
	for _, j := range list {
		if strings.HasPrefix(strings.ToLower(j.ID), prefix) {
			out = append(out, j)
		}
	}
	return out, nil
}

// report is the catalog's report id; ok is false when it is gone (or broken).
func (p *Pages) report(id string) (export.Report, bool) {
	if p.cfg.Catalog == nil || id == "" {
		return export.Report{}, false
	}
	rep, err := p.cfg.Catalog.Report(id)
	return rep, err == nil
}

// reportTitle is the report's title for people, or its id when it is gone.
func (p *Pages) reportTitle(id string) string {
	if rep, ok := p.report(id); ok && rep.Title != "" {
		return rep.Title
	}
	return id
}

// jobRow is a job as the pages show it, with its progress in words as of now.
// jobRow is j as the exports table shows it; tz writes its times (the table names the
// zone in its heading).
func (p *Pages) jobRow(j store.Job, now time.Time, tz ui.Times) ui.JobRow {
	jj := export.JobJSON(j, "")
	rep, _ := p.report(jj.Report)
	row := ui.JobRow{ID: j.ID, Report: jj.Report, Title: p.reportTitle(jj.Report), Status: string(j.Status),
		Rows: j.ProgressRows, TotalRows: j.ProgressTotal,
		Attempt: j.Attempt - j.AttemptBase, MaxAttempts: j.MaxAttempts - j.AttemptBase, AttemptsBefore: j.AttemptBase,
		Created: tz.Minute(j.CreatedAt), CreatedISO: ui.ISO(j.CreatedAt), DownloadURL: jj.DownloadURL,
		CancelRequested: jj.CancelRequested, CreatedBy: j.CreatedBy, Ran: ranOf(j, now)}
	row.ParamSummary, row.ParamFull = paramSummary(jj.Params, rep.Params)
	// A file handed out only encrypted has no plain link (JobJSON leaves it out).
	row.EncryptOnly = jj.EncryptRequired && j.Status == store.StatusSucceeded && jj.File != nil
	if jj.Format != "" && jj.Format != export.FormatXLSX {
		row.Format = strings.ToUpper(jj.Format)
	}
	if jj.File != nil {
		row.Size = ui.Size(jj.File.Size)
	}
	if jj.Error != nil {
		row.Error = jj.Error.Message
	}
	if j.Status == store.StatusProcessing && !j.StartedAt.IsZero() {
		row.StartedMS = j.StartedAt.UnixMilli()
	}
	if j.Status == store.StatusPending {
		// Rows counted by an attempt that was killed are no progress of the next one.
		row.Rows, row.TotalRows = 0, -1
	}
	retrying := j.Status == store.StatusPending && j.Attempt > j.AttemptBase
	if retrying {
		row.NextAttemptMS = j.RunAt.UnixMilli()
	}
	switch j.Status {
	case store.StatusPending:
		row.ProgressText = "waiting for a worker"
		if retrying && j.RunAt.Sub(now) >= time.Second {
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

// ranOf is how long the export's last attempt ran: live while it runs, nothing before
// it starts or for a job that waits to run again.
func ranOf(j store.Job, now time.Time) ui.Elapsed {
	switch {
	case j.StartedAt.IsZero() || j.Status == store.StatusPending:
		return ui.Elapsed{}
	case j.Status == store.StatusProcessing:
		d := max(now.Sub(j.StartedAt), 0)
		return ui.Elapsed{Text: ui.Duration(d) + " so far", MS: d.Milliseconds(), Live: true, Suffix: " so far"}
	case !j.FinishedAt.IsZero() && !j.FinishedAt.Before(j.StartedAt):
		return ui.Elapsed{Text: ui.Duration(j.FinishedAt.Sub(j.StartedAt))}
	}
	return ui.Elapsed{}
}

// paramSummaryLen is how long the list's parameter summary may be before it is cut.
const paramSummaryLen = 60

// paramSummary writes the parameters in short, in the report's order (params, when
// the report is known; by name otherwise): "from 2025-03-01, to 2025-03-31", cut at
// paramSummaryLen with an ellipsis; full is the whole. A parameter at its default says
// nothing a reader needs ("fail_first 0"), so neither has it.
func paramSummary(values map[string]any, params []export.Param) (short, full string) {
	parts := make([]string, 0, len(values))
	for _, k := range paramOrder(values, params) {
		if i := slices.IndexFunc(params, func(prm export.Param) bool { return prm.Name == k }); i >= 0 && isDefault(params[i], values[k]) {
			continue
		}
		parts = append(parts, k+" "+paramText(values[k]))
	}
	full = strings.Join(parts, ", ")
	if r := []rune(full); len(r) > paramSummaryLen {
		return strings.TrimSpace(string(r[:paramSummaryLen-1])) + "…", full
	}
	return full, full
}

// paramOrder is the names of values in the report's order (params), then the others
// (a report changed since, or gone) by name.
func paramOrder(values map[string]any, params []export.Param) []string {
	names := make([]string, 0, len(values))
	for _, prm := range params {
		if _, ok := values[prm.Name]; ok {
			names = append(names, prm.Name)
		}
	}
	var rest []string
	for k := range values {
		if !slices.Contains(names, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

// isDefault reports whether v, a job's stored value of prm, is prm's default, as the
// pages write both (a stored 0 and a declared 0.0 are both "0").
func isDefault(prm export.Param, v any) bool {
	return prm.Default != nil && paramText(prm.Default) == paramText(v)
}

// attemptInfo says which attempt a job is on, when it is not the first:
// "retrying, attempt 2 of 3, next try in 40 s". It counts from the last manual run
// (store.Job.AttemptBase), which gave the job a fresh budget.
func attemptInfo(j store.Job, now time.Time) string {
	n, max := j.Attempt-j.AttemptBase, strconv.Itoa(j.MaxAttempts-j.AttemptBase)
	switch {
	case j.Status == store.StatusPending && n > 0:
		// A job recovered after a crash, or whose backoff is over, waits for a worker,
		// not for a time: "next try now" would promise what no one may be free to do.
		next := "attempt " + strconv.Itoa(n+1) + " of " + max
		if wait := j.RunAt.Sub(now); wait >= time.Second {
			return "retrying, " + next + ", next try in " + ui.Duration(wait.Round(time.Second))
		}
		return next + ", waiting for a worker"
	case n <= 1:
		return ""
	case j.Status == store.StatusProcessing:
		return "retrying, attempt " + strconv.Itoa(n) + " of " + max
	case j.Status == store.StatusFailed:
		return "gave up after attempt " + strconv.Itoa(n) + " of " + max
	default:
		return "took " + strconv.Itoa(n) + " attempts"
	}
}
