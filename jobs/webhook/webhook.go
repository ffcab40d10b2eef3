// Package webhook is the webhook delivery job kind: it POSTs an export's final state to
// the URL the request named, signed per the Standard Webhooks spec, and retries over
// hours. It owns the kind's name, payload, event names, priority and attempt budget;
// Announcer is the store's follow-up hook that creates a delivery in the transaction
// that makes an export final (rule 19), and Handler delivers it.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sheetq/internal/envref"
	"sheetq/jobs"
)

// DefaultSchedule is the delay after each failed attempt (the last one repeats): with
// MaxAttempts attempts, deliveries spread over about 31 hours.
var DefaultSchedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 14 * time.Hour,
}

// maxRetryAfter bounds how long a receiver's Retry-After may postpone the next attempt.
const maxRetryAfter = 24 * time.Hour

// Settings is the [webhooks] table of the config file.
type Settings struct {
	// Secret signs deliveries: "whsec_" and a base64 key, or "env:NAME" to read it from
	// the environment. Without one, requests carrying a webhook are refused.
	Secret string `toml:"secret"`
	// AllowPrivate lets webhooks reach loopback, private and link-local addresses.
	AllowPrivate bool `toml:"allow_private"`
}

// Config returns the delivery settings with an env:NAME secret read from the environment.
func (s Settings) Config() (Config, error) {
	secret, err := envref.Resolve(s.Secret)
	if err != nil {
		return Config{}, fmt.Errorf("webhooks: secret: %w", err)
	}
	return Config{Secret: secret, AllowPrivate: s.AllowPrivate}, nil
}

// Recorder keeps each delivery attempt on the export's timeline: *store.Store's
// AppendEvent, which knows nothing of webhooks.
type Recorder interface {
	// AppendEvent appends an event of type typ with data to job id's timeline; a job
	// removed meanwhile is skipped.
	AppendEvent(ctx context.Context, id, typ string, data json.RawMessage) error
}

// Config configures deliveries.
type Config struct {
	// Secret is "whsec_" and a base64 key; empty means webhooks are not configured.
	Secret string
	// AllowPrivate lets webhooks reach non-public addresses (tests, a receiver on the LAN).
	AllowPrivate bool
	// Timeout bounds one attempt, from dialling to the end of the response (default 15 s).
	Timeout time.Duration
	// Schedule is the delay after each failed attempt (default DefaultSchedule); each
	// delay gets ±10% jitter.
	Schedule []time.Duration
	// Recorder, if set, receives every attempt.
	Recorder Recorder
	// Logger receives delivery logs (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock for webhook-timestamp and Retry-After dates (default time.Now).
	Now func() time.Time
}

// Handler delivers webhook jobs. It implements jobs.Handler and jobs.Backoffer.
type Handler struct {
	cfg    Config
	key    []byte // nil: not configured
	client *http.Client
}

