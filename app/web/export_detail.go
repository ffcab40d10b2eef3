package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"sheetq/app/audit"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/ui"
)

// exportPage is GET /exports/{id}: the export's state, parameters, timings, file and
// timeline, with the actions that apply.
func (p *Pages) exportPage(w http.ResponseWriter, r *http.Request) error {
	m := p.meta(r.Context(), "", r.PathValue("id")) // before reading: the stream replays what follows it
	j, err := p.loadPageJob(r)
	if err != nil {
		return err
	}
	return p.renderExport(w, r, m, j, http.StatusOK, ui.EncryptForm{})
}

// renderExport writes export j's page with status; form is the state of its "Download
// with a password" (the error of the last try).
func (p *Pages) renderExport(w http.ResponseWriter, r *http.Request, m ui.Meta, j store.Job, status int, form ui.EncryptForm) error {
	evs, err := p.store.Events(r.Context(), j.ID)
	if err != nil {
		return err
	}
	d := p.jobDetail(j, evs, p.store.Now(), p.times(r))
	switch {
	case form.Error == "":
	case d.Encrypt != nil:
		form.Open = true
		*d.Encrypt = form
	default:
		d.FileError = form.Error
	}
	p.render(w, r, status, ui.ExportDetail(m, d))
	return nil
}

// cancelExportForm is POST /exports/{id}/cancel from the job page's button.
func (p *Pages) cancelExportForm(w http.ResponseWriter, r *http.Request) error {
	j, err := p.loadPageJob(r)
	if err != nil {
		return err
	}
	// Canceling a job that has ended in the meantime changes nothing; its page says so.
	if err := p.exports.Record(r.Context(), audit.ExportCanceled, j, "asked on the export's page, while "+string(j.Status)); err != nil {
		return err
	}
	if _, err := p.engine.Cancel(r.Context(), j.ID); err != nil && !errors.Is(err, store.ErrFinished) {
		return err
	}
	http.Redirect(w, r, "/exports/"+j.ID, http.StatusSeeOther)
	return nil
}

// retryExportForm is POST /exports/{id}/retry from the job page's button.
func (p *Pages) retryExportForm(w http.ResponseWriter, r *http.Request) error {
	j, err := p.loadPageJob(r)
	if err != nil {
		return err
	}
	// Already running again (a double click) is no error: the page shows where it is.
	if err := p.exports.Record(r.Context(), audit.ExportRetried, j, "asked on the export's page, while "+string(j.Status)); err != nil {
		return err
	}
	if _, err := p.exports.Retry(r.Context(), j.ID); err != nil && !errors.Is(err, store.ErrNotRetryable) {
		return err
	}
	http.Redirect(w, r, "/exports/"+j.ID, http.StatusSeeOther)
	return nil
}

// jobDetail is the job page's content as of now, its times written by tz.
func (p *Pages) jobDetail(j store.Job, evs []store.Event, now time.Time, tz ui.Times) ui.JobDetail {
	jj := export.JobJSON(j, "")
	d := ui.JobDetail{Row: p.jobRow(j, now, tz), Warnings: j.Warnings, Zone: tz.Zone,
		CanCancel: j.Status == store.StatusPending || j.Status == store.StatusProcessing,
		CanRetry:  j.Status == store.StatusFailed || j.Status == store.StatusCanceled,
		CanDelete: j.Status.Final()}
	if _, ok := p.report(jj.Report); ok {
		d.RunAgainURL = runAgainURL(jj.Report, jj.Params, jj.Format, jj.BOM, jj.CSVFormulas)
	}
	if jj.ScheduleID != "" && jj.ScheduledFor != nil {
		d.ScheduleID, d.ScheduledFor, d.ScheduledText = jj.ScheduleID, ui.ISO(*jj.ScheduledFor), tz.ClockNamed(*jj.ScheduledFor)
	}
	rep, _ := p.report(jj.Report)
	for _, k := range paramOrder(jj.Params, rep.Params) {
		pv := ui.ParamValue{Name: k, Label: k, Value: paramText(jj.Params[k])}
		if i := slices.IndexFunc(rep.Params, func(prm export.Param) bool { return prm.Name == k }); i >= 0 && rep.Params[i].Label != "" {
			pv.Label = rep.Params[i].Label
		}
		d.Params = append(d.Params, pv)
	}
	if jj.File != nil {
		d.FileName, d.FileSize, d.FileSHA = jj.File.Name, ui.Size(jj.File.Size)+" ("+ui.Count(jj.File.Size)+" bytes)", jj.File.SHA256
		if p.cfg.EncryptedFile != nil && jj.Format == export.FormatXLSX {
			d.Encrypt = &ui.EncryptForm{Open: d.Row.EncryptOnly}
		}
	}
	if jj.Error != nil {
		d.ErrorCode, d.ErrorMessage = jj.Error.Code, jj.Error.Message
		d.Advice = advice(jj.Error.Code, j.Attempt)
	}
	d.Row.Created = tz.ClockNamed(j.CreatedAt) // a field of its own, not a table's row
	d.Waited, d.Ran, d.Total = timings(j, evs, now)
	for _, e := range evs {
		d.Timeline = append(d.Timeline, timelineItem(e, tz))
	}
	return d
}

