package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sheetq/app/exports"
	"sheetq/app/middleware"
	"sheetq/app/schedules"
	"sheetq/jobs/deliver"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/ui"
)

// The schedule form's fields besides the report's parameters, which are "param." and
// the parameter's name (a report's param names are [a-z0-9_], so they never collide).
const (
	paramPrefix  = "param."
	cronField    = "cron"
	zoneField    = "timezone"
	emailField   = "email"
	webhookField = "webhook"
	folderField  = "folder"
	// passwordField says where the password to encrypt the file with is, for the email
	// and folder targets (deliver.Target.Password): env:SHEETQ_PASSWORD_<NAME> or
	// file:PATH, never the password itself.
	passwordField = "file-password"
	pausedField   = "paused"
	// pausedWasField is the pause as the edit form was first shown.
	pausedWasField = "paused_was"
	deliverField   = "deliver"
	actionField    = "action"
	actionSave     = "save"
	actionPreview  = "preview"
	actionReport   = "report"
)

// newSchedulePage is GET /schedules/new: the form, for ?report= or the first report.
func (p *Pages) newSchedulePage(w http.ResponseWriter, r *http.Request) error {
	in := schedules.Input{Report: r.URL.Query().Get("report"), Cron: "0 6 * * *", TimeZone: "UTC"}
	f := p.scheduleForm(r.Context(), "", in, nil, nil)
	f.Fresh = true
	p.withPreview(r.Context(), &f, in, p.times(r))
	p.render(w, r, http.StatusOK, ui.ScheduleFormPage(p.meta(r.Context(), "schedules", ""), f))
	return nil
}

// editSchedulePage is GET /schedules/{id}/edit: the form with the schedule's values.
func (p *Pages) editSchedulePage(w http.ResponseWriter, r *http.Request) error {
	sc, err := p.loadSchedule(r)
	if err != nil {
		return err
	}
	if sc.Owner == schedules.ConfigOwner {
		return &pageError{status: http.StatusConflict, title: "This schedule is kept in the config file",
			message: sentence(schedules.ErrDeclared.Error()),
			back:    ui.Link{Href: "/schedules/" + sc.ID, Text: "Back to the schedule"}}
	}
	in := schedules.InputOf(sc)
	f := p.scheduleForm(r.Context(), sc.ID, in, nil, nil)
	p.withPreview(r.Context(), &f, in, p.times(r))
	p.render(w, r, http.StatusOK, ui.ScheduleFormPage(p.meta(r.Context(), "schedules", ""), f))
	return nil
}

// createScheduleForm is POST /schedules from the form: Save creates the schedule and goes
// to its page (303); Preview, or a change of report, shows the form again with the next
// runs; wrong values show the form again (422) with the error beside the field.
func (p *Pages) createScheduleForm(w http.ResponseWriter, r *http.Request) error {
	return p.saveScheduleForm(w, r, "")
}

// updateScheduleForm is POST /schedules/{id}/edit, as createScheduleForm for a change.
func (p *Pages) updateScheduleForm(w http.ResponseWriter, r *http.Request) error {
	sc, err := p.loadSchedule(r)
	if err != nil {
		return err
	}
	return p.saveScheduleForm(w, r, sc.ID)
}

