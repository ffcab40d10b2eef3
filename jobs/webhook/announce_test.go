package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"sheetq/jobs/webhook"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// deliveries returns the webhook delivery jobs in the store, oldest first.
func deliveries(t *testing.T, st *store.Store) []store.Job {
	t.Helper()
	list, err := st.List(context.Background(), store.ListOptions{Kind: webhook.Name, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	return list
}

func webhookArgs(t *testing.T, j store.Job) webhook.Args {
	t.Helper()
	var a webhook.Args
	if err := json.Unmarshal(j.Args, &a); err != nil {
		t.Fatalf("delivery args %s: %v", j.Args, err)
	}
	return a
}

// Every way a job can end announces it exactly once, with a delivery job created in the
// transaction that made it final; retries and other non-final transitions announce
// nothing.
func TestFinalTransitionsEnqueueOneWebhook(t *testing.T) {
	const url = "https://hooks.example.com/sheetq?token=x"
	ctx := context.Background()
	file := store.FileResult{Name: "f.xlsx", Size: 10, SHA256: "abc", Rows: 3}
	cases := []struct {
		name        string
		maxAttempts int
		end         func(t *testing.T, st *store.Store, id string) // from PROCESSING, attempt 1
		status      store.Status
		event       string
	}{
		{"succeed", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Succeed(ctx, id, 1, file, nil)
			check(t, err)
		}, store.StatusSucceeded, webhook.EventExportSucceeded},
		{"complete from file", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.CompleteFromFile(ctx, id, 1, file)
			check(t, err)
		}, store.StatusSucceeded, webhook.EventExportSucceeded},
		{"permanent failure", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Fail(ctx, id, 1, store.AttemptError{Code: "bad_params", Message: "no", Permanent: true}, time.Hour)
			check(t, err)
		}, store.StatusFailed, webhook.EventExportFailed},
		{"retry then last attempt fails", 2, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Fail(ctx, id, 1, store.AttemptError{Code: "upstream", Message: "502"}, 0)
			check(t, err)
			if n := len(deliveries(t, st)); n != 0 {
				t.Fatalf("a retry announced %d deliveries", n)
			}
			claim(t, st, "w")
			_, err = st.Fail(ctx, id, 2, store.AttemptError{Code: "upstream", Message: "502"}, time.Hour)
			check(t, err)
		}, store.StatusFailed, webhook.EventExportFailed},
		{"recover out of attempts", 1, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Recover(ctx, id, 1, "heartbeat lost", 0)
			check(t, err)
		}, store.StatusFailed, webhook.EventExportFailed},
		{"recover after cancel", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Cancel(ctx, id)
			check(t, err)
			_, err = st.Recover(ctx, id, 1, "heartbeat lost", 0)
			check(t, err)
		}, store.StatusCanceled, webhook.EventExportCanceled},
		{"fail after cancel", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Cancel(ctx, id)
			check(t, err)
			_, err = st.Fail(ctx, id, 1, store.AttemptError{Code: "upstream", Message: "502"}, 0)
			check(t, err)
		}, store.StatusCanceled, webhook.EventExportCanceled},
		{"requeue after cancel", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Cancel(ctx, id)
			check(t, err)
			_, err = st.Requeue(ctx, id, 1, "shutdown")
			check(t, err)
		}, store.StatusCanceled, webhook.EventExportCanceled},
		{"finish canceled", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Cancel(ctx, id)
			check(t, err)
			_, err = st.FinishCanceled(ctx, id, 1)
			check(t, err)
		}, store.StatusCanceled, webhook.EventExportCanceled},
		{"cancel pending", 3, func(t *testing.T, st *store.Store, id string) {
			_, err := st.Requeue(ctx, id, 1, "shutdown") // back to PENDING
			check(t, err)
			if n := len(deliveries(t, st)); n != 0 {
				t.Fatalf("a requeue announced %d deliveries", n)
			}
			_, err = st.Cancel(ctx, id)
			check(t, err)
		}, store.StatusCanceled, webhook.EventExportCanceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			st, _ := openStore(t, sqlite.Options{Now: clk.Now})
			quiet := enqueue(t, st, store.NewJob{Args: json.RawMessage(`{"report":"quiet"}`), MaxAttempts: tc.maxAttempts})
			claim(t, st, "w")
			tc.end(t, st, quiet.ID)
			if n := len(deliveries(t, st)); n != 0 {
				t.Fatalf("a job without a webhook announced %d deliveries", n)
			}

			j := enqueue(t, st, store.NewJob{Args: json.RawMessage(`{"report":"orders","params":{"from":"2024-01-01"}}`),
				MaxAttempts: tc.maxAttempts, NotifyURL: url})
			claim(t, st, "w")
			clk.Advance(time.Second)
			tc.end(t, st, j.ID)
			final := get(t, st, j.ID)
			if final.Status != tc.status {
				t.Fatalf("job ended %s, want %s", final.Status, tc.status)
			}
			ds := deliveries(t, st)
			if len(ds) != 1 {
				t.Fatalf("%d deliveries, want 1", len(ds))
			}
			d := ds[0]
			if d.Status != store.StatusPending || d.MaxAttempts != webhook.MaxAttempts || d.Attempt != 0 ||
				!d.RunAt.Equal(clk.Now()) {
				t.Fatalf("delivery job = %+v", d)
			}
			a := webhookArgs(t, d)
			if a.ExportID != j.ID || a.URL != url || a.Event != tc.event || !strings.HasPrefix(a.MessageID, "msg_") ||
				len(a.MessageID) < 20 {
				t.Fatalf("delivery args = %+v", a)
			}
			var p struct {
				Type      string    `json:"type"`
				Timestamp time.Time `json:"timestamp"`
				Data      struct {
					ID      string         `json:"id"`
					Status  store.Status   `json:"status"`
					Report  string         `json:"report"`
					Params  map[string]any `json:"params"`
					Attempt int            `json:"attempt"`
					Error   *struct {
						Code string `json:"code"`
					} `json:"error"`
					File *struct {
						Size   int64  `json:"size"`
						SHA256 string `json:"sha256"`
					} `json:"file"`
				} `json:"data"`
			}
			if err := json.Unmarshal(a.Payload, &p); err != nil {
				t.Fatalf("payload %s: %v", a.Payload, err)
			}
			if p.Type != tc.event || !p.Timestamp.Equal(clk.Now()) || p.Data.ID != j.ID || p.Data.Status != tc.status ||
				p.Data.Report != "orders" || p.Data.Params["from"] != "2024-01-01" || p.Data.Attempt != final.Attempt {
				t.Fatalf("payload = %s", a.Payload)
			}
			if (p.Data.File != nil) != (tc.status == store.StatusSucceeded) ||
				(p.Data.File != nil && (p.Data.File.Size != 10 || p.Data.File.SHA256 != "abc")) {
				t.Fatalf("payload file = %s", a.Payload)
			}
			if tc.status == store.StatusFailed && (p.Data.Error == nil || p.Data.Error.Code != final.ErrorCode) {
				t.Fatalf("payload error = %s, job error %q", a.Payload, final.ErrorCode)
			}

			// Both timelines say what happened: the export's names the delivery, and the
			// delivery job was accepted like any job.
			var queued []store.Event
			for _, e := range events(t, st, j.ID) {
				if e.Type == webhook.EventQueued {
					queued = append(queued, e)
				}
			}
			if len(queued) != 1 || queued[0].Status != tc.status {
				t.Fatalf("webhook_queued events = %+v", queued)
			}
			if data := eventData(t, queued[0]); data["webhook_id"] != a.MessageID || data["delivery_job"] != d.ID ||
				data["event"] != tc.event || strings.Contains(string(queued[0].Data), "token") {
				t.Fatalf("webhook_queued data = %s", queued[0].Data)
			}
			if got := events(t, st, d.ID); len(got) != 1 || got[0].Type != store.EventAccepted {
				t.Fatalf("delivery events = %+v", got)
			}

			// A delivery job ending announces nothing in turn.
			if d.Queue != webhook.Queue {
				t.Fatalf("delivery queue = %q, want %q", d.Queue, webhook.Queue)
			}
			c := claim(t, st, "w", webhook.Queue)
			if c.ID != d.ID {
				t.Fatalf("claimed %s, want the delivery %s first", c.ID, d.ID)
			}
			if _, err := st.Succeed(ctx, d.ID, 1, store.FileResult{}, nil); err != nil {
				t.Fatal(err)
			}
			if n := len(deliveries(t, st)); n != 1 {
				t.Fatalf("%d deliveries after the delivery succeeded, want 1", n)
			}
		})
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The delivery job is part of the final transaction: if it cannot be written, the job
// does not become final either (so a crash can never leave a final job unannounced).
func TestWebhookEnqueueIsAtomicWithFinalState(t *testing.T) {
	st, path := openStore(t, sqlite.Options{})
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{NotifyURL: "https://example.com/hook"})
	claim(t, st, "w")
	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TRIGGER no_webhooks BEFORE INSERT ON jobs WHEN NEW.kind = 'webhook'
		BEGIN SELECT RAISE(ABORT, 'no webhooks'); END`); err != nil {
		t.Fatal(err)
	}
	published := false
	if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: "x"}, func() error { published = true; return nil }); err == nil {
		t.Fatal("succeed committed although its webhook could not be enqueued")
	}
	if got := get(t, st, j.ID); got.Status != store.StatusProcessing || !published {
		t.Fatalf("after the failed commit: %s (published %v), want PROCESSING", got.Status, published)
	}
	if _, err := db.Exec(`DROP TRIGGER no_webhooks`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(deliveries(t, st)); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}

// Delivery attempts land on the export's timeline (the store's AppendEvent, the
// Recorder a Handler writes through) with its status and attempt; an export removed
// meanwhile is skipped without an error.
func TestRecordWebhookAttempt(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{})
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{NotifyURL: "https://example.com/hook"})
	claim(t, st, "w")
	if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{}, nil); err != nil {
		t.Fatal(err)
	}
	failed := webhook.Attempt{MessageID: "msg_1", Event: webhook.EventExportSucceeded, Attempt: 1, MaxAttempts: 8,
		StatusCode: 500, Code: "http_status", Error: "receiver answered 500", WillRetry: true}
	ok := webhook.Attempt{Delivered: true, MessageID: "msg_1", Event: webhook.EventExportSucceeded, Attempt: 2,
		MaxAttempts: 8, StatusCode: 204}
	for _, a := range []webhook.Attempt{failed, ok} {
		if err := st.AppendEvent(ctx, j.ID, attemptEvent(a), mustJSON(t, a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendEvent(ctx, "gone", attemptEvent(ok), mustJSON(t, ok)); err != nil {
		t.Fatalf("record on a removed export: %v", err)
	}
	evs := events(t, st, j.ID)
	last := evs[len(evs)-2:]
	if last[0].Type != webhook.EventFailed || last[1].Type != webhook.EventDelivered ||
		last[0].Status != store.StatusSucceeded || last[1].Attempt != 1 {
		t.Fatalf("events = %+v", evs)
	}
	d := eventData(t, last[0])
	if d["status_code"] != float64(500) || d["attempt"] != float64(1) || d["will_retry"] != true ||
		d["error"] != "receiver answered 500" || d["webhook_id"] != "msg_1" {
		t.Fatalf("webhook_failed data = %s", last[0].Data)
	}
	if n := len(events(t, st, "gone")); n != 0 {
		t.Fatalf("%d events for a missing job", n)
	}
}

// Listings and counts can leave webhook deliveries out.
func TestListByKindAndCountsLeaveDeliveriesOut(t *testing.T) {
	st, _ := openStore(t, sqlite.Options{})
	ctx := context.Background()
	j := enqueue(t, st, store.NewJob{Kind: "export", NotifyURL: "https://example.com/hook"})
	if _, err := st.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	all, err := st.List(ctx, store.ListOptions{})
	check(t, err)
	exports, err := st.List(ctx, store.ListOptions{Kind: "export"})
	check(t, err)
	if len(all) != 2 || len(exports) != 1 || exports[0].ID != j.ID {
		t.Fatalf("all %d jobs, exports %+v", len(all), exports)
	}
	counts, err := st.Counts(ctx)
	check(t, err)
	if len(counts) != 1 || counts[store.StatusCanceled] != 1 {
		t.Fatalf("counts = %v, want the canceled export only", counts)
	}
}

// Deleting an export stops its deliveries in the same transaction: a waiting one (first
// attempt or a retry) is deleted with its events, a running one is asked to cancel and
// ends CANCELED instead of retrying, and a finished one stays as a record.
func TestDeleteExportStopsItsDeliveries(t *testing.T) {
	clk := newClock()
	st, _ := openStore(t, sqlite.Options{Now: clk.Now})
	ctx := context.Background()

	// Five SUCCEEDED exports, each with its delivery; then every delivery is claimed and
	// put in the state its export's case needs.
	const waiting, retrying, running, delivered, kept = 0, 1, 2, 3, 4
	var exports []store.Job
	for range 5 {
		exports = append(exports, enqueue(t, st, store.NewJob{NotifyURL: "https://example.com/hook"}))
	}
	delivery := map[string]store.Job{} // by export id
	for range 2 * len(exports) {
		// A delivery, created by its export's success, is claimed before any export.
		c := claim(t, st, "w", webhook.Queue, store.DefaultQueue)
		if c.Kind == webhook.Name {
			delivery[webhookArgs(t, c).ExportID] = c
			continue
		}
		_, err := st.Succeed(ctx, c.ID, 1, store.FileResult{Name: c.ID + ".xlsx", Size: 10, SHA256: "abc"}, nil)
		check(t, err)
	}
	for i, e := range exports {
		d := delivery[e.ID]
		var err error
		switch i {
		case waiting, kept:
			_, err = st.Requeue(ctx, d.ID, d.Attempt, "shutdown")
		case retrying:
			_, err = st.Fail(ctx, d.ID, d.Attempt, store.AttemptError{Code: "http_status", Message: "500"}, time.Hour)
		case delivered:
			_, err = st.Succeed(ctx, d.ID, d.Attempt, store.FileResult{}, nil)
		}
		check(t, err)
	}
	if d := get(t, st, delivery[exports[retrying].ID].ID); d.Status != store.StatusPending {
		t.Fatalf("failed delivery is %s, want PENDING for a retry", d.Status)
	}

	for i, e := range exports {
		if i == kept {
			continue
		}
		if _, err := st.Delete(ctx, e.ID); err != nil {
			t.Fatalf("delete %s: %v", e.ID, err)
		}
	}
	for _, i := range []int{waiting, retrying} {
		id := delivery[exports[i].ID].ID
		if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("waiting delivery %s after its export was deleted: %v, want it gone", id, err)
		}
		if n := len(events(t, st, id)); n != 0 {
			t.Errorf("deleted delivery %s kept %d events", id, n)
		}
	}
	if d := get(t, st, delivery[exports[delivered].ID].ID); d.Status != store.StatusSucceeded {
		t.Errorf("finished delivery is %s after its export was deleted, want it kept SUCCEEDED", d.Status)
	}
	if d := get(t, st, delivery[exports[kept].ID].ID); d.Status != store.StatusPending || d.CancelRequested {
		t.Errorf("delivery of an export not deleted: %s, cancel requested %v", d.Status, d.CancelRequested)
	}

	// The running delivery is asked to stop: its worker sees that on its next heartbeat,
	// and a failed attempt ends it instead of scheduling another.
	d := get(t, st, delivery[exports[running].ID].ID)
	if d.Status != store.StatusProcessing || !d.CancelRequested {
		t.Fatalf("running delivery: %s, cancel requested %v; want PROCESSING with cancel requested", d.Status, d.CancelRequested)
	}
	cancel, err := st.Heartbeat(ctx, d.ID, d.Attempt, 0, 0)
	if err != nil || !cancel {
		t.Fatalf("heartbeat of the running delivery: cancel %v, %v", cancel, err)
	}
	end, err := st.Fail(ctx, d.ID, d.Attempt, store.AttemptError{Code: "network", Message: "refused"}, time.Hour)
	if err != nil || end.Status != store.StatusCanceled {
		t.Fatalf("running delivery after a failed attempt: %s, %v; want CANCELED", end.Status, err)
	}
}

// With a base URL, a webhook payload's download link is absolute, so a receiver can
// fetch the file; without one it stays a path.
func TestWebhookPayloadLinkUsesBaseURL(t *testing.T) {
	ctx := context.Background()
	for _, base := range []string{"", "https://sheetq.example.com"} {
		st, _ := openStore(t, sqlite.Options{FollowUps: announcer(base)})
		j := enqueue(t, st, store.NewJob{Kind: "export", Args: json.RawMessage(`{"report":"demo"}`),
			NotifyURL: "https://hooks.example.com/x"})
		claim(t, st, "w")
		if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: "f.xlsx", Size: 1, SHA256: "ab"}, nil); err != nil {
			t.Fatal(err)
		}
		d := deliveries(t, st)
		if len(d) != 1 {
			t.Fatalf("base %q: %d deliveries, want 1", base, len(d))
		}
		var p struct {
			Data struct {
				DownloadURL string `json:"download_url"`
			} `json:"data"`
		}
		if err := json.Unmarshal(webhookArgs(t, d[0]).Payload, &p); err != nil {
			t.Fatal(err)
		}
		if want := base + "/api/v1/exports/" + j.ID + "/file"; p.Data.DownloadURL != want {
			t.Errorf("base %q: download_url %q, want %q", base, p.Data.DownloadURL, want)
		}
	}
}
