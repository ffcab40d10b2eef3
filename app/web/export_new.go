package web

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sheetq/app/access"
	"sheetq/app/exports"
	"sheetq/app/problem"
	"sheetq/jobs/export"
	"sheetq/ui"
)

// newExportPage is GET /exports/new: the report chooser, or with ?report= that report's form.
func (p *Pages) newExportPage(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.URL.Query().Get("report")
	if id == "" {
		var choices []ui.ReportChoice
		for _, e := range p.cfg.Catalog.Entries() {
			if !p.exports.MayRunEntry(ctx, e) {
				continue
			}
			c := ui.ReportChoice{ID: e.Report.ID, Title: cmp.Or(e.Report.Title, e.Report.ID), Description: e.Report.Description}
			if e.Err != nil {
				c.Broken, c.File = e.Err.Error(), e.File
			}
			choices = append(choices, c)
		}
		p.render(w, r, http.StatusOK, ui.ChooseReport(p.meta(ctx, "new", ""), choices))
		return nil
	}
	rep, err := p.runnable(ctx, id)
	if err != nil {
		return reportUnusable(id, err)
	}
	loc, _ := viewerZone(r)
	var form map[string][]string
	if q := r.URL.Query(); len(q) > 1 {
		form = prefill(rep, q, loc)
	}
	f := exportForm(rep, form, nil, newFormKey(), loc)
	lockAccountFields(ctx, &f, rep)
	p.withEstimate(ctx, &f, rep, form, loc)
	p.render(w, r, http.StatusOK, ui.NewExport(p.meta(ctx, "new", ""), f))
	return nil
}

// runnable is the catalog's report id, when the viewer may run it; otherwise the error
// of a report that does not exist (a report they may not run does not, for them).
func (p *Pages) runnable(ctx context.Context, id string) (export.Report, error) {
	rep, err := p.cfg.Catalog.Report(id)
	if err == nil && !p.exports.MayRun(ctx, rep) {
		return export.Report{}, fmt.Errorf("%w: %q", export.ErrUnknownReport, id)
	}
	return rep, err
}

// lockAccountFields shows each of rep's from=person.<attr> parameters as the viewer's
// attribute, read-only, or says that their account lacks it.
func lockAccountFields(ctx context.Context, f *ui.ExportForm, rep export.Report) {
	who := access.From(ctx)
	for i, prm := range rep.Params {
		if prm.From == "" || i >= len(f.Fields) {
			continue
		}
		fd := &f.Fields[i]
		fd.Locked, fd.Required = true, false
		if v, ok := who.Attr(prm.From); ok {
			fd.Value, fd.Hint = v, "From your account ("+prm.From+"): you see only these rows."
		} else {
			fd.Value = ""
			fd.Error = "Your account has no " + strconv.Quote(prm.From) + ", which this report needs: you cannot run it until an admin sets it."
		}
	}
}

// withEstimate adds the estimate of the values a form shows: form's, or rep's defaults
// when form is nil, its times read in loc. The estimate is a help, not the form: when it
// cannot be read the form is shown without it.
func (p *Pages) withEstimate(ctx context.Context, f *ui.ExportForm, rep export.Report, form map[string][]string, loc *time.Location) {
	if form == nil {
		form = prefill(rep, nil, loc)
	}
	e, err := p.estimate(ctx, rep, formParams(rep.Params, form, loc), f.Format)
	if err != nil {
		p.cfg.Log.WarnContext(ctx, "estimate an export", "report", rep.ID, "err", err)
		return
	}
	f.Estimate = &e
}

