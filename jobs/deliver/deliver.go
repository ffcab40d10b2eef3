package deliver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"sheetq/internal/envref"
	"sheetq/internal/officecrypt"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// Name is the job kind of an email or folder delivery (webhook targets become jobs of
// the webhook kind, signed like every other webhook).
const Name = "deliver"

// Queue is the lane deliveries run in: a lane of their own (ARCHITECTURE.md, rule 27),
// so that a delivery never waits behind long exports, and a webhook never waits behind a
// delivery. An attempt may hold its worker up to Config.Timeout (a relay that accepts
// the connection and never answers), which in the webhooks lane delayed other exports'
// webhooks by minutes. The server gives it 2 workers unless [queues.deliveries] says
// otherwise. A delivery queued in "webhooks" by an earlier version still runs there:
// lanes claim by queue, whatever the kind.
const Queue = "deliveries"

// MaxAttempts is a delivery's attempt budget: with DefaultSchedule the attempts spread
// over about a day, long enough for a relay or a mount to come back.
const MaxAttempts = 8

// DefaultSchedule is the delay after each failed attempt (the last one repeats).
var DefaultSchedule = []time.Duration{
	30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 1 * time.Hour, 4 * time.Hour, 12 * time.Hour,
}

// priority orders deliveries within their lane, like a webhook's.
const priority = -1

// Timeline event types a delivery writes on its export's events.
const (
	EventQueued    = "delivery_queued"    // a delivery job was created
	EventDelivered = "delivery_delivered" // the mail was accepted by the relay, or the file is in its folder
	EventFailed    = "delivery_failed"    // one attempt failed; data says whether another follows
)

// Outcomes of an attempt, as the metrics count them.
const (
	OutcomeDelivered = "delivered"
	OutcomeRetrying  = "retrying" // failed, another attempt follows
	OutcomeFailed    = "failed"   // failed for good: permanent, or the last attempt
)

// Args is the args of a delivery job: everything it needs, frozen when the export
// succeeded, so that an attempt reads only the file.
type Args struct {
	// ExportID is the export whose file is delivered.
	ExportID string `json:"export_id"`
	// Target is where it goes (email or folder).
	Target Target `json:"target"`
	// File is the export's file in the file store (store.Job.FileName); Size and
	// SHA256 are what the export recorded.
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// DownloadName is the file's name for people (export.DownloadName) and ContentType
	// its media type.
	DownloadName string `json:"download_name"`
	ContentType  string `json:"content_type"`
	// Title, Report and Params say what the file holds, for the mail's subject and body.
	Title  string         `json:"title"`
	Report string         `json:"report"`
	Params map[string]any `json:"params,omitempty"`
	// Rows is the number of data rows written.
	Rows int64 `json:"rows"`
	// ScheduleID and ScheduledFor name the firing, when a schedule made the export;
	// TimeZone is the schedule's zone, which the mail says ScheduledFor in.
	ScheduleID   string     `json:"schedule_id,omitempty"`
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
	TimeZone     string     `json:"timezone,omitempty"`
	// EncryptRequired is the report's "-- encrypt: required": the file goes nowhere
	// unencrypted, so a target without a password fails instead of sending it plain.
	EncryptRequired bool `json:"encrypt_required,omitempty"`
}

// Encrypted says whether the file is delivered encrypted (the target has a password).
func (a Args) Encrypted() bool { return a.Target.Password != "" }

// Queued is the data of a delivery_queued event on the export's timeline.
type Queued struct {
	// DeliveryJob is the delivery's job id.
	DeliveryJob string `json:"delivery_job"`
	Type        string `json:"type"`
	// Target names where it goes: the addresses or the folder.
	Target string `json:"target"`
}

// Attempt is one delivery attempt as the export's timeline records it (the data of
// delivery_delivered and delivery_failed).
type Attempt struct {
	Delivered   bool   `json:"-"`
	DeliveryJob string `json:"delivery_job"`
	Type        string `json:"type"`
	Target      string `json:"target"`
	// Attempt counts this delivery's attempts from 1, out of MaxAttempts.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// Mode is how an email carried the file: "attachment" or "link".
	Mode string `json:"mode,omitempty"`
	// Code and Error say why a failed attempt failed.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// WillRetry tells whether another attempt follows a failed one.
	WillRetry bool `json:"will_retry,omitempty"`
}

