package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"sheetq/app/middleware"
	"sheetq/app/problem"
	"sheetq/app/schedules"
	"sheetq/internal/apiv1"
	"sheetq/jobs/export"
	"sheetq/store"
)

// scheduleJSON is sc as API v1 shows it (apiv1.Schedule; openapi.json, "schedule").
func (a *API) scheduleJSON(ctx context.Context, sc store.Schedule) apiv1.Schedule {
	in := schedules.InputOf(sc)
	out := apiv1.Schedule{ID: sc.ID, Report: sc.Report, Params: in.Params, Format: sc.Format, BOM: sc.BOM,
		Cron: sc.Cron, TimeZone: sc.TimeZone, Deliver: []apiv1.Target{}, Owner: sc.Owner, Paused: sc.Paused,
		NextRunAt: timeOrNil(sc.NextRunAt), LastFiredFor: timeOrNil(sc.LastFiredFor),
		CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt, NextRuns: []apiv1.ScheduledRun{}}
	if out.Params == nil {
		out.Params = map[string]any{}
	}
	if len(sc.Deliver) > 0 {
		_ = json.Unmarshal(sc.Deliver, &out.Deliver) // checked by deliver.ParseTargets when saved
	}
	if out.Deliver == nil {
		out.Deliver = []apiv1.Target{} // a row saved with "deliver": null before it was read as none
	}
	if !sc.Paused {
		// A schedule that no longer checks (its report was removed) shows no coming runs;
		// its next firing still happens, and fails where people look.
		if runs, err := a.cfg.Schedules.PreviewOf(ctx, sc); err == nil {
			out.NextRuns = runs
		}
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// readScheduleInput reads a schedule from the body into into, strictly (unknown fields
// and repeated keys refused), and returns the names of the fields the body gives, in
// lower case (encoding/json matches them without regard to case). A PATCH applies those
// alone, so a null is refused there, since it would keep the value without a word
// (elsewhere a null field is an absent one).
func (a *API) readScheduleInput(w http.ResponseWriter, r *http.Request, into *schedules.Input, patch bool) (sent map[string]bool, err error) {
	if err := checkJSONType(r); err != nil {
		return nil, err
	}
	body, err := a.readBody(w, r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(into); errors.Is(err, io.EOF) {
		return nil, problem.New(http.StatusBadRequest, "malformed_json",
			`the body is empty: send the schedule as a JSON object, such as {"report": "orders", "cron": "0 6 * * *", "timezone": "UTC"}`)
	} else if err != nil {
		return nil, problem.New(http.StatusBadRequest, "malformed_json", "the body is not a valid schedule: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, problem.New(http.StatusBadRequest, "malformed_json", "the body has data after the JSON object")
	}
	// encoding/json keeps the last of a repeated key without a word: {"cron": "0 6 * * *",
	// "cron": "0 7 * * *"} would save one of the two times the client wrote.
	if path := duplicateKey(body); path != "" {
		return nil, problem.New(http.StatusBadRequest, "malformed_json",
			"the body gives "+strconv.Quote(path)+" more than once; give each field once")
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields) // an object, or null: decoded above
	if patch {
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			if string(fields[name]) == "null" {
				p := problem.New(http.StatusUnprocessableEntity, "invalid_schedule",
					name+": null changes nothing; leave the field out to keep its value (send {} for no params, [] for no deliver)")
				p.Field = name
				return nil, p
			}
		}
	}
	// A null "deliver" is no targets, as an absent one is, not a list that shows as null.
	if string(into.Deliver) == "null" {
		into.Deliver = nil
	}
	sent = make(map[string]bool, len(fields))
	for name := range fields {
		sent[strings.ToLower(name)] = true
	}
	return sent, nil
}

// duplicateKey is the path of the first key that an object of the JSON document doc
// gives twice ("cron", "params.rows", "deliver[0].to"), or "" when none does (or when
// doc is not JSON, which decoding it reports). Keys that differ only in case are the
// same key ("cron" and "Cron"), since encoding/json matches a struct's fields so,
// except in params, a map whose keys are the report's names as written.
func duplicateKey(doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var walk func(path string) (string, error)
	walk = func(path string) (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			// A map, not a list: a 64 KiB body can hold some ten thousand keys.
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return "", err
				}
				key, _ := tok.(string)
				sub := key
				if path != "" {
					sub = path + "." + key
				}
				// encoding/json matches a struct's field names without regard to case;
				// a report's parameter names are compared exactly.
				if path != "params" {
					key = strings.ToLower(key)
				}
				if seen[key] {
					return sub, nil
				}
				seen[key] = true
				if dup, err := walk(sub); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token() // '}'
			return "", err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if dup, err := walk(path + "[" + strconv.Itoa(i) + "]"); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token() // ']'
			return "", err
		}
		return "", nil
	}
	dup, _ := walk("")
	return dup
}

// scheduleProblem turns the service's refusals into problems: wrong fields are 422 with
// "field" (and "param" for a report parameter) naming the first, and "errors" listing
// every one; an unknown report (the first error) is 422 unknown_report.
func scheduleProblem(err error, id string) error {
	switch fields := schedules.Fields(err); {
	case len(fields) > 0:
		p := problem.New(http.StatusUnprocessableEntity, "invalid_schedule", err.Error())
		for _, ie := range fields {
			fe := apiv1.FieldError{Field: ie.Field, Detail: ie.Message}
			if name, ok := strings.CutPrefix(ie.Field, "params."); ok {
				fe.Param = name
			}
			if ie.Field == "deliver" && ie.Index >= 0 {
				fe.Index = &ie.Index
			}
			p.Errors = append(p.Errors, fe)
		}
		p.Field, p.Param = p.Errors[0].Field, p.Errors[0].Param
		if fields[0].NotFound {
			p.Code = "unknown_report"
		}
		for _, ie := range fields {
			if ie.Forbidden {
				// Something only an admin may do, or an attribute the owner lacks: 403,
				// with every field still listed.
				p.Status, p.Code, p.Title = http.StatusForbidden, "forbidden", http.StatusText(http.StatusForbidden)
				break
			}
		}
		return p
	case errors.Is(err, store.ErrNotFound):
		return problem.New(http.StatusNotFound, "not_found", "no schedule with id "+fmt.Sprintf("%q", id))
	case errors.Is(err, schedules.ErrDeclared):
		return problem.New(http.StatusConflict, "declared_in_config", err.Error())
	case errors.Is(err, schedules.ErrBusy):
		return problem.New(http.StatusConflict, "schedule_busy", err.Error())
	}
	return err
}

// createSchedule is POST /api/v1/schedules: 201 with the schedule and its next runs.
func (a *API) createSchedule(w http.ResponseWriter, r *http.Request) error {
	var in schedules.Input
	if _, err := a.readScheduleInput(w, r, &in, false); err != nil {
		return err
	}
	if in.Report == "" {
		p := problem.New(http.StatusUnprocessableEntity, "invalid_schedule",
			`the body needs "report": the id of a report (see GET /api/v1/reports)`)
		p.Field = "report"
		return p
	}
	sc, err := a.cfg.Schedules.Create(r.Context(), in, middleware.Principal(r.Context()))
	if err != nil {
		return scheduleProblem(err, "")
	}
	w.Header().Set("Location", "/api/v1/schedules/"+sc.ID)
	problem.WriteJSON(w, http.StatusCreated, a.scheduleJSON(r.Context(), sc))
	return nil
}

// listSchedules is GET /api/v1/schedules.
func (a *API) listSchedules(w http.ResponseWriter, r *http.Request) error {
	if err := wholeListQuery(r); err != nil {
		return err
	}
	list, err := a.cfg.Schedules.List(r.Context())
	if err != nil {
		return err
	}
	out := make([]apiv1.Schedule, 0, len(list))
	for _, sc := range list {
		out = append(out, a.scheduleJSON(r.Context(), sc))
	}
	problem.WriteJSON(w, http.StatusOK, map[string]any{"schedules": out})
	return nil
}

// getSchedule is GET /api/v1/schedules/{id}.
func (a *API) getSchedule(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	sc, err := a.cfg.Schedules.Get(r.Context(), id)
	if err != nil {
		return scheduleProblem(err, id)
	}
	problem.WriteJSON(w, http.StatusOK, a.scheduleJSON(r.Context(), sc))
	return nil
}

// patchSchedule is PATCH /api/v1/schedules/{id}: the fields sent replace the schedule's,
// the others stay (params and deliver are replaced whole when sent). The fields are
// applied to the schedule as stored when the change is written, in one transaction
// (schedules.Service.Edit), so a pause or another PATCH that lands while this body is
// still arriving is not undone by it.
func (a *API) patchSchedule(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var sent schedules.Input
	fields, err := a.readScheduleInput(w, r, &sent, true)
	if err != nil {
		return err
	}
	sc, err := a.cfg.Schedules.Edit(r.Context(), id, func(in *schedules.Input) {
		for name := range fields {
			switch name {
			case "report":
				in.Report = sent.Report
			case "params":
				in.Params = sent.Params
			case "format":
				in.Format = sent.Format
			case "bom":
				in.BOM = sent.BOM
			case "cron":
				in.Cron = sent.Cron
			case "timezone":
				in.TimeZone = sent.TimeZone
			case "deliver":
				in.Deliver = sent.Deliver
			case "paused":
				in.Paused = sent.Paused
			}
		}
	})
	if err != nil {
		return scheduleProblem(err, id)
	}
	problem.WriteJSON(w, http.StatusOK, a.scheduleJSON(r.Context(), sc))
	return nil
}

// deleteSchedule is DELETE /api/v1/schedules/{id}: 204; its past exports stay.
func (a *API) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := a.cfg.Schedules.Delete(r.Context(), id); err != nil {
		return scheduleProblem(err, id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseSchedule and resumeSchedule are POST /api/v1/schedules/{id}/pause and /resume.
func (a *API) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	return a.setPaused(w, r, true)
}

func (a *API) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	return a.setPaused(w, r, false)
}

func (a *API) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	id := r.PathValue("id")
	sc, err := a.cfg.Schedules.SetPaused(r.Context(), id, paused)
	if err != nil {
		return scheduleProblem(err, id)
	}
	problem.WriteJSON(w, http.StatusOK, a.scheduleJSON(r.Context(), sc))
	return nil
}