// prefill turns the query of /exports/new?report=ID&NAME=VALUE...&format=csv&bom=1&csv_formulas=keep (the
// export page's "Run again with changes") into the form's values: a parameter named in
// the query (under its queryField) takes its value as given, even a wrong one (Start export marks it), the
// others keep their defaults; keys that name no parameter are ignored. A value given
// twice counts as the posted form counts it: the first, and a box's last (formBool). A
// datetime is shown in loc, the viewer's zone, as its field takes it.
func prefill(rep export.Report, q map[string][]string, loc *time.Location) map[string][]string {
	form := map[string][]string{}
	for _, p := range rep.Params {
		vs, sent := q[queryField(p.Name)]
		sent = sent && len(vs) > 0
		switch {
		case p.Type == export.TypeBool:
			on := p.Default != nil && fmt.Sprint(p.Default) == "true"
			if sent {
				on = formBool(vs) == true
			}
			if on {
				form[p.Name] = []string{"true"}
			}
		case sent:
			v := vs[0]
			if p.Type == export.TypeDatetime {
				v = datetimeLocal(v, loc)
			}
			form[p.Name] = []string{v}
		case p.Default != nil:
			v := fmt.Sprint(p.Default)
			if p.Type == export.TypeDatetime {
				v = datetimeLocal(v, loc)
			}
			form[p.Name] = []string{v}
		}
	}
	if vs := q["format"]; len(vs) > 0 {
		form[formatField] = []string{vs[0]}
	}
	if bomChecked(q["bom"]) {
		form[bomField] = []string{"true"}
	}
	if keepChecked(q["csv_formulas"]) {
		form[formulasField] = []string{export.CSVKeep}
	}
	return form
}

// datetimeLocal writes an RFC 3339 time as a datetime-local input takes it: in loc, the
// viewer's zone, without the zone (the form reads a time without a zone in that zone,
// formParams); anything else stays as given.
func datetimeLocal(v string, loc *time.Location) string {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return v
	}
	t = t.In(loc)
	if t.Second() != 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04")
}

// reportUnusable is the page that says why a report's form cannot be shown.
func reportUnusable(id string, err error) *pageError {
	if errors.Is(err, export.ErrUnknownReport) {
		return &pageError{status: http.StatusNotFound, title: "No such report",
			message: "There is no report " + strconv.Quote(id) + ". Pick one from the list on the New export page.",
			back:    ui.Link{Href: "/exports/new", Text: "Pick a report"}}
	}
	return &pageError{status: http.StatusUnprocessableEntity, title: "This report cannot be used",
		message: "Its file has an error: " + err.Error() + ". Fix the file; the Reports page shows when it loads again."}
}