// accepted is the data of a delivery job's own "accepted" event.
type accepted struct {
	ExportID string `json:"export_id"`
	Type     string `json:"type"`
}

// describe names a target for people and the timeline (never a webhook's URL, which may
// carry a token).
func describe(t Target) string {
	switch t.Type {
	case TypeEmail:
		s := ""
		for i, a := range t.To {
			if i > 0 {
				s += ", "
			}
			s += a
		}
		return s
	case TypeFolder:
		return t.Path
	}
	return t.Type
}

// Planner creates the deliveries of a successful export that names targets
// (export.Args.Deliver): its FollowUps is a store follow-up hook (store.FollowUpFunc), so
// the deliveries commit with the success (rule 19).
type Planner struct {
	// Webhook returns the webhook delivery announcing job's end to job.NotifyURL:
	// webhook.Announcer's FollowUps. Nil: webhook targets are refused.
	Webhook store.FollowUpFunc
}

// FollowUps returns one delivery job per target of job when it is an export that has
// just SUCCEEDED with targets, and none otherwise.
func (p Planner) FollowUps(job store.Job) ([]store.FollowUp, error) {
	if job.Kind != export.Name || job.Status != store.StatusSucceeded {
		return nil, nil
	}
	var a export.Args
	if err := json.Unmarshal(job.Args, &a); err != nil {
		return nil, nil // not an export's args we can read: nothing to deliver
	}
	// Targets were checked when the schedule was saved. The list is read here without
	// the checks and bounds that saving applies, one target at a time: a schedule saved
	// before a bound was added (more recipients, a longer URL) still delivers, and a
	// target that no longer checks fails as its own delivery, with the reason on the
	// export's timeline, instead of every target vanishing without a word. A list that
	// does not parse at all must not make the export's success fail to commit.
	var targets []Target
	if len(a.Deliver) == 0 || json.Unmarshal(a.Deliver, &targets) != nil || len(targets) == 0 {
		return nil, nil
	}
	title := a.Report
	if a.Spec != nil && a.Spec.Title != "" {
		title = a.Spec.Title
	}
	var fus []store.FollowUp
	for _, t := range targets {
		if t.Type == TypeWebhook {
			if p.Webhook == nil {
				continue
			}
			j := job
			j.NotifyURL = t.URL
			w, err := p.Webhook(j)
			if err != nil {
				return nil, err
			}
			fus = append(fus, w...)
			continue
		}
		id := jobs.NewID()
		args, err := json.Marshal(Args{ExportID: job.ID, Target: t, File: job.FileName, Size: job.FileSize, SHA256: job.FileSHA256,
			DownloadName: export.DownloadName(a, job), ContentType: a.ContentType(), Title: title, Report: a.Report,
			Params: a.Params, Rows: job.ProgressRows, ScheduleID: a.ScheduleID, ScheduledFor: a.ScheduledFor, TimeZone: a.TimeZone,
			EncryptRequired: a.EncryptRequired()})
		if err != nil {
			return nil, fmt.Errorf("delivery args: %w", err)
		}
		acc, err := json.Marshal(accepted{ExportID: job.ID, Type: t.Type})
		if err != nil {
			return nil, err
		}
		queued, err := json.Marshal(Queued{DeliveryJob: id, Type: t.Type, Target: describe(t)})
		if err != nil {
			return nil, err
		}
		fus = append(fus, store.FollowUp{ID: id, Kind: Name, Args: args, Queue: Queue, Priority: priority,
			MaxAttempts: MaxAttempts, AcceptedData: acc, ParentEvent: EventQueued, ParentData: queued})
	}
	return fus, nil
}

// Recorder keeps each attempt on the export's timeline: the store's AppendEvent.
type Recorder interface {
	AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error
}

