package web

import (
	"errors"
	"net/http"
	"net/url"

	"sheetq/app/audit"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// deleteExportForm is POST /exports/{id}/delete from the export page's Delete button:
// without confirm=yes it answers with a page that asks (so the step works without
// JavaScript); with it, it deletes the export, its events and its file, and goes back
// to the list, which says so.
func (p *Pages) deleteExportForm(w http.ResponseWriter, r *http.Request) error {
	j, err := p.loadPageJob(r)
	if errors.Is(err, store.ErrNotFound) && r.PostFormValue("confirm") == "yes" {
		// Deleted meanwhile (a second click, another tab): what was asked is done.
		http.Redirect(w, r, "/?deleted="+url.QueryEscape(r.PathValue("id")), http.StatusSeeOther)
		return nil
	}
	if err != nil {
		return err
	}
	back := ui.Link{Href: "/exports/" + j.ID, Text: "Keep it and go back to the export"}
	if !j.Status.Final() {
		return &pageError{status: http.StatusConflict, title: "This export has not ended",
			message: "An export that is waiting or running cannot be deleted. Cancel it first, then delete it.", back: back}
	}
	title := p.reportTitle(export.ReportOf(j))
	if r.PostFormValue("confirm") != "yes" {
		p.render(w, r, http.StatusOK, ui.ConfirmPage(p.meta(r.Context(), "", ""), ui.Confirm{
			Title:   "Delete this export?",
			Message: "This deletes the export " + title + " (" + j.ID + "), its file and its history. It cannot be undone.",
			Action:  "/exports/" + j.ID + "/delete", Button: "Delete the export", Danger: true, Back: back,
		}))
		return nil
	}
	if err := p.exports.Record(r.Context(), audit.ExportDeleted, j, "asked on the export's page, while "+string(j.Status)); err != nil {
		return err
	}
	if _, err := p.engine.Delete(r.Context(), j.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		if errors.Is(err, store.ErrNotFinished) {
			return &pageError{status: http.StatusConflict, title: "This export has not ended",
				message: "The export was started again meanwhile; it cannot be deleted while it waits or runs.", back: back}
		}
		return err
	}
	http.Redirect(w, r, "/?deleted="+url.QueryEscape(j.ID), http.StatusSeeOther)
	return nil
}
