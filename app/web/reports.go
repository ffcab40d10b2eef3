package web

import (
	"fmt"
	"net/http"
	"strconv"

	"sheetq/app/exports"
	"sheetq/ui"
)

// reportsPage is GET /reports: every report with its params and SQL, and every broken
// file with its error. With ?fragment=list it answers only the list, which the page's
// script fetches when a report file changes.
func (p *Pages) reportsPage(w http.ResponseWriter, r *http.Request) error {
	entries := p.cfg.Catalog.Entries()
	views := make([]ui.ReportView, 0, len(entries))
	for _, e := range entries {
		views = append(views, reportView(exports.ReportOf(e)))
	}
	if r.URL.Query().Get("fragment") == "list" {
		p.render(w, r, http.StatusOK, ui.ReportList(views))
		return nil
	}
	p.render(w, r, http.StatusOK, ui.Reports(p.meta(r.Context(), "reports", ""), p.cfg.ReportsDir, views))
	return nil
}

// reportView is a report as the reports page shows it.
func reportView(rj exports.Report) ui.ReportView {
	v := ui.ReportView{ID: rj.ID, Title: rj.Title, Description: rj.Description, Source: rj.Source,
		Sheet: rj.Sheet, File: rj.File, SQL: rj.SQL}
	for _, p := range rj.Params {
		pv := ui.ParamView{Name: p.Name, Type: string(p.Type), Label: p.Label}
		if p.Default != nil {
			pv.Default = fmt.Sprint(p.Default)
		} else {
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