// Config configures deliveries.
type Config struct {
	// SMTP is the relay emails go through; without a host, email deliveries fail
	// with a clear error.
	SMTP SMTP
	// Folders are the roots folder targets may be in (Settings.Folders); none: folder
	// deliveries are refused.
	Folders []string
	// AttachLimit is the largest file attached to an email (default DefaultAttachLimit);
	// a larger one is sent as a link.
	AttachLimit int64
	// BaseURL is the server's public URL (scheme://host), which links point to; without
	// it, a file over AttachLimit cannot be sent.
	BaseURL string
	// PasswordFolders are the folders (and the folders below them) that a target's
	// file:PATH password may be read from; none: only env:SHEETQ_PASSWORD_<NAME>.
	PasswordFolders []string
	// Files is the file store exports are read from.
	Files jobs.Files
	// Recorder, if set, receives every attempt.
	Recorder Recorder
	// Observe, if set, counts every attempt by target type and outcome (the metrics).
	Observe func(typ, outcome string)
	// Schedule is the delay after each failed attempt (default DefaultSchedule), with
	// ±10% jitter.
	Schedule []time.Duration
	// Timeout bounds one attempt (default 2 minutes).
	Timeout time.Duration
	// Logger receives delivery logs (default slog.Default()).
	Logger *slog.Logger
	// Now is the mail's Date (default time.Now).
	Now func() time.Time
}

// DefaultAttachLimit is Config.AttachLimit's default: 10 MB.
const DefaultAttachLimit = 10 << 20

// Handler delivers email and folder jobs. It implements jobs.Handler and jobs.Backoffer.
type Handler struct {
	cfg Config
}

// New returns a handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Files == nil {
		return nil, errors.New("deliveries: no file store")
	}
	cfg.AttachLimit = cmp.Or(cfg.AttachLimit, DefaultAttachLimit)
	cfg.Timeout = cmp.Or(cfg.Timeout, 2*time.Minute)
	if len(cfg.Schedule) == 0 {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for i, root := range cfg.Folders {
		if err := checkRoot(root); err != nil {
			return nil, fmt.Errorf("deliveries: folders[%d]: %w", i, err)
		}
	}
	for i, root := range cfg.PasswordFolders {
		if err := checkRoot(root); err != nil {
			return nil, fmt.Errorf("deliveries: password_folders[%d]: %w", i, err)
		}
	}
	if err := cfg.SMTP.check(); err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg}, nil
}

// Config returns the handler's configuration with its defaults applied.
func (h *Handler) Config() Config { return h.cfg }

// CheckTarget says whether this server can deliver to t: a folder under an allowed
// root, an email with an SMTP relay configured. The schedules call it when a schedule is
// saved, so that a mistake shows then rather than at the first firing.
func (h *Handler) CheckTarget(t Target) error {
	if err := t.Check(); err != nil {
		return err
	}
	if t.Password != "" {
		// Read now, so that a variable not set or a file not there shows when the
		// schedule is saved rather than at its first firing.
		if _, err := h.password(t); err != nil {
			return err
		}
	}
	switch t.Type {
	case TypeFolder:
		return CheckFolder(t.Path, h.cfg.Folders)
	case TypeEmail:
		if h.cfg.SMTP.Host == "" {
			return errors.New("email delivery needs an SMTP relay: set [smtp] host in the config file")
		}
	}
	return nil
}

// CanEmail says whether this server has a mail relay ([smtp] host): the schedule form
// shows the config lines to add when it has none.
func (h *Handler) CanEmail() bool { return h.cfg.SMTP.Host != "" }

// CanCopy says whether this server allows any folder ([deliveries] folders).
func (h *Handler) CanCopy() bool { return len(h.cfg.Folders) > 0 }

// Backoff is the delay after failed attempt number attempt: the schedule's entry with
// ±10% jitter.
func (h *Handler) Backoff(attempt int) time.Duration {
	return webhook.Jittered(h.cfg.Schedule, attempt)
}