// submitExportForm is POST /exports from the form: the same validation and enqueue as
// the API, with the form's hidden idempotency key, so a double submit gives one job.
// Valid input goes to the job's page (303); invalid input shows the form again (422)
// with an error beside each wrong field and every value kept.
func (p *Pages) submitExportForm(w http.ResponseWriter, r *http.Request) error {
	if err := readForm(w, r); err != nil {
		return err
	}
	ctx := r.Context()
	id := r.PostForm.Get("report")
	rep, err := p.runnable(ctx, id)
	if err != nil {
		return reportUnusable(id, err)
	}
	form := byParam(rep, r.PostForm)
	loc, _ := viewerZone(r)
	key, ok := exports.IdempotencyKey(http.Header{"Idempotency-Key": r.PostForm["idempotency_key"]})
	if !ok || key == "" {
		// The key is part of the form; a missing one means a form from elsewhere or an
		// old page: show a fresh form with the values given.
		key = newFormKey()
		f := exportForm(rep, form, nil, key, loc)
		lockAccountFields(ctx, &f, rep)
		f.FormError = "The form was incomplete. Check the values and start the export again."
		p.withEstimate(ctx, &f, rep, form, loc)
		p.render(w, r, http.StatusUnprocessableEntity, ui.NewExport(p.meta(ctx, "new", ""), f))
		return nil
	}
	// Foreground only around validation and enqueueing: not while the form arrives or a
	// page is written, as for the API (app/api createExport).
	endForeground := p.cfg.Gate.Foreground()
	defer endForeground()
	params := formParams(rep.Params, form, loc)
	format, bom, keep := r.PostForm.Get(formatField), bomChecked(r.PostForm[bomField]), keepChecked(r.PostForm[formulasField])
	file := export.FileOptions{Format: format, BOM: bom}
	if keep {
		file.CSVFormulas = export.CSVKeep
	}
	args, prob := p.exports.Validate(ctx, rep.ID, params, file)
	if prob != nil {
		fieldErrs := p.fieldErrors(ctx, rep, params)
		// Checked on its own too, so that a wrong format shows beside wrong params; the
		// API's detail names its JSON fields, the form names its own.
		if _, err := (export.Args{}).WithFile(file); err != nil {
			fieldErrs[formatField] = "Choose Excel workbook or CSV."
			if format != export.FormatCSV {
				switch {
				case bom && keep:
					fieldErrs[formatField] = "A byte order mark and kept formulas are only for CSV files: choose CSV, or clear the boxes below."
				case bom:
					fieldErrs[formatField] = "A byte order mark is only for CSV files: choose CSV, or clear the box below."
				case keep:
					fieldErrs[formatField] = "Kept formulas are only for CSV files: choose CSV, or clear the box below."
				}
			}
		}
		if rep.Encrypt && format == export.FormatCSV {
			fieldErrs[formatField] = "This report's files are handed out only encrypted with a password, which a CSV file cannot be: Excel workbook is chosen instead."
		}
		endForeground()
		f := exportForm(rep, form, fieldErrs, key, loc)
		lockAccountFields(ctx, &f, rep)
		if len(fieldErrs) == 0 {
			f.FormError = prob.Detail
		}
		p.withEstimate(ctx, &f, rep, form, loc)
		p.render(w, r, http.StatusUnprocessableEntity, ui.NewExport(p.meta(ctx, "new", ""), f))
		return nil
	}
	job, _, err := p.exports.Enqueue(ctx, args, "", key)
	endForeground()
	if prob, ok := problem.As(err); ok && prob.Code == "idempotency_key_reused" {
		// The key was used for other values: this form was submitted before and then
		// changed. A fresh key lets the user start the changed export deliberately.
		f := exportForm(rep, form, nil, newFormKey(), loc)
		lockAccountFields(ctx, &f, rep)
		f.FormError = "This form was already used to start an export with other values (see /exports/" + prob.Job +
			"). Check the values and press Start export again to start another one."
		p.withEstimate(ctx, &f, rep, form, loc)
		p.render(w, r, http.StatusUnprocessableEntity, ui.NewExport(p.meta(ctx, "new", ""), f))
		return nil
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/exports/"+job.ID, http.StatusSeeOther)
	return nil
}

// The form's fields for the file's format, BOM and csv formulas
// (exports.Service.Validate). A param's name has no '-' (a report file's param names are
// [a-z0-9_]), so these never collide with one.
const (
	formatField   = "file-format"
	bomField      = "file-bom"
	formulasField = "file-csv-formulas"
)

// formField is the name of a parameter's field in the New export form: its own name,
// or "param." and its name when the form uses that name itself (the hidden report id
// and idempotency key), so that a report's param named "report" keeps what was typed.
func formField(name string) string {
	if name == "report" || name == "idempotency_key" {
		return paramPrefix + name
	}
	return name
}

// queryField is formField for the query of /exports/new, whose own names are report,
// format, bom and csv_formulas (runAgainURL writes it, prefill reads it).
func queryField(name string) string {
	if name == "report" || name == "format" || name == "bom" || name == "csv_formulas" {
		return paramPrefix + name
	}
	return name
}

// byParam reads a posted form or the estimate's query into values by parameter name
// (each from its formField), with the format, BOM and formulas fields as sent.
func byParam(rep export.Report, form map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, k := range []string{formatField, bomField, formulasField} {
		if vs, ok := form[k]; ok {
			out[k] = vs
		}
	}
	for _, p := range rep.Params {
		if vs, ok := form[formField(p.Name)]; ok && p.From == "" {
			out[p.Name] = vs // a from=person.<attr> value is the account's, never the form's
		}
	}
	return out
}

// bomChecked reads the BOM checkbox's values as the form is shown again and as it is
// submitted: the last one sent counts.
func bomChecked(vs []string) bool {
	on, _ := formBool(vs).(bool) // 1, on, yes as for a bool parameter; any other word: no BOM
	return on
}

// keepChecked reads the box that keeps a csv file's formulas, and the prefill query's
// csv_formulas, as bomChecked reads its box: its own value "keep", or a word that checks
// a box (1, on, yes, true), keeps them; anything else neutralises, the safe default.
func keepChecked(vs []string) bool {
	if len(vs) > 0 && strings.EqualFold(strings.TrimSpace(vs[len(vs)-1]), export.CSVKeep) {
		return true
	}
	on, _ := formBool(vs).(bool)
	return on
}

// formParams reads the declared params from a form. An unchecked checkbox sends nothing,
// which for a bool means false, not "use the default". A datetime written without a zone,
// as a datetime-local field sends it, is a time in loc, the zone the form showed it in
// (issue 37: the viewer's), and is passed on in RFC 3339; any other value as sent.
func formParams(decl []export.Param, form map[string][]string, loc *time.Location) map[string]any {
	out := map[string]any{}
	for _, p := range decl {
		if p.From != "" {
			continue // the account's (export.Kind.ValidateAs)
		}
		vs, ok := form[p.Name]
		switch {
		case p.Type == export.TypeBool:
			out[p.Name] = formBool(vs)
		case ok && len(vs) > 0 && p.Type == export.TypeDatetime:
			out[p.Name] = zonedDatetime(vs[0], loc)
		case ok && len(vs) > 0:
			out[p.Name] = vs[0]
		}
	}
	return out
}

// datetimeHint says which zone a datetime field's value is in.
func datetimeHint(loc *time.Location) string {
	if loc == time.UTC {
		return "In UTC."
	}
	return "In " + ui.TimesIn(loc, time.Now()).Zone + ", your time zone."
}

// zonedDatetime is v, a datetime-local field's value ("2025-03-01T06:00", seconds
// optional), as the RFC 3339 time it names in loc; a value with a zone, or not of that
// shape, is returned as given for the report's check.
func zonedDatetime(v string, loc *time.Location) string {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, strings.TrimSpace(v), loc); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return v
}