func (p *Pages) saveScheduleForm(w http.ResponseWriter, r *http.Request, id string) error {
	if err := readForm(w, r); err != nil {
		return err
	}
	ctx := r.Context()
	m := p.meta(ctx, "schedules", "")
	in, order := p.scheduleInput(r.PostForm)
	switch action := r.PostForm.Get(actionField); action {
	case "", actionSave:
		// Save: below. A form posted without a button's action (a script's) saves too.
	case actionReport:
		// Another report was chosen (without JavaScript, with the button beside the
		// select): its parameters, with their defaults, and the rest as given.
		in.Params = nil
		f := p.scheduleForm(ctx, id, in, nil, nil)
		if was := r.PostForm[pausedWasField]; id != "" && len(was) > 0 {
			// The pause as the form was first shown, not as the box is now: else a box
			// changed before the change of report would read as unchanged when saved.
			f.PausedWas = was[len(was)-1]
		}
		p.withPreview(r.Context(), &f, in, p.times(r))
		p.render(w, r, http.StatusOK, ui.ScheduleFormPage(m, f))
		return nil
	case actionPreview:
		runs, err := p.cfg.Schedules.Preview(r.Context(), in)
		status := http.StatusOK
		var errs map[string]string
		if err != nil {
			if errs, err = p.scheduleErrors(r.Context(), in, err, order); err != nil {
				return err
			}
			status = http.StatusUnprocessableEntity
		}
		f := p.scheduleForm(ctx, id, in, r.PostForm, errs)
		tz := p.times(r)
		f.Previewed, f.Preview, f.PreviewZone = true, previewRuns(runs, tz), tz.Zone
		if errs != nil {
			f.PreviewError = previewError(errs)
		}
		p.render(w, r, status, ui.ScheduleFormPage(m, f))
		return nil
	default:
		// Not one of the form's buttons: what was meant is unknown, so nothing is saved.
		return &pageError{status: http.StatusBadRequest, title: "The form could not be read",
			message: "It asks for " + strconv.Quote(action) + ", which is none of its buttons; nothing was saved. " +
				"Go back to the form and press Save or Preview.",
			back: ui.Link{Href: "/schedules", Text: "Back to the schedules"}}
	}
	var (
		sc  store.Schedule
		err error
	)
	if id == "" {
		sc, err = p.cfg.Schedules.Create(ctx, in, middleware.Principal(ctx))
	} else {
		// The form's fields replace the schedule's, but the pause only if the box was
		// changed: a pause made elsewhere while the form was open stays.
		was, shown := r.PostForm[pausedWasField]
		keepPause := shown && len(was) > 0 && was[len(was)-1] == strconv.FormatBool(in.Paused)
		password := formValue(r.PostForm, passwordField)
		sc, err = p.cfg.Schedules.Edit(ctx, id, func(cur *schedules.Input) {
			paused, prev := cur.Paused, cur.Deliver
			*cur = in
			if keepPause {
				cur.Paused = paused
			}
			cur.Deliver = keepPasswords(in.Deliver, prev, password)
		})
	}
	if err != nil {
		errs, err := p.scheduleErrors(r.Context(), in, err, order)
		if err != nil {
			return err
		}
		f := p.scheduleForm(ctx, id, in, r.PostForm, errs)
		p.render(w, r, http.StatusUnprocessableEntity, ui.ScheduleFormPage(m, f))
		return nil
	}
	http.Redirect(w, r, "/schedules/"+sc.ID, http.StatusSeeOther)
	return nil
}

// schedulePreviewFragment is POST /schedules/preview: the form's next runs, or what is
// wrong, as an HTML fragment the form's script puts in place as fields change.
func (p *Pages) schedulePreviewFragment(w http.ResponseWriter, r *http.Request) error {
	if err := readForm(w, r); err != nil {
		return err
	}
	in, order := p.scheduleInput(r.PostForm)
	tz := p.times(r)
	box := ui.SchedulePreview{Previewed: true, Zone: tz.Zone}
	runs, err := p.cfg.Schedules.Preview(r.Context(), in)
	if err != nil {
		errs, err := p.scheduleErrors(r.Context(), in, err, order)
		if err != nil {
			return err
		}
		box.Error = previewError(errs)
	}
	box.Runs = previewRuns(runs, tz)
	p.render(w, r, http.StatusOK, ui.SchedulePreviewBox(box))
	return nil
}

