package web

import (
	"fmt"
	"net/http"
	"strconv"

	"sheetq/app/access"
	"sheetq/app/exports"
	"sheetq/ui"
)

// reportsPage is GET /reports: every report with its params and SQL, and every broken
// file with its error; a member sees only the reports they may run, without their SQL. With ?fragment=list it answers only the list, which the page's
// script fetches when a report file changes.
func (p *Pages) reportsPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	entries := p.cfg.Catalog.Entries()
	views := make([]ui.ReportView, 0, len(entries))
	for _, e := range entries {
		if p.exports.MayRunEntry(ctx, e) {
			views = append(views, reportView(p.exports.ReportWithResume(ctx, e)))
		}
	}
	if r.URL.Query().Get("fragment") == "list" {
		p.render(w, r, http.StatusOK, ui.ReportList(views))
		return nil
	}
	// The folder is the server's: a member is shown the reports, not where they live.
	dir := p.cfg.ReportsDir
	if !access.From(ctx).IsAdmin() {
		dir = ""
	}
	p.render(w, r, http.StatusOK, ui.Reports(p.meta(ctx, "reports", ""), dir, views))
	return nil
}

// reportView is a report as the reports page shows it.
func reportView(rj exports.Report) ui.ReportView {
	v := ui.ReportView{ID: rj.ID, Title: rj.Title, Description: rj.Description, Source: rj.Source,
		Sheet: rj.Sheet, File: rj.File, SQL: rj.SQL, Encrypt: rj.Encrypt}
	for _, p := range rj.Params {
		pv := ui.ParamView{Name: p.Name, Type: string(p.Type), Label: p.Label}
		switch {
		case p.From != "":
			pv.Default = "(from your account: " + p.From + ")"
		case p.Default != nil:
			pv.Default = fmt.Sprint(p.Default)
		default:
			pv.Default = "(required)"
		}
		switch {
		case p.Min != nil && p.Max != nil:
			pv.Range = num(*p.Min) + " to " + num(*p.Max)
		case p.Min != nil:
			pv.Range = "at least " + num(*p.Min)
		case p.Max != nil:
			pv.Range = "at most " + num(*p.Max)
		}
		v.Params = append(v.Params, pv)
	}
	for _, c := range rj.Columns {
		v.Columns = append(v.Columns, ui.ColumnView{Name: c.Name, Label: c.Label, Type: string(c.Type), Format: c.Format})
	}
	v.Filename = rj.Filename
	v.Access = rj.Access
	v.Resumes, v.ResumeNote = rj.Resumes, rj.ResumeNote
	if le := rj.Error; le != nil {
		v.ErrFile = le.File
		v.ErrText = le.Message
		if le.File != "" && le.Line > 0 {
			v.ErrText = le.File + ":" + strconv.Itoa(le.Line) + ": " + le.Message
		} else if le.File != "" {
			v.ErrText = le.File + ": " + le.Message
		}
	}
	return v
}
