package webhook

import (
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"sheetq/internal/apiv1"
	"sheetq/jobs"
	"sheetq/store"
)

// Name is the job kind of a webhook delivery.
const Name = "webhook"

// MaxAttempts is a delivery's attempt budget; with DefaultSchedule the attempts spread
// over more than a day.
const MaxAttempts = 8

// Queue is the queue deliveries run in: a lane of their own, so that a delivery, one
// short request, never waits for a worker behind long exports (ARCHITECTURE.md,
// rule 27). The server gives it DefaultWorkers unless [queues.webhooks] says otherwise.
const Queue = "webhooks"

// DefaultWorkers is the size of the webhooks lane when the config file does not set it.
const DefaultWorkers = 2

// priority orders deliveries within their lane; it dates from when they shared the
// exports' workers and is kept so that their order does not change.
const priority = -1

// Event types: a payload's "type", one per final state of an export (docs/api.md, "Webhooks").
const (
	EventExportSucceeded = "export.succeeded"
	EventExportFailed    = "export.failed"
	EventExportCanceled  = "export.canceled"
)

// Timeline event types a webhook writes on its export's events.
const (
	EventQueued    = "webhook_queued"    // a delivery job was created
	EventDelivered = "webhook_delivered" // the receiver answered 2xx
	EventFailed    = "webhook_failed"    // one attempt failed; data says whether another follows
)

// Args is the args of a delivery job.
type Args struct {
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

// Attempt is one delivery attempt as the export's timeline records it (the data of
// webhook_delivered and webhook_failed).
type Attempt struct {
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

// Queued is the data of a webhook_queued event on the export's timeline. The URL stays
// out of it: it may carry a receiver's token.
type Queued struct {
	MessageID string `json:"webhook_id"`
	Event     string `json:"event"`
	// DeliveryJob is the delivery's job id.
	DeliveryJob string `json:"delivery_job"`
}

// accepted is the data of a delivery job's own "accepted" event.
type accepted struct {
	ExportID string `json:"export_id"`
	Event    string `json:"event"`
}

// Payload is the body of a delivery (docs/api.md, "Webhooks"): the event type, when the
// export ended, and the export as the API shows it.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      apiv1.Job `json:"data"`
}

// Announcer creates the delivery that announces a job's final state: its FollowUps is
// the store's follow-up hook (store.Config.FollowUps), so a delivery commits with the
// state it announces (rule 19).
type Announcer struct {
	// BaseURL, when set (scheme://host), is the server's public URL: Describe makes the
	// payload's links absolute with it, since a receiver has no other way to know it.
	BaseURL string
	// Describe is the job as the payload's data shows it: export.JobJSON.
	Describe func(j store.Job, baseURL string) apiv1.Job
}

// FollowUps returns the delivery of job's final state when the job names a webhook
// (store.NewJob.NotifyURL), and none otherwise.
func (a Announcer) FollowUps(job store.Job) ([]store.FollowUp, error) {
	if job.NotifyURL == "" {
		return nil, nil
	}
	var event string
	switch job.Status {
	case store.StatusSucceeded:
		event = EventExportSucceeded
	case store.StatusFailed:
		event = EventExportFailed
	case store.StatusCanceled:
		event = EventExportCanceled
	default:
		return nil, nil
	}
	// The payload's time is the end's, which the store stamped with its clock.
	payload, err := json.Marshal(Payload{Type: event, Timestamp: job.FinishedAt.UTC(), Data: a.Describe(job, a.BaseURL)})
	if err != nil {
		return nil, fmt.Errorf("webhook payload: %w", err)
	}
	msgID := "msg_" + strings.ToLower(crand.Text()) // 128 random bits
	id := jobs.NewID()                              // in creation order, like an export's
	args, err := json.Marshal(Args{ExportID: job.ID, URL: job.NotifyURL, Event: event, MessageID: msgID, Payload: payload})
	if err != nil {
		return nil, fmt.Errorf("webhook args: %w", err)
	}
	acc, err := json.Marshal(accepted{ExportID: job.ID, Event: event})
	if err != nil {
		return nil, err
	}
	queued, err := json.Marshal(Queued{MessageID: msgID, Event: event, DeliveryJob: id})
	if err != nil {
		return nil, err
	}
	return []store.FollowUp{{ID: id, Kind: Name, Args: args, Queue: Queue, Priority: priority, MaxAttempts: MaxAttempts,
		AcceptedData: acc, ParentEvent: EventQueued, ParentData: queued}}, nil
}
