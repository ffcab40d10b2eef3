package store

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// WebhookKind is the job kind of a webhook delivery. The store creates these jobs itself,
// in the transaction that makes an export final, so that a crash cannot lose the
// notification.
const WebhookKind = "webhook"

// WebhookMaxAttempts is a webhook delivery's attempt budget; with the delivery's own
// backoff the attempts spread over more than a day.
const WebhookMaxAttempts = 8

// webhookPriority puts deliveries before exports in the claim order: a delivery is one
// short request and should not wait behind a queue of long exports.
const webhookPriority = -1

// Webhook event types: the payload's "type", one per final export state.
const (
	WebhookExportSucceeded = "export.succeeded"
	WebhookExportFailed    = "export.failed"
	WebhookExportCanceled  = "export.canceled"
)

// Event types a webhook writes on its export's timeline.
const (
	EventWebhookQueued    = "webhook_queued"    // a delivery job was created
	EventWebhookDelivered = "webhook_delivered" // the receiver answered 2xx
	EventWebhookFailed    = "webhook_failed"    // one attempt failed; data says whether another follows
)

// WebhookArgs is the args of a webhook delivery job.
type WebhookArgs struct {
	// ExportID is the job whose final state is announced.
	ExportID string `json:"export_id"`
	// URL is where the payload is POSTed.
	URL string `json:"url"`
	// Event is the payload's type, such as export.succeeded.
	Event string `json:"event"`
	// MessageID is the webhook-id header: the same on every attempt, so that a receiver
	// can drop duplicates.
	MessageID string `json:"webhook_id"`
	// Payload is the request body, frozen when the export became final.
	Payload json.RawMessage `json:"payload"`
}

// WebhookAttempt is one delivery attempt as the export's timeline records it.
type WebhookAttempt struct {
	// Delivered is true when the receiver answered 2xx.
	Delivered bool `json:"-"`
	// MessageID is the delivery's webhook-id.
	MessageID string `json:"webhook_id"`
	// Event is the payload's type.
	Event string `json:"event"`
	// Attempt counts this delivery's attempts from 1, out of MaxAttempts.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// StatusCode is the receiver's HTTP status; 0 when no response arrived.
	StatusCode int `json:"status_code,omitempty"`
	// Code and Error say why a failed attempt failed.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// WillRetry tells whether another attempt follows a failed one.
	WillRetry bool `json:"will_retry,omitempty"`
}

// webhookPayload is the body of a delivery (README, "Webhooks").
type webhookPayload struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	ID          string          `json:"id"`
	Status      Status          `json:"status"`
	Report      string          `json:"report,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	CreatedAt   time.Time       `json:"created_at"`
	FinishedAt  time.Time       `json:"finished_at"`
	Error       *webhookError   `json:"error,omitempty"`
	File        *webhookFile    `json:"file,omitempty"`
	DownloadURL string          `json:"download_url,omitempty"`
	Warnings    []string        `json:"warnings,omitempty"`
}

type webhookError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type webhookFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// enqueueWebhookTx creates the delivery job announcing job's final state, inside the
// transaction that made it final. It does nothing for a job without a webhook or one
// that is not in a final state a webhook announces (EXPIRED is not announced).
func (s *Store) enqueueWebhookTx(ctx context.Context, tx *sql.Tx, job Job) error {
	var event string
	switch job.Status {
	case StatusSucceeded:
		event = WebhookExportSucceeded
	case StatusFailed:
		event = WebhookExportFailed
	case StatusCanceled:
		event = WebhookExportCanceled
	default:
		return nil
	}
	var url sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT webhook_url FROM jobs WHERE id = ?`, job.ID).Scan(&url); err != nil {
		return fmt.Errorf("webhook of %s: %w", job.ID, err)
	}
	if url.String == "" {
		return nil
	}
	now := s.now()
	payload, err := json.Marshal(webhookPayloadFor(job, event, now, s.baseURL))
	if err != nil {
		return fmt.Errorf("webhook payload: %w", err)
	}
	msgID := "msg_" + randomID()
	args, err := json.Marshal(WebhookArgs{ExportID: job.ID, URL: url.String, Event: event,
		MessageID: msgID, Payload: payload})
	if err != nil {
		return fmt.Errorf("webhook args: %w", err)
	}
	id := NewID() // in creation order, like an export's (id.go)
	if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, kind, args, status, priority, run_at, max_attempts, created_at)
		VALUES (?, ?, ?, 'PENDING', ?, ?, ?, ?)`,
		id, WebhookKind, string(args), webhookPriority, ms(now), WebhookMaxAttempts, ms(now)); err != nil {
		return fmt.Errorf("enqueue webhook: %w", err)
	}
	if err := s.addEvent(ctx, tx, id, EventAccepted, StatusPending, 0,
		map[string]any{"export_id": job.ID, "event": event}); err != nil {
		return err
	}
	// The URL stays out of the timeline: it may carry a receiver's token.
	return s.addEvent(ctx, tx, job.ID, EventWebhookQueued, job.Status, job.Attempt,
		map[string]any{"webhook_id": msgID, "event": event, "delivery_job": id})
}

// webhookPayloadFor describes a final job the way the API does, minus what only the app
// knows (the download name). base, when set, makes the download link absolute: a
// receiver has no other way to know where the server is.
func webhookPayloadFor(job Job, event string, now time.Time, base string) webhookPayload {
	var args struct {
		Report string          `json:"report"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(job.Args, &args) // a kind without these fields leaves them empty
	d := webhookData{
		ID: job.ID, Status: job.Status, Report: args.Report, Params: args.Params,
		Attempt: job.Attempt, MaxAttempts: job.MaxAttempts,
		CreatedAt: job.CreatedAt, FinishedAt: job.FinishedAt, Warnings: job.Warnings,
	}
	if job.ErrorCode != "" && job.Status != StatusSucceeded {
		d.Error = &webhookError{Code: job.ErrorCode, Message: job.ErrorMessage}
	}
	if job.Status == StatusSucceeded && job.FileName != "" {
		d.File = &webhookFile{Name: job.FileName, Size: job.FileSize, SHA256: job.FileSHA256}
		d.DownloadURL = base + "/api/v1/exports/" + job.ID + "/file"
	}
	return webhookPayload{Type: event, Timestamp: now.UTC(), Data: d}
}

// RecordWebhookAttempt appends a delivery attempt to the export's events, as
// webhook_delivered or webhook_failed. An export removed by retention is skipped.
func (s *Store) RecordWebhookAttempt(ctx context.Context, exportID string, a WebhookAttempt) error {
	typ := EventWebhookFailed
	if a.Delivered {
		typ = EventWebhookDelivered
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		// The event takes the export's own status and attempt: it sits on that timeline.
		_, err := tx.ExecContext(ctx, `INSERT INTO job_events (job_id, at, type, status, attempt, data)
			SELECT id, ?, ?, status, attempt, ? FROM jobs WHERE id = ?`, ms(s.now()), typ, string(data), exportID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	return nil
}

// randomID is 128 random bits in lower-case base32, like the engine's job ids.
func randomID() string { return strings.ToLower(crand.Text()) }