// runAgainURL opens the New export form filled in: the report, each parameter under
// its own name (queryField: "param.format" for a param named format), the format, bom=1
// when the file had a byte order mark, and csv_formulas=keep when it kept formulas (the
// form's contract for query values).
func runAgainURL(report string, params map[string]any, format string, bom bool, csvFormulas string) string {
	v := url.Values{"report": {report}}
	for k, val := range params {
		if val != nil {
			v.Set(queryField(k), paramText(val))
		}
	}
	if format != "" {
		v.Set("format", format)
	}
	if bom {
		v.Set("bom", "1")
	}
	if csvFormulas != "" {
		v.Set("csv_formulas", csvFormulas)
	}
	return "/exports/new?" + v.Encode()
}

// paramText writes a parameter value as it was given.
func paramText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// timings says how long the job waited before its first start, how long its attempts
// ran in all, and how long it took from request to end (so far, and live, if not ended).
func timings(j store.Job, evs []store.Event, now time.Time) (waited, ran, total ui.Elapsed) {
	end := now
	if j.Status.Final() && !j.FinishedAt.IsZero() {
		end = j.FinishedAt
	}
	var firstStart time.Time
	var running time.Duration
	var start time.Time // of the attempt in progress along the events
	for _, e := range evs {
		// finished_at and the final event's time are stamped apart: never show a run
		// longer than the whole.
		if j.Status.Final() && e.At.After(end) {
			end = e.At
		}
		switch e.Type {
		case store.EventStarted:
			if firstStart.IsZero() {
				firstStart = e.At
			}
			start = e.At
		case store.EventSucceeded, store.EventCompletedFromFile, store.EventAttemptFailed, store.EventFailed,
			store.EventRecovered, store.EventCanceled, store.EventRequeued:
			if !start.IsZero() {
				running += e.At.Sub(start)
				start = time.Time{}
			}
		}
	}
	runningNow := !start.IsZero() && j.Status == store.StatusProcessing
	if runningNow {
		running += now.Sub(start)
	}
	final := j.Status.Final()
	switch {
	case !firstStart.IsZero():
		waited = elapsed(firstStart.Sub(j.CreatedAt), false)
	case j.Status == store.StatusPending:
		waited = elapsed(now.Sub(j.CreatedAt), true)
	default:
		waited = ui.Elapsed{Text: "never started"}
	}
	ran = ui.Elapsed{Text: "not yet"}
	if running > 0 || !firstStart.IsZero() {
		ran = elapsed(running, runningNow)
		if !final && !runningNow {
			ran.Text += " so far"
		}
	}
	total = elapsed(end.Sub(j.CreatedAt), !final)
	return waited, ran, total
}

// elapsed is d in words; live ones say "so far" and tick on in the page.
func elapsed(d time.Duration, live bool) ui.Elapsed {
	d = max(d, 0)
	if !live {
		return ui.Elapsed{Text: ui.Duration(d)}
	}
	return ui.Elapsed{Text: ui.Duration(d) + " so far", MS: d.Milliseconds(), Live: true, Suffix: " so far"}
}

// advice says what to do about a failed export, by error code.
func advice(code string, attempts int) string {
	switch code {
	case "bad_params", "bad_args":
		return "The parameters do not fit the report (it may have changed). Start a new export with corrected values."
	case "unknown_report":
		return "The report no longer exists. Pick another one on the New export page, or restore its file."
	case "unknown_source":
		return "The report's source is not named in the config file (sheetq.toml). Add it, restart sheetq, then press Run again."
	case "lost":
		return "The worker stopped answering (a crash or an overloaded machine). Press Run again; if it keeps happening, look at the server log."
	case "stalled":
		return "The export made no progress for too long, so sheetq stopped it. Check that the data source answers, then press Run again."
	case "disk_full":
		return "The disk holding the data directory is full. Free some space (old exports can be deleted), then press Run again."
	case "io":
		return "Writing the file failed. Check the free disk space of the data directory, then press Run again."
	case "panic":
		return "sheetq hit a bug while running this export. Press Run again; if it repeats, report it with the server log."
	}
	return fmt.Sprintf("The data source failed (%d attempts). Check that it is reachable and its credentials are right, then press Run again.", attempts)
}