// New returns a handler for cfg; a secret that does not parse is an error.
func New(cfg Config) (*Handler, error) {
	cfg.Timeout = cmp.Or(cfg.Timeout, 15*time.Second)
	if len(cfg.Schedule) == 0 {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg}
	if cfg.Secret != "" {
		key, err := ParseSecret(cfg.Secret)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		h.key = key
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = dialControl
	}
	h.client = &http.Client{
		Transport: &http.Transport{
			// No proxy from the environment: the address check must see the receiver's
			// address, not a proxy's that would then connect anywhere.
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			MaxIdleConns:          16,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		Timeout: cfg.Timeout,
		// A redirect is not a delivery: only a 2xx counts.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return h, nil
}

// Configured reports whether a secret is set, so that requests may carry a webhook.
func (h *Handler) Configured() bool { return h != nil && h.key != nil }

// CheckURL checks a webhook URL at acceptance under this handler's address policy.
func (h *Handler) CheckURL(ctx context.Context, raw string) error {
	return CheckURL(ctx, raw, h.cfg.AllowPrivate, nil)
}

// Backoff is the delay after failed attempt number attempt: the schedule's entry with
// ±10% jitter, so that many deliveries to one receiver do not retry in lockstep (and a
// later attempt still always waits longer than an earlier one).
func (h *Handler) Backoff(attempt int) time.Duration {
	return Jittered(h.cfg.Schedule, attempt)
}

// Jittered is the delay after failed attempt number attempt on schedule: its entry (the
// last one past its end) with ±10% jitter. Schedule deliveries (jobs/deliver) retry by it
// too.
func Jittered(schedule []time.Duration, attempt int) time.Duration {
	d := schedule[min(max(attempt, 1), len(schedule))-1]
	return d*9/10 + time.Duration(rand.Int64N(int64(d)/5+1))
}

// Run makes one delivery attempt and records it on the export's timeline.
func (h *Handler) Run(ctx context.Context, run *jobs.Run) error {
	var a Args
	if err := json.Unmarshal(run.Args, &a); err != nil {
		return jobs.Permanentf("bad_args", "webhook job args: %v", err)
	}
	status, err := h.deliver(ctx, run.Attempt, a)
	if err != nil && ctx.Err() != nil {
		// Stopped by the engine (shutdown, cancel, lost lease): it decides what the
		// attempt counts as, and a requeued attempt is made again.
		return err
	}
	rec := Attempt{Delivered: err == nil, MessageID: a.MessageID, Event: a.Event,
		Attempt: run.Attempt, MaxAttempts: run.MaxAttempts, StatusCode: status}
	log := h.cfg.Logger.With("export_id", a.ExportID, "webhook_id", a.MessageID, "attempt", run.Attempt, "status_code", status)
	if err != nil {
		var je *jobs.Error
		permanent := errors.As(err, &je) && je.Permanent
		if je != nil {
			rec.Code = je.Code
		}
		rec.Error, rec.WillRetry = err.Error(), !permanent && run.Attempt < run.MaxAttempts
		log.WarnContext(ctx, "webhook delivery failed", "err", err, "will_retry", rec.WillRetry)
	} else {
		log.InfoContext(ctx, "webhook delivered", "event", a.Event)
	}
	if h.cfg.Recorder != nil {
		if rerr := h.record(context.WithoutCancel(ctx), a.ExportID, rec); rerr != nil {
			log.ErrorContext(ctx, "record webhook attempt", "err", rerr)
		}
	}
	return err
}

// record appends an attempt to the export's timeline as webhook_delivered or
// webhook_failed.
func (h *Handler) record(ctx context.Context, exportID string, a Attempt) error {
	typ := EventFailed
	if a.Delivered {
		typ = EventDelivered
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	return h.cfg.Recorder.AppendEvent(ctx, exportID, typ, data)
}

// deliver POSTs the frozen payload once and classifies the outcome: nil for a 2xx, a
// permanent error for 410 Gone or a refused address, a retryable one otherwise.
func (h *Handler) deliver(ctx context.Context, attempt int, a Args) (status int, err error) {
	if !h.Configured() {
		return 0, jobs.Permanentf("not_configured", "webhooks have no secret: set [webhooks] secret in the config file")
	}
	if _, err := ValidateURL(a.URL); err != nil {
		return 0, jobs.Permanent("invalid_url", err)
	}
	now := h.cfg.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(a.Payload))
	if err != nil {
		return 0, jobs.Permanent("invalid_url", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sheetq-webhooks")
	req.Header.Set("webhook-id", a.MessageID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", Sign(h.key, a.MessageID, now, a.Payload))
	res, err := h.client.Do(req)
	if err != nil {
		// url.Error's message quotes the URL, which may carry a receiver's token.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var ne net.Error
		switch {
		case errors.Is(err, ErrNotAllowed):
			return 0, jobs.Permanent("not_allowed", err)
		case errors.As(err, &ne) && ne.Timeout():
			return 0, jobs.Retryable("timeout", fmt.Errorf("no answer within %s: %w", h.cfg.Timeout, err))
		default:
			return 0, jobs.Retryable("network", err)
		}
	}
	defer res.Body.Close()
	// Read a little of the answer for the error message, and drain the rest (bounded) so
	// the connection can be reused.
	snippet, _ := io.ReadAll(io.LimitReader(res.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	status = res.StatusCode
	if status >= 200 && status < 300 {
		return status, nil
	}
	msg := "receiver answered " + res.Status
	if s := strings.Join(strings.Fields(strings.ToValidUTF8(string(snippet), "")), " "); s != "" {
		msg += ": " + s
	}
	if status == http.StatusGone {
		return status, jobs.Permanent("gone", fmt.Errorf("%s (the receiver asks for no more deliveries)", msg))
	}
	delay := h.Backoff(attempt)
	if ra, ok := ParseRetryAfter(res.Header.Get("Retry-After"), now); ok {
		// Retry-After is the least the receiver wants us to wait; it never brings the
		// next attempt forward.
		delay = max(delay, ra)
	}
	return status, jobs.RetryableAfter("http_status", errors.New(msg), delay)
}

// ParseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date. A date in
// the past gives 0 and a delay over 24 h gives 24 h. ok is false when the header is
// absent or malformed.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return maxRetryAfter, true
			}
			return 0, false
		}
		if n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}