// readForm reads a posted form, or says why it could not be read.
func readForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, exports.MaxBody)
	if err := r.ParseForm(); err != nil {
		if middleware.BodyTimedOut(err) {
			return &pageError{status: http.StatusRequestTimeout, title: "The form took too long to arrive",
				message: "Go back to the form and submit it again.", close: true}
		}
		if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
			// Sending it again would fail again: say what to change.
			return &pageError{status: http.StatusRequestEntityTooLarge, title: "The form is too large",
				message: fmt.Sprintf("Its values come to more than %d KiB. Go back to the form, shorten the longest and submit it again.",
					tooBig.Limit>>10), close: true}
		}
		return &pageError{status: http.StatusBadRequest, title: "The form could not be read",
			message: "Go back to the form, reload it and submit it again."}
	}
	// url.ParseQuery takes any bytes, and encoding/json would store those that are not
	// UTF-8 as U+FFFD without a word (a text parameter, an email address): refused, as
	// the API refuses such a body. A browser sends the page's UTF-8; this is a script's.
	notUTF8 := func(v string) bool { return !utf8.ValidString(v) }
	for k, vs := range r.PostForm {
		if notUTF8(k) || slices.ContainsFunc(vs, notUTF8) {
			return &pageError{status: http.StatusBadRequest, title: "The form could not be read",
				message: "It has text that is not UTF-8. Send the form encoded as UTF-8, as a browser does."}
		}
	}
	return nil
}

// withPreview adds the next runs of in to a form just drawn; when in cannot run yet (a
// required parameter is empty) the box says what is missing instead.
func (p *Pages) withPreview(ctx context.Context, f *ui.ScheduleForm, in schedules.Input, tz ui.Times) {
	if in.Report == "" {
		return
	}
	runs, err := p.cfg.Schedules.Preview(ctx, in)
	f.Previewed = true
	if err != nil {
		// Every wrong field, as the live preview says them (the form's fields are not
		// marked yet: nothing was submitted).
		if errs, ferr := p.scheduleErrors(ctx, in, err, nil); ferr == nil {
			f.PreviewError = previewError(errs)
		}
		return
	}
	f.Preview, f.PreviewZone = previewRuns(runs, tz), tz.Zone
}