// formBool reads a bool parameter's field as the form starts it and shows it again: the
// last value sent, unchecked (none, "") false and the box's "true" true. A script's
// other words are read as the report's check reads them (1, on, yes; 0, off, no); any
// other is returned as sent, for the check to refuse beside the field instead of the
// box taking it as checked.
func formBool(vs []string) any {
	if len(vs) == 0 {
		return false
	}
	v := vs[len(vs)-1]
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "false", "0", "off", "no":
		return false
	case "true", "1", "on", "yes":
		return true
	}
	return v
}

// fieldErrors finds the error of every wrong parameter of the New export form, by name.
func (p *Pages) fieldErrors(ctx context.Context, rep export.Report, params map[string]any) map[string]string {
	errs := map[string]string{}
	attr := access.From(ctx).Attr
	everyParamError(rep, params, errs, func(trial map[string]any) (string, string) {
		_, err := p.exports.Kind.ValidateAs(rep.ID, trial, attr)
		if pe := (*export.ParamError)(nil); errors.As(err, &pe) {
			return pe.Param, sentence(pe.Message)
		}
		return "", ""
	})
	return errs
}

// everyParamError adds to errs (by parameter name) the error of every wrong parameter in
// params, not only the first: a report's check stops at the first, which first returns
// for trial ("" when none is wrong). So each wrong value, those already in errs too, is
// set aside (replaced by a placeholder, a value of its type that passes) and the rest
// checked again.
func everyParamError(rep export.Report, params map[string]any, errs map[string]string, first func(trial map[string]any) (param, message string)) {
	trial := map[string]any{}
	maps.Copy(trial, params)
	for range len(rep.Params) + 1 {
		for _, prm := range rep.Params {
			if errs[prm.Name] != "" {
				trial[prm.Name] = placeholder(prm)
			}
		}
		name, msg := first(trial)
		if name == "" || errs[name] != "" {
			return
		}
		errs[name] = msg
	}
}

// placeholder is a value of p's type within its bounds, standing in for a wrong one.
func placeholder(p export.Param) any {
	if p.Default != nil {
		return p.Default
	}
	switch p.Type {
	case export.TypeInt, export.TypeNumber:
		v := 0.0
		if p.Min != nil {
			v = *p.Min
		} else if p.Max != nil && *p.Max < 0 {
			v = *p.Max
		}
		if p.Type == export.TypeInt {
			return fmt.Sprintf("%.0f", v)
		}
		return v
	case export.TypeDate:
		return "2000-01-01"
	case export.TypeDatetime:
		return "2000-01-01T00:00:00Z"
	case export.TypeBool:
		return false
	}
	return "x"
}

