package deliver

import (
	"encoding/json"
	"time"

	"sheetq/jobs/webhook"
	"sheetq/store"
)

// Status is where one delivery of an export stands, as its timeline tells it.
type Status struct {
	// Job is the delivery's job id.
	Job string
	// Type is email, folder or webhook.
	Type string
	// Target names where it goes (addresses or folder; empty for a webhook, whose URL
	// stays off the timeline).
	Target string
	// State is "queued", "delivered", "retrying" (the last attempt failed, another
	// follows) or "failed" (for good).
	State string
	// At is when the state was recorded.
	At time.Time
	// Attempt is the last attempt's number (0 before the first); Error says why it
	// failed.
	Attempt int
	Error   string
}

// Failed reports whether the delivery failed for good.
func (s Status) Failed() bool { return s.State == OutcomeFailed }

// Statuses reads an export's timeline (store's Events of the export, in order) and
// returns where each of its deliveries stands, in the order they were queued: a
// schedule's page shows "the last delivery failed: ..." from the latest firing's.
// Webhook deliveries (webhook_* events) are included, keyed by their webhook-id.
func Statuses(events []store.Event) []Status {
	var out []Status
	at := map[string]int{}
	set := func(key string, s Status) {
		if i, ok := at[key]; ok {
			if s.Type == "" {
				s.Type = out[i].Type
			}
			if s.Target == "" {
				s.Target = out[i].Target
			}
			if s.Job == "" {
				s.Job = out[i].Job
			}
			out[i] = s
			return
		}
		at[key] = len(out)
		out = append(out, s)
	}
	for _, e := range events {
		switch e.Type {
		case EventQueued:
			var q Queued
			if json.Unmarshal(e.Data, &q) == nil {
				set(q.DeliveryJob, Status{Job: q.DeliveryJob, Type: q.Type, Target: q.Target, State: "queued", At: e.At})
			}
		case EventDelivered, EventFailed:
			var a Attempt
			if json.Unmarshal(e.Data, &a) == nil {
				set(a.DeliveryJob, Status{Job: a.DeliveryJob, Type: a.Type, Target: a.Target, State: state(e.Type == EventDelivered, a.WillRetry),
					At: e.At, Attempt: a.Attempt, Error: a.Error})
			}
		case webhook.EventQueued:
			var q webhook.Queued
			if json.Unmarshal(e.Data, &q) == nil {
				set(q.MessageID, Status{Job: q.DeliveryJob, Type: TypeWebhook, State: "queued", At: e.At})
			}
		case webhook.EventDelivered, webhook.EventFailed:
			var a webhook.Attempt
			if json.Unmarshal(e.Data, &a) == nil {
				set(a.MessageID, Status{Type: TypeWebhook, State: state(e.Type == webhook.EventDelivered, a.WillRetry),
					At: e.At, Attempt: a.Attempt, Error: a.Error})
			}
		}
	}
	return out
}

func state(delivered, willRetry bool) string {
	switch {
	case delivered:
		return OutcomeDelivered
	case willRetry:
		return OutcomeRetrying
	}
	return OutcomeFailed
}