// previewError is the one line the preview box shows for a form's errors.
func previewError(errs map[string]string) string {
	var parts []string
	for _, k := range []string{"report", cronField, zoneField, formatField, emailField, webhookField, folderField, passwordField, deliverField} {
		if e := errs[k]; e != "" {
			parts = append(parts, labelled(fieldName(k), e))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		if name, ok := strings.CutPrefix(k, paramPrefix); ok {
			// The check's own `Param "rows": must be ...` would name it twice.
			msg := errs[k]
			if p := fmt.Sprintf("param %q: ", name); len(msg) >= len(p) && strings.EqualFold(msg[:len(p)], p) {
				msg = msg[len(p):]
			}
			parts = append(parts, name+": "+msg)
		}
	}
	if len(parts) == 0 {
		return "These values cannot be previewed."
	}
	return strings.Join(parts, " ")
}

// labelled puts a field's name in front of its message, unless the message already
// starts with it ("Time zone: Local depends on the server"), which would say it twice.
func labelled(name, message string) string {
	if len(message) > len(name) && strings.EqualFold(message[:len(name)], name) && message[len(name)] == ':' {
		return message
	}
	return name + ": " + message
}

// fieldName names a form's field for a message.
func fieldName(field string) string {
	switch field {
	case cronField:
		return "Cron expression"
	case zoneField:
		return "Time zone"
	case formatField, "format":
		return "File format"
	case emailField:
		return "Email"
	case webhookField:
		return "Webhook"
	case folderField:
		return "Folder"
	case passwordField:
		return "Password"
	case deliverField:
		return "Deliveries"
	case "report":
		return "Report"
	}
	if name, ok := strings.CutPrefix(field, "params."); ok {
		return name
	}
	return strings.TrimPrefix(field, paramPrefix)
}

// scheduleInput reads the form into the service's input; order names the form field
// that made each delivery target, so that an error in deliver[i] marks that field.
func (p *Pages) scheduleInput(form map[string][]string) (schedules.Input, []string) {
	get := func(k string) string { return formValue(form, k) }
	in := schedules.Input{Report: get("report"), Cron: get(cronField), TimeZone: get(zoneField),
		Format: get(formatField), BOM: bomChecked(form[bomField]), Paused: get(pausedField) == "true",
		Params: map[string]any{}}
	if in.Format == export.FormatXLSX {
		in.Format = ""
	}
	if rep, ok := p.report(in.Report); ok {
		named := map[string][]string{}
		for _, prm := range rep.Params {
			if vs, ok := form[paramPrefix+prm.Name]; ok {
				named[prm.Name] = vs
			}
		}
		// The service keeps an int or number given as text as the number it reads as
		// (3, not "3"), as it does the API's and the command line's.
		in.Params = formParams(rep.Params, named, time.UTC)
		for _, prm := range rep.Params {
			if s, ok := in.Params[prm.Name].(string); ok && strings.TrimSpace(s) == "" {
				delete(in.Params, prm.Name) // empty: the report's default, or "required"
			}
		}
	}
	// The password applies to the targets that carry the file; a webhook carries none.
	var targets []deliver.Target
	var order []string
	password := get(passwordField)
	if addrs := splitList(get(emailField)); len(addrs) > 0 {
		targets, order = append(targets, deliver.Target{Type: deliver.TypeEmail, To: addrs, Password: password}), append(order, emailField)
	}
	if u := get(webhookField); u != "" {
		targets, order = append(targets, deliver.Target{Type: deliver.TypeWebhook, URL: u}), append(order, webhookField)
	}
	if dir := get(folderField); dir != "" {
		targets, order = append(targets, deliver.Target{Type: deliver.TypeFolder, Path: dir, Password: password}), append(order, folderField)
	}
	if len(targets) > 0 {
		in.Deliver, _ = json.Marshal(targets)
	}
	return in, order
}

// formValue is the last value of the form's field k, trimmed; "" when not sent.
func formValue(form map[string][]string, k string) string {
	if vs := form[k]; len(vs) > 0 {
		return strings.TrimSpace(vs[len(vs)-1])
	}
	return ""
}

// formPasswords reads the password of the email and the folder target that the form
// shows (the last of each type, as scheduleForm draws them), by type, and the one its
// password field shows: the email's, else the folder's.
func formPasswords(raw json.RawMessage) (byType map[string]string, shown string) {
	var targets []deliver.Target
	_ = json.Unmarshal(raw, &targets)
	byType = map[string]string{}
	for _, t := range targets {
		if t.Type == deliver.TypeEmail || t.Type == deliver.TypeFolder {
			byType[t.Type] = t.Password
		}
	}
	if pw, ok := byType[deliver.TypeEmail]; ok {
		return byType, pw
	}
	return byType, byType[deliver.TypeFolder]
}

// keepPasswords is the targets the edit form made (next), each email and folder target
// with the password the schedule's (prev) of its type had, when the form's one password
// field (password) was left as the form showed it. The form has one field for both, but
// the API may give the email and the folder different passwords: the field shows the
// email's, and the folder's own is kept unless the field is changed, which then applies
// to both. (Telling "left as shown" by the value, not by a hidden copy of what was
// shown, reads the schedule as it is now, in Edit's transaction: a password changed
// through the API while the form was open counts as the field's being changed, and the
// form's value wins, as for every other field.) A target of a type the schedule had
// none of takes the field's value.
func keepPasswords(next, prev json.RawMessage, password string) json.RawMessage {
	had, shown := formPasswords(prev)
	if password != shown {
		return next
	}
	var targets []deliver.Target
	if json.Unmarshal(next, &targets) != nil {
		return next // the service refuses it, with its reason
	}
	kept := false
	for i, t := range targets {
		if pw, ok := had[t.Type]; ok && pw != t.Password {
			targets[i].Password, kept = pw, true
		}
	}
	if !kept {
		return next
	}
	out, err := json.Marshal(targets)
	if err != nil {
		return next
	}
	return out
}

// passwordMessage says whether a target's error is about its password, to be shown
// beside the password field rather than the email's or the folder's: every such message
// of the targets' checks (deliver.Target.Check, the deliveries' reading of it when the
// schedule is saved, the schedules' encryption rules) names the target's "password".
func passwordMessage(msg string) bool { return strings.Contains(msg, `"password"`) }

// passwordError is a target's password error as the form says it beside the field, a
// sentence: without the JSON key that the API's message starts with ("password":
// SHEETQ_PASSWORD_X is not set; "password" says where the password is, ...), and not
// capitalised where it starts with env: or file:, which are written so. Any other
// wording is shown as it is.
func passwordError(msg string) string {
	if rest, ok := strings.CutPrefix(msg, `"password" says `); ok {
		return sentence("write " + rest)
	}
	rest, ok := strings.CutPrefix(msg, `"password": `)
	if !ok {
		return sentence(msg)
	}
	if strings.HasPrefix(rest, "env:") || strings.HasPrefix(rest, "file:") {
		return strings.TrimSuffix(rest, ".") + "."
	}
	return sentence(rest)
}

// shownPassword is the value the password field is drawn with: v when it says where a
// password is (well formed, as deliver.Target.Check reads it), "" otherwise, so that a
// password typed in the field by mistake is never sent back in the page. A reference
// that is not well formed (env:DB_PASSWORD) is not shown back either: it cannot be told
// from a password, and its error says what to write.
func shownPassword(v string) string {
	if v == "" || (deliver.Target{Type: deliver.TypeFolder, Path: "/", Password: v}).Check() != nil {
		return ""
	}
	return v
}

// splitList reads addresses separated by commas, semicolons, spaces or lines.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\n' || r == '\r' || r == '\t'
	})
}

