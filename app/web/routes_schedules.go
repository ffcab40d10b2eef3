package web

import "sheetq/app/problem"

// scheduleRoutes adds the Schedules pages' routes (issue 20). Their forms post from
// sheetq's own pages, which the middleware's same-origin check holds them to, as for
// the New export form; the preview fragment is posted by the form's script, same-origin.
func (p *Pages) scheduleRoutes(mux problem.Mux) {
	h := p.handle
	mux.HandleFunc("GET /schedules", h(p.schedulesPage))
	mux.HandleFunc("GET /schedules/new", h(p.newSchedulePage))
	mux.HandleFunc("POST /schedules", h(p.createScheduleForm))
	mux.HandleFunc("POST /schedules/preview", h(p.schedulePreviewFragment))
	mux.HandleFunc("GET /schedules/{id}", h(p.schedulePage))
	mux.HandleFunc("GET /schedules/{id}/edit", h(p.editSchedulePage))
	mux.HandleFunc("POST /schedules/{id}/edit", h(p.updateScheduleForm))
	mux.HandleFunc("POST /schedules/{id}/pause", h(p.pauseScheduleForm))
	mux.HandleFunc("POST /schedules/{id}/resume", h(p.resumeScheduleForm))
	mux.HandleFunc("POST /schedules/{id}/delete", h(p.deleteScheduleForm))
}