// previewSchedule is POST /api/v1/schedules/preview: the next runs of a schedule not
// saved, with their parameters resolved, or what is wrong with it.
func (a *API) previewSchedule(w http.ResponseWriter, r *http.Request) error {
	var in schedules.Input
	if _, err := a.readScheduleInput(w, r, &in, false); err != nil {
		return err
	}
	runs, err := a.cfg.Schedules.Preview(r.Context(), in)
	if err != nil {
		return scheduleProblem(err, "")
	}
	problem.WriteJSON(w, http.StatusOK, map[string]any{"next_runs": runs})
	return nil
}

// scheduleFirings is GET /api/v1/schedules/{id}/exports: the exports its firings made,
// the latest 1,000 scheduled times first.
func (a *API) scheduleFirings(w http.ResponseWriter, r *http.Request) error {
	if err := wholeListQuery(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	sc, err := a.cfg.Schedules.Get(r.Context(), id)
	if err != nil {
		return scheduleProblem(err, id)
	}
	jobs, err := a.cfg.Schedules.Firings(r.Context(), sc)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, export.JobJSON(j, ""))
	}
	problem.WriteJSON(w, http.StatusOK, map[string]any{"exports": out})
	return nil
}

// wholeListQuery refuses, for a list that is sent whole (the schedules, a schedule's
// exports), a query string that cannot be read, as the exports list does, and the
// exports list's filters and paging (status, report, limit, cursor): ignored, they
// would answer 200 with everything, a listing the client did not ask for. Other
// parameters are ignored, as there.
func wholeListQuery(r *http.Request) error {
	q, err := listQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	for _, name := range []string{"status", "report", "limit", "cursor"} {
		if q.Has(name) {
			return problem.New(http.StatusBadRequest, "bad_query",
				strconv.Quote(name)+" is not a parameter of "+r.URL.Path+", which answers the whole list (it takes no status, report, limit or cursor)")
		}
	}
	return nil
}