// scheduleErrors turns the service's refusal of in, which names every wrong field
// (schedules.Fields), into errors by form field, with every wrong parameter's
// (moreParamErrors); order names the form field that made each delivery target. Any
// other error is returned as it is.
func (p *Pages) scheduleErrors(ctx context.Context, in schedules.Input, err error, order []string) (map[string]string, error) {
	fields := schedules.Fields(err)
	if len(fields) == 0 {
		return nil, err
	}
	errs := map[string]string{}
	for _, ie := range fields {
		field, msg := deliverField, ie.Message
		switch {
		case ie.Field == "deliver" && ie.Index >= 0 && ie.Index < len(order):
			field = order[ie.Index]
			if (field == emailField || field == folderField) && passwordMessage(msg) {
				field = passwordField
			}
		case strings.HasPrefix(ie.Field, "params."):
			field = paramPrefix + strings.TrimPrefix(ie.Field, "params.")
		case ie.Field == "format":
			field = formatField
		case ie.Field == "timezone", ie.Field == "cron", ie.Field == "report":
			field = ie.Field
		}
		switch {
		case errs[field] != "":
		case field == passwordField:
			errs[field] = passwordError(msg)
		default:
			errs[field] = sentence(msg)
		}
	}
	p.moreParamErrors(ctx, in, errs)
	return errs, nil
}

// moreParamErrors adds the error of every other wrong parameter of in to errs (keyed by
// form field): the service names only the report's first refusal of the parameters, so
// the rest are found as the New export form finds them (everyParamError). With a wrong
// zone or cron expression the service checks no parameter, and neither does this.
func (p *Pages) moreParamErrors(ctx context.Context, in schedules.Input, errs map[string]string) {
	rep, ok := p.report(in.Report)
	if !ok || errs[cronField] != "" || errs[zoneField] != "" {
		return
	}
	byName := map[string]string{}
	for _, prm := range rep.Params {
		if e := errs[paramPrefix+prm.Name]; e != "" {
			byName[prm.Name] = e
		}
	}
	everyParamError(rep, in.Params, byName, func(trial map[string]any) (string, string) {
		t := in
		t.Params, t.Deliver = trial, nil
		_, err := p.cfg.Schedules.Preview(ctx, t)
		for _, ie := range schedules.Fields(err) {
			if name, ok := strings.CutPrefix(ie.Field, "params."); ok {
				return name, sentence(ie.Message)
			}
		}
		return "", ""
	})
	for name, e := range byName {
		errs[paramPrefix+name] = e
	}
}

