package web

import (
	"strings"
	"testing"
	"time"

	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/ui"
)

func TestAttemptInfo(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		job  store.Job
		want string
	}{
		{"first attempt waiting", store.Job{Status: store.StatusPending, MaxAttempts: 3}, ""},
		{"first attempt running", store.Job{Status: store.StatusProcessing, Attempt: 1, MaxAttempts: 3}, ""},
		{"waiting to retry", store.Job{Status: store.StatusPending, Attempt: 1, MaxAttempts: 3, RunAt: now.Add(40 * time.Second)},
			"retrying, attempt 2 of 3, next try in 40 s"},
		{"retry due", store.Job{Status: store.StatusPending, Attempt: 2, MaxAttempts: 3, RunAt: now},
			"attempt 3 of 3, waiting for a worker"},
		// Recovered after a crash: run_at long past, it waits for a worker, not a time.
		{"recovered", store.Job{Status: store.StatusPending, Attempt: 1, MaxAttempts: 3, RunAt: now.Add(-time.Hour)},
			"attempt 2 of 3, waiting for a worker"},
		{"second attempt running", store.Job{Status: store.StatusProcessing, Attempt: 2, MaxAttempts: 3}, "retrying, attempt 2 of 3"},
		{"gave up", store.Job{Status: store.StatusFailed, Attempt: 3, MaxAttempts: 3}, "gave up after attempt 3 of 3"},
		{"succeeded on a retry", store.Job{Status: store.StatusSucceeded, Attempt: 2, MaxAttempts: 3}, "took 2 attempts"},
		// Run again by hand after failing 3 of 3: a fresh budget of 3, counted from there.
		{"run again by hand, waiting", store.Job{Status: store.StatusPending, Attempt: 3, AttemptBase: 3, MaxAttempts: 6}, ""},
		{"run again by hand, running", store.Job{Status: store.StatusProcessing, Attempt: 4, AttemptBase: 3, MaxAttempts: 6}, ""},
		{"run again by hand, retrying", store.Job{Status: store.StatusPending, Attempt: 4, AttemptBase: 3, MaxAttempts: 6, RunAt: now.Add(40 * time.Second)},
			"retrying, attempt 2 of 3, next try in 40 s"},
		{"run again by hand, gave up", store.Job{Status: store.StatusFailed, Attempt: 6, AttemptBase: 3, MaxAttempts: 6}, "gave up after attempt 3 of 3"},
	} {
		if got := attemptInfo(tc.job, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTimelineWords(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		typ, data string
		attempt   int
		wantText  string
		wantIn    string
	}{
		{store.EventAttemptFailed, `{"code":"upstream","message":"503 from shop","permanent":false,"retry_at":"2026-01-02T10:00:40Z"}`, 1,
			"Attempt 1 failed; it will be tried again", "upstream: 503 from shop"},
		{store.EventFailed, `{"code":"bad_params","message":"from after to","permanent":true}`, 1,
			"Attempt 1 failed; trying again would not help", "from after to"},
		{store.EventRecovered, `{"code":"lost","message":"no heartbeat from w1"}`, 2,
			"Heartbeat of attempt 2 lost; recovered and queued again", "no heartbeat from w1"},
		{store.EventRecovered, `{"code":"lost","message":"heartbeat lost (worker w1, last heartbeat 2026-01-02T10:00:02Z)"}`, 2,
			"Heartbeat of attempt 2 lost; recovered and queued again", "last heartbeat 2026-01-02 10:00:02)"},
		{webhook.EventFailed, `{"attempt":1,"max_attempts":5,"status_code":500,"error":"server error"}`, 1,
			"Webhook attempt 1 of 5 failed", "answered 500"},
		{store.EventSucceeded, `{"rows":1200,"size":2400}`, 1, "Attempt 1 succeeded", "1,200 rows, 2.4 kB"},
		{store.EventStarted, `{"worker":"host/42"}`, 1, "Attempt 1 started", "on worker host/42"},
		{store.EventAttemptFailed, `{"code":"x","message":"y","permanent":false,"retry_at":"2026-01-02T10:00:40Z"}`, 1,
			"Attempt 1 failed; it will be tried again", "(next try at 2026-01-02 10:00:40)"},
		{store.EventFailed, `{"code":"lost","message":"no heartbeat"}`, 3, "Heartbeat of attempt 3 lost; no attempts left", "lost: no heartbeat"},
		{store.EventCanceled, `{"reason":"export a deleted"}`, 1, "Canceled", "export a deleted"},
		{store.EventCanceled, `{"code":"source","message":"down","permanent":false}`, 1, "Canceled", "source: down"},
		{store.EventRequeued, `{"reason":"server shutting down"}`, 1, "Put back in the queue (server shutting down); the attempt does not count", "server shutting down"},
		{store.EventRetried, `{"from":"FAILED","max_attempts":6}`, 3, "Run again by request", "was FAILED; up to 6 attempts in all"},
		{store.EventResumed, `{"rows":1234566}`, 2, "Attempt 2 resumed from row 1,234,567", "the 1,234,566 rows before it were kept from the last checkpoint"},
		{webhook.EventQueued, `{"webhook_id":"msg_1","event":"export.succeeded","delivery_job":"d"}`, 1, "Webhook queued", "export.succeeded"},
		{webhook.EventDelivered, `{"event":"export.failed","attempt":2,"max_attempts":8,"status_code":204}`, 1, "Webhook delivered", "export.failed, answered 204"},
	} {
		it := timelineItem(store.Event{Type: tc.typ, Attempt: tc.attempt, At: at, Data: []byte(tc.data)}, ui.TimesIn(time.UTC, at))
		if it.Text != tc.wantText || !strings.Contains(it.Detail, tc.wantIn) || it.Type != tc.typ {
			t.Errorf("%s: %q / %q, want %q / containing %q", tc.typ, it.Text, it.Detail, tc.wantText, tc.wantIn)
		}
	}
}