// sentence capitalises an error message for a form: "must be an integer" → "Must be an integer."
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	b := []byte(msg)
	if b[0] >= 'a' && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	if b[len(b)-1] != '.' {
		b = append(b, '.')
	}
	return string(b)
}

// exportForm builds the form of rep: defaults, or the values sent (form, when not nil),
// with the errors by field.
func exportForm(rep export.Report, form map[string][]string, errs map[string]string, key string, loc *time.Location) ui.ExportForm {
	f := ui.ExportForm{Report: rep.ID, Title: cmp.Or(rep.Title, rep.ID), Description: rep.Description, Key: key,
		Format: export.FormatXLSX, FormatError: errs[formatField], EncryptOnly: rep.Encrypt}
	if form != nil {
		if vs := form[formatField]; len(vs) > 0 {
			f.Format = vs[0]
		}
		f.BOM = bomChecked(form[bomField])
		f.KeepFormulas = keepChecked(form[formulasField])
	}
	if f.EncryptOnly && f.Format == export.FormatCSV {
		// csv is not offered: the form shows the choice it will send.
		f.Format, f.BOM = export.FormatXLSX, false
	}
	for _, p := range rep.Params {
		fd := ui.Field{Name: formField(p.Name), Label: cmp.Or(p.Label, p.Name), Required: p.Default == nil, Error: errs[p.Name]}
		def := ""
		if p.Default != nil {
			def = fmt.Sprint(p.Default)
		}
		switch p.Type {
		case export.TypeInt:
			fd.Input, fd.Step = "number", "1"
		case export.TypeNumber:
			fd.Input, fd.Step = "number", "any"
		case export.TypeDate:
			fd.Input = "date"
		case export.TypeDatetime:
			fd.Input, fd.Hint = "datetime-local", datetimeHint(loc)
		case export.TypeBool:
			fd.Input = "checkbox"
			fd.Checked = def == "true"
		default:
			fd.Input = "text"
		}
		if p.Min != nil {
			fd.Min = strconv.FormatFloat(*p.Min, 'f', -1, 64)
		}
		if p.Max != nil {
			fd.Max = strconv.FormatFloat(*p.Max, 'f', -1, 64)
		}
		switch {
		case p.Min != nil && p.Max != nil:
			fd.Hint = "From " + num(*p.Min) + " to " + num(*p.Max) + "."
		case p.Min != nil:
			fd.Hint = "At least " + num(*p.Min) + "."
		case p.Max != nil:
			fd.Hint = "At most " + num(*p.Max) + "."
		}
		if fd.Error != "" && fd.Hint != "" && isRangeError(fd.Error) {
			// The value is out of bounds: one message with the bounds as the hint
			// writes them, instead of raw numbers above the same bounds again.
			fd.Error, fd.Hint = "Must be "+strings.ToLower(fd.Hint[:1])+fd.Hint[1:], ""
		}
		fd.Value = def
		if form != nil {
			vs, sent := form[p.Name]
			if p.Type == export.TypeBool {
				fd.Checked = formBool(vs) == true
			} else if sent && len(vs) > 0 {
				fd.Value = vs[0]
			}
		}
		if p.Type == export.TypeDatetime && form == nil {
			fd.Value = datetimeLocal(fd.Value, loc) // a default, shown in the viewer's zone
		}
		f.Fields = append(f.Fields, fd)
	}
	return f
}

// isRangeError says whether a field's error is the out-of-bounds one of
// export.Param's range check ("must be between 0 and 10000000"), which the field's
// hint says better.
func isRangeError(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.HasPrefix(msg, "must be between ") || strings.HasPrefix(msg, "must be at least ") ||
		strings.HasPrefix(msg, "must be at most ")
}

// num writes a bound for people: 10,000,000, or 0.5.
func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return ui.Count(int64(f))
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// newFormKey is a fresh idempotency key for one rendering of the form.
func newFormKey() string { return "form-" + rand.Text() }