// scheduleForm draws the form for in: its report's parameters with in's values (their
// defaults where in has none), or the values as sent when form is not nil, with errs.
func (p *Pages) scheduleForm(ctx context.Context, id string, in schedules.Input, form map[string][]string, errs map[string]string) ui.ScheduleForm {
	f := ui.ScheduleForm{ID: id, Errors: errs, Action: "/schedules", Cron: in.Cron, TimeZone: in.TimeZone,
		Format: cmp.Or(in.Format, export.FormatXLSX), BOM: in.BOM, Paused: in.Paused, Zones: commonZones,
		Presets: cronPresets}
	if id != "" {
		f.Action = "/schedules/" + id + "/edit"
		f.PausedWas = strconv.FormatBool(in.Paused)
		if was := form[pausedWasField]; len(was) > 0 {
			f.PausedWas = was[len(was)-1] // shown again after a refusal: as first shown
		}
	}
	for _, e := range p.cfg.Catalog.Entries() {
		if e.Err == nil && p.exports.MayRun(ctx, e.Report) {
			f.Reports = append(f.Reports, ui.ReportOption{ID: e.Report.ID, Title: cmp.Or(e.Report.Title, e.Report.ID)})
		}
	}
	if in.Report == "" && len(f.Reports) > 0 {
		in.Report = f.Reports[0].ID
	}
	if in.Report != "" && !slices.ContainsFunc(f.Reports, func(o ui.ReportOption) bool { return o.ID == in.Report }) {
		// A schedule of a report that is gone or broken: kept, so that saving says so
		// instead of moving the schedule to another report.
		f.Reports = append(f.Reports, ui.ReportOption{ID: in.Report, Title: in.Report + " (cannot be used)"})
	}
	f.Report = in.Report
	f.URL = "/schedules/new?report=" + url.QueryEscape(in.Report)
	if id != "" {
		f.URL = "/schedules/" + id + "/edit"
	}
	var targets []deliver.Target
	_ = json.Unmarshal(in.Deliver, &targets)
	for _, t := range targets {
		switch t.Type {
		case deliver.TypeEmail:
			f.Email = strings.Join(t.To, ", ")
		case deliver.TypeWebhook:
			f.Webhook = t.URL
		case deliver.TypeFolder:
			f.Folder = t.Path
		}
	}
	passwords, shown := formPasswords(in.Deliver)
	f.Password = shownPassword(shown)
	if em, ok := passwords[deliver.TypeEmail]; ok {
		if fo, ok := passwords[deliver.TypeFolder]; ok && fo != em {
			f.PasswordOwn = true // see keepPasswords
		}
	}
	if form != nil {
		// As sent, so that nothing typed is lost, however wrong (but a password typed
		// in the password field by mistake: see shownPassword).
		for _, k := range []string{emailField, webhookField, folderField, passwordField} {
			if vs := form[k]; len(vs) > 0 {
				switch k {
				case emailField:
					f.Email = vs[0]
				case webhookField:
					f.Webhook = vs[0]
				case folderField:
					f.Folder = vs[0]
				case passwordField:
					f.Password = shownPassword(strings.TrimSpace(vs[0]))
				}
			}
		}
	}
	f.EmailSetup, f.FolderSetup = p.deliverySetup()
	rep, err := p.runnable(ctx, in.Report)
	if err != nil {
		return f
	}
	f.Title = cmp.Or(rep.Title, rep.ID)
	f.PasswordRequired = rep.Encrypt
	values := map[string][]string{}
	for k, v := range in.Params {
		if b, isBool := v.(bool); isBool {
			if b {
				values[k] = []string{"true"}
			}
			continue
		}
		values[k] = []string{paramText(v)}
	}
	if form != nil {
		values = map[string][]string{}
		for _, prm := range rep.Params {
			if vs, ok := form[paramPrefix+prm.Name]; ok {
				values[prm.Name] = vs
			}
		}
	} else if len(in.Params) == 0 {
		values = nil // defaults
	}
	for i, fd := range exportForm(rep, values, nil, "", time.UTC).Fields {
		sf := ui.ScheduleField{Field: fd}
		sf.Name = paramPrefix + rep.Params[i].Name
		sf.Error = errs[sf.Name]
		if t := rep.Params[i].Type; t == export.TypeDate || t == export.TypeDatetime {
			// A fixed date or one relative to each firing: text, with examples.
			sf.Input, sf.Relative = "text", true
			sf.Hint = "A date such as 2026-03-01, or one relative to each run: today, today(-7), week_start, month_start(-1)."
			if t == export.TypeDatetime {
				sf.Hint = "A time such as 2026-03-01T00:00:00Z, or midnight of a day relative to each run: today, today(-7), week_start, month_start(-1)."
			}
		}
		if from := rep.Params[i].From; from != "" {
			sf.Locked, sf.Relative, sf.Required, sf.Value, sf.Error = true, false, false, "", ""
			sf.Hint = "Set at each run from the schedule owner's account (" + from + ")."
		}
		f.Fields = append(f.Fields, sf)
	}
	return f
}