// Run makes one delivery attempt and records it on the export's timeline and in the
// metrics.
func (h *Handler) Run(ctx context.Context, run *jobs.Run) error {
	var a Args
	if err := json.Unmarshal(run.Args, &a); err != nil {
		return jobs.Permanentf("bad_args", "delivery job args: %v", err)
	}
	actx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	mode, err := h.deliver(actx, run.JobID, a)
	cancel()
	if err != nil && ctx.Err() != nil {
		// Stopped by the engine (shutdown, cancel, lost lease): it decides what the
		// attempt counts as.
		return err
	}
	rec := Attempt{Delivered: err == nil, DeliveryJob: run.JobID, Type: a.Target.Type, Target: describe(a.Target),
		Attempt: run.Attempt, MaxAttempts: run.MaxAttempts, Mode: mode}
	log := h.cfg.Logger.With("export_id", a.ExportID, "delivery_job", run.JobID, "type", a.Target.Type, "attempt", run.Attempt)
	outcome := OutcomeDelivered
	if err != nil {
		var je *jobs.Error
		permanent := errors.As(err, &je) && je.Permanent
		if je != nil {
			rec.Code = je.Code
		}
		rec.Error, rec.WillRetry = err.Error(), !permanent && run.Attempt < run.MaxAttempts
		outcome = OutcomeFailed
		if rec.WillRetry {
			outcome = OutcomeRetrying
		}
		log.WarnContext(ctx, "delivery failed", "err", err, "will_retry", rec.WillRetry)
	} else {
		log.InfoContext(ctx, "delivered", "target", rec.Target, "mode", mode)
	}
	if h.cfg.Observe != nil {
		h.cfg.Observe(a.Target.Type, outcome)
	}
	if h.cfg.Recorder != nil {
		typ := EventFailed
		if rec.Delivered {
			typ = EventDelivered
		}
		if data, merr := json.Marshal(rec); merr == nil {
			if rerr := h.cfg.Recorder.AppendEvent(context.WithoutCancel(ctx), a.ExportID, typ, data); rerr != nil {
				log.ErrorContext(ctx, "record delivery attempt", "err", rerr)
			}
		}
	}
	return err
}

// password reads the password t names (its "password": env:SHEETQ_PASSWORD_<NAME>, or
// file:PATH under one of Config.PasswordFolders) and checks that it can protect a file.
// No error quotes it.
func (h *Handler) password(t Target) (string, error) {
	if err := checkPasswordRef(t.Password); err != nil {
		return "", err
	}
	if path, ok := strings.CutPrefix(t.Password, "file:"); ok {
		if err := CheckFolder(filepath.Dir(path), h.cfg.PasswordFolders); err != nil {
			return "", fmt.Errorf(`"password": %s is not in [deliveries] password_folders, the folders password files may be read from`, path)
		}
	}
	pw, err := envref.Secret(t.Password, "")
	if err != nil {
		return "", fmt.Errorf(`"password": %w`, err)
	}
	if err := officecrypt.CheckPassword(pw); err != nil {
		return "", fmt.Errorf(`"password": the password read from %s cannot protect a file: %w`, t.Password, err)
	}
	return pw, nil
}

// deliver makes one attempt; mode is how an email carried the file.
func (h *Handler) deliver(ctx context.Context, jobID string, a Args) (mode string, err error) {
	switch {
	case a.EncryptRequired && !a.Encrypted():
		return "", jobs.Permanentf("encryption_required",
			`report %q hands out its files only encrypted: give the schedule's target a "password" (env:SHEETQ_PASSWORD_<NAME> or file:PATH)`, a.Report)
	case a.Encrypted() && a.ContentType != "" && !strings.Contains(a.ContentType, "spreadsheetml"):
		return "", jobs.Permanentf("not_encryptable", `a csv file cannot be encrypted: make the schedule's exports xlsx, or leave out the target's "password"`)
	}
	switch a.Target.Type {
	case TypeEmail:
		return h.email(ctx, jobID, a)
	case TypeFolder:
		return "", h.folder(ctx, a)
	}
	return "", jobs.Permanentf("bad_target", "a delivery job cannot deliver to a %q target", a.Target.Type)
}