// timelineItem says one stored event in words.
// Its times are written by tz, without the zone, which the timeline's heading names:
// those in the event's data from the data (a retry's time), those inside a message
// (a recovery's "last heartbeat 2026-12-07T00:27:02Z") found in the text.
func timelineItem(e store.Event, tz ui.Times) ui.TimelineItem {
	// Each event type's data has its writer's type (store/eventdata.go, and the webhook
	// kind's for webhook_*); data that does not decode leaves the fields empty, and the
	// line says less rather than nothing.
	var (
		started store.StartedData
		file    store.FileData
		failure store.FailureData // also reads a lost attempt's LostData: code and message
		reason  store.ReasonData
		retried store.RetriedData
		resumed store.ResumedData
		queued  webhook.Queued
		hook    webhook.Attempt
	)
	switch e.Type {
	case store.EventStarted:
		_ = e.Decode(&started)
	case store.EventSucceeded:
		_ = e.Decode(&file)
	case store.EventAttemptFailed, store.EventFailed, store.EventRecovered:
		_ = e.Decode(&failure)
	case store.EventCanceled:
		_ = e.Decode(&reason)
		_ = e.Decode(&failure)
	case store.EventRequeued:
		_ = e.Decode(&reason)
	case store.EventRetried:
		_ = e.Decode(&retried)
	case store.EventResumed:
		_ = e.Decode(&resumed)
	case webhook.EventQueued:
		_ = e.Decode(&queued)
	case webhook.EventDelivered, webhook.EventFailed:
		_ = e.Decode(&hook)
	}
	att := strconv.Itoa(e.Attempt)
	it := ui.TimelineItem{Type: e.Type, At: tz.Clock(e.At), ISO: e.At.UTC().Format(time.RFC3339Nano)}
	why := tz.InText(failure.Message)
	if failure.Code != "" {
		why = failure.Code + ": " + why
	}
	switch e.Type {
	case store.EventAccepted:
		it.Text, it.Detail = "Accepted", "waiting for a free worker"
	case store.EventStarted:
		it.Text = "Attempt " + att + " started"
		if started.Worker != "" {
			it.Detail = "on worker " + started.Worker
		}
	case store.EventSucceeded:
		it.Text, it.Tone = "Attempt "+att+" succeeded", "ok"
		it.Detail = ui.Count(file.Rows) + " rows, " + ui.Size(file.Size)
	case store.EventCompletedFromFile:
		it.Text, it.Tone = "Completed from the file attempt "+att+" had written before a restart", "ok"
	case store.EventAttemptFailed:
		it.Text, it.Tone, it.Detail = "Attempt "+att+" failed; it will be tried again", "warn", why
		if failure.RetryAt != nil {
			it.Detail += " (next try at " + tz.Clock(*failure.RetryAt) + ")"
		}
	case store.EventFailed:
		it.Text, it.Tone, it.Detail = "Attempt "+att+" failed; giving up", "bad", why
		if failure.Code == "lost" {
			it.Text = "Heartbeat of attempt " + att + " lost; no attempts left"
		} else if failure.Permanent {
			it.Text = "Attempt " + att + " failed; trying again would not help"
		}
	case store.EventRecovered:
		it.Text, it.Tone, it.Detail = "Heartbeat of attempt "+att+" lost; recovered and queued again", "warn", tz.InText(failure.Message)
	case store.EventCancelRequested:
		it.Text = "Cancel requested"
	case store.EventCanceled:
		it.Text, it.Detail = "Canceled", tz.InText(reason.Reason)
		if it.Detail == "" && failure.Message != "" {
			it.Detail = why
		}
	case store.EventRequeued:
		it.Text, it.Detail = "Put back in the queue (server shutting down); the attempt does not count", tz.InText(reason.Reason)
	case store.EventResumed:
		it.Text, it.Tone = "Attempt "+att+" resumed from row "+ui.Count(resumed.Rows+1), "ok"
		it.Detail = "the " + ui.Count(resumed.Rows) + " rows before it were kept from the last checkpoint, not read again"
	case store.EventRetried:
		it.Text = "Run again by request"
		it.Detail = "was " + string(retried.From) + "; up to " + strconv.Itoa(retried.MaxAttempts) + " attempts in all"
	case store.EventExpired:
		it.Text, it.Tone = "File removed after the retention period", "bad"
	case webhook.EventQueued:
		it.Text, it.Detail = "Webhook queued", queued.Event
	case webhook.EventDelivered:
		it.Text, it.Tone = "Webhook delivered", "ok"
		it.Detail = hook.Event + ", answered " + strconv.Itoa(hook.StatusCode)
	case webhook.EventFailed:
		it.Text, it.Tone = "Webhook attempt "+strconv.Itoa(hook.Attempt)+" of "+strconv.Itoa(hook.MaxAttempts)+" failed", "warn"
		it.Detail = tz.InText(hook.Error)
		if hook.StatusCode != 0 {
			it.Detail = "answered " + strconv.Itoa(hook.StatusCode) + ". " + it.Detail
		}
	default:
		it.Text = e.Type
	}
	return it
}