// cronPresets are the form's one-click cron expressions.
var cronPresets = []ui.KV{
	{Name: "Daily 06:00", Value: "0 6 * * *"},
	{Name: "Mondays 06:00", Value: "0 6 * * 1"},
	{Name: "1st of the month 06:00", Value: "0 6 1 * *"},
}

// commonZones are offered in the time-zone field; any IANA name may be typed.
var commonZones = []string{
	"UTC", "Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Paris", "Europe/Berlin", "Europe/Madrid",
	"Europe/Rome", "Europe/Amsterdam", "Europe/Zurich", "Europe/Warsaw", "Europe/Athens", "Europe/Helsinki",
	"Europe/Istanbul", "Europe/Moscow", "America/New_York", "America/Chicago", "America/Denver",
	"America/Los_Angeles", "America/Toronto", "America/Mexico_City", "America/Sao_Paulo",
	"America/Argentina/Buenos_Aires", "Africa/Johannesburg", "Africa/Lagos", "Africa/Cairo", "Asia/Dubai",
	"Asia/Kolkata", "Asia/Singapore", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Tokyo", "Asia/Seoul",
	"Australia/Sydney", "Australia/Perth", "Pacific/Auckland",
}

// cronWords says a cron expression in words when it is one of the usual shapes ("every
// day at 06:00", "Mondays at 06:00", "on the 1st of each month at 06:00"); "" otherwise.
func cronWords(expr string) string {
	switch strings.TrimSpace(expr) {
	case "@daily", "@midnight":
		return "every day at 00:00"
	case "@weekly":
		return "Sundays at 00:00"
	case "@monthly":
		return "on the 1st of each month at 00:00"
	case "@hourly":
		return "every hour"
	case "* * * * *":
		return "every minute"
	}
	f := strings.Fields(expr)
	if len(f) != 5 {
		return ""
	}
	minute, err1 := strconv.Atoi(f[0])
	hour, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || minute > 59 || hour > 23 || f[3] != "*" {
		if f[0] != "" && err1 == nil && f[1] == "*" && f[2] == "*" && f[3] == "*" && f[4] == "*" {
			return fmt.Sprintf("every hour at minute %d", minute)
		}
		return ""
	}
	at := fmt.Sprintf("at %02d:%02d", hour, minute)
	days := []string{"Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays"}
	switch dom, dow := f[2], f[4]; {
	case dom == "*" && dow == "*":
		return "every day " + at
	case dom == "*" && (dow == "1-5" || strings.EqualFold(dow, "mon-fri")):
		return "weekdays " + at
	case dom == "*":
		if d, err := strconv.Atoi(dow); err == nil && d >= 0 && d <= 7 {
			return days[d] + " " + at
		}
	case dow == "*":
		if d, err := strconv.Atoi(dom); err == nil && d >= 1 && d <= 31 {
			return "on the " + ordinal(d) + " of each month " + at
		}
	}
	return ""
}

// ordinal writes 1st, 2nd, 3rd, 4th, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}
