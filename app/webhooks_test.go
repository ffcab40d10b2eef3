package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sheetq/internal/apptest"
	"sheetq/internal/datadir"
	"sheetq/jobs/webhook"
	"sheetq/store"
)

// testWebhookSecret signs the test servers' deliveries.
var testWebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("sheetq webhook test secret 32 b!"))

// hookDelivery is one request a hookReceiver got.
type hookDelivery struct {
	header   http.Header
	body     []byte
	at       time.Time // the test clock when the receiver answered
	exportID string    // from the payload
	typ      string    // from the payload
}

// hookReceiver is a webhook receiver: it records every delivery and answers the n-th
// delivery of one webhook-id (n from 1) with answer(n).
type hookReceiver struct {
	*httptest.Server
	t      *testing.T
	now    func() time.Time
	answer func(n int, w http.ResponseWriter)
	mu     sync.Mutex
	got    []hookDelivery
}

func newHookReceiver(t *testing.T, now func() time.Time, answer func(n int, w http.ResponseWriter)) *hookReceiver {
	if now == nil {
		now = time.Now
	}
	rc := &hookReceiver{t: t, now: now, answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Type string `json:"type"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		rc.mu.Lock()
		d := hookDelivery{header: r.Header.Clone(), body: body, at: rc.now(), exportID: p.Data.ID, typ: p.Type}
		rc.got = append(rc.got, d)
		n := 0
		for _, g := range rc.got {
			if g.header.Get("webhook-id") == d.header.Get("webhook-id") {
				n++
			}
		}
		rc.mu.Unlock()
		rc.answer(n, w)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// of returns the deliveries announcing exportID, each checked the way a receiver checks
// them: Content-Type, and a valid signature over the body.
func (rc *hookReceiver) of(exportID string) []hookDelivery {
	rc.t.Helper()
	key, err := webhook.ParseSecret(testWebhookSecret)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []hookDelivery
	for _, d := range rc.got {
		if d.exportID != exportID {
			continue
		}
		if ct := d.header.Get("Content-Type"); ct != "application/json" {
			rc.t.Fatalf("delivery Content-Type %q", ct)
		}
		// The signature is checked independently by the npm standardwebhooks package in
		// jobs/webhook's tests; here it must be the one Sign gives for these headers.
		sec, err := strconv.ParseInt(d.header.Get("webhook-timestamp"), 10, 64)
		if err != nil || !slices.Contains(strings.Fields(d.header.Get("webhook-signature")),
			webhook.Sign(key, d.header.Get("webhook-id"), time.Unix(sec, 0), d.body)) {
			rc.t.Fatalf("delivery for %s does not verify; headers %v", exportID, d.header)
		}
		out = append(out, d)
	}
	return out
}

// queuedDelivery waits until the export's webhook_queued event exists and returns its
// data: the webhook-id and the delivery job's id.
func (ts *testServer) queuedDelivery(exportID string) (webhookID, jobID string) {
	ts.t.Helper()
	apptest.WaitFor(ts.t, 20*time.Second, func() (bool, string) {
		evs, err := ts.store.Events(context.Background(), exportID)
		if err != nil {
			ts.t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == webhook.EventQueued {
				var d map[string]any
				if err := json.Unmarshal(e.Data, &d); err != nil {
					ts.t.Fatal(err)
				}
				webhookID, _ = d["webhook_id"].(string)
				jobID, _ = d["delivery_job"].(string)
				return true, ""
			}
		}
		return false, fmt.Sprintf("export %s has no webhook_queued event: %v", exportID, ts.eventTypes(exportID))
	})
	return webhookID, jobID
}

// waitDelivery waits until the delivery job announcing exportID is in one of want.
func (ts *testServer) waitDelivery(exportID string, want ...store.Status) store.Job {
	ts.t.Helper()
	_, id := ts.queuedDelivery(exportID)
	var j store.Job
	apptest.WaitFor(ts.t, 20*time.Second, func() (bool, string) {
		var err error
		if j, err = ts.store.Get(context.Background(), id); err != nil {
			ts.t.Fatal(err)
		}
		for _, w := range want {
			if j.Status == w {
				return true, ""
			}
		}
		return false, fmt.Sprintf("delivery %s is %s (attempt %d, error %s), want %v", id, j.Status, j.Attempt, j.ErrorMessage, want)
	})
	return j
}

// hookEvents returns the export's webhook_delivered and webhook_failed events.
func (ts *testServer) hookEvents(exportID string) []store.Event {
	ts.t.Helper()
	evs, err := ts.store.Events(context.Background(), exportID)
	if err != nil {
		ts.t.Fatal(err)
	}
	var out []store.Event
	for _, e := range evs {
		if e.Type == webhook.EventDelivered || e.Type == webhook.EventFailed {
			out = append(out, e)
		}
	}
	return out
}

func hookEventData(t *testing.T, e store.Event) webhook.Attempt {
	t.Helper()
	var a webhook.Attempt
	if err := json.Unmarshal(e.Data, &a); err != nil {
		t.Fatalf("%s data %s: %v", e.Type, e.Data, err)
	}
	return a
}

func withHook(body, url string) string {
	return strings.TrimSuffix(body, "}") + `,"webhook":{"url":"` + url + `"}}`
}

// Each final state is announced once: a succeeded, a failed and a canceled export each
// get exactly one signed delivery of the right type, and the export's timeline shows it.
// Deliveries are not exports: the list, the counts and GET by id leave them out.
func TestWebhookAnnouncesEachFinalState(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t, nil, func(int, http.ResponseWriter) {})
	ts := newTestServer(t, testOpts{MaxAttempts: 1, Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true}})

	ok := ts.Create(withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL+"/hook?token=abc"))
	failed := ts.Create(withHook(`{"report":"demo","params":{"rows":5,"fail_first":1}}`, rc.URL+"/hook"))
	canceled := ts.Create(withHook(never, rc.URL+"/hook"))
	plain := ts.Create(`{"report":"demo","params":{"rows":5}}`)
	ts.WaitStatus(canceled.ID, store.StatusProcessing)
	ts.cancel(canceled.ID)
	ts.WaitStatus(plain.ID, store.StatusSucceeded)

	for _, tc := range []struct {
		id     string
		status store.Status
		typ    string
	}{
		{ok.ID, store.StatusSucceeded, webhook.EventExportSucceeded},
		{failed.ID, store.StatusFailed, webhook.EventExportFailed},
		{canceled.ID, store.StatusCanceled, webhook.EventExportCanceled},
	} {
		ts.WaitStatus(tc.id, tc.status)
		d := ts.waitDelivery(tc.id, store.StatusSucceeded)
		webhookID, _ := ts.queuedDelivery(tc.id)
		got := rc.of(tc.id)
		if len(got) != 1 {
			t.Fatalf("%s: %d deliveries, want 1", tc.id, len(got))
		}
		if got[0].typ != tc.typ || got[0].header.Get("webhook-id") != webhookID || d.Attempt != 1 {
			t.Fatalf("%s: delivery type %q id %q (attempt %d), want %q %q", tc.id, got[0].typ,
				got[0].header.Get("webhook-id"), d.Attempt, tc.typ, webhookID)
		}
		var p struct {
			Data struct {
				Status store.Status `json:"status"`
				Report string       `json:"report"`
				File   *struct {
					SHA256 string `json:"sha256"`
				} `json:"file"`
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			} `json:"data"`
		}
		if err := json.Unmarshal(got[0].body, &p); err != nil {
			t.Fatal(err)
		}
		j, _ := ts.Job(tc.id)
		if p.Data.Status != tc.status || p.Data.Report != "demo" ||
			(tc.status == store.StatusSucceeded) != (p.Data.File != nil && p.Data.File.SHA256 == j.File.SHA256) ||
			(tc.status == store.StatusFailed) != (p.Data.Error != nil && p.Data.Error.Code == j.Error.Code) {
			t.Fatalf("%s: payload %s does not describe the job %+v", tc.id, got[0].body, j)
		}
		evs := ts.hookEvents(tc.id)
		if len(evs) != 1 || evs[0].Type != webhook.EventDelivered {
			t.Fatalf("%s: webhook events %+v", tc.id, evs)
		}
		if a := hookEventData(t, evs[0]); a.StatusCode != 200 || a.Attempt != 1 || a.MessageID != webhookID || a.Event != tc.typ {
			t.Fatalf("%s: webhook_delivered data %s", tc.id, evs[0].Data)
		}
		if strings.Contains(string(evs[0].Data), "token") {
			t.Fatalf("the timeline shows the URL's token: %s", evs[0].Data)
		}
		apptest.CheckProblem(t, ts.Get("/api/v1/exports/"+d.ID), http.StatusNotFound, "not_found")
	}
	if n := len(rc.of(plain.ID)); n != 0 {
		t.Fatalf("an export without a webhook was announced %d times", n)
	}
	if n := len(ts.List("").Exports); n != 4 {
		t.Fatalf("the list shows %d jobs, want the 4 exports", n)
	}
	if n := ts.jobCount(); n != 4 {
		t.Fatalf("counts show %d jobs, want the 4 exports", n)
	}
}

// A receiver that fails gets the same message again (same webhook-id and body, fresh
// timestamp and signature) until it answers 2xx; every attempt is on the timeline.
func TestWebhookRetriesWithSameID(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t, nil, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	ts := newTestServer(t, testOpts{Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true,
		Schedule: []time.Duration{10 * time.Millisecond}}})
	j := ts.Create(withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL))
	d := ts.waitDelivery(j.ID, store.StatusSucceeded)
	got := rc.of(j.ID)
	if len(got) != 2 || d.Attempt != 2 {
		t.Fatalf("%d deliveries (delivery job attempt %d), want 2", len(got), d.Attempt)
	}
	if got[0].header.Get("webhook-id") != got[1].header.Get("webhook-id") || string(got[0].body) != string(got[1].body) {
		t.Fatalf("a retry changed the message: %v %s / %v %s", got[0].header, got[0].body, got[1].header, got[1].body)
	}
	evs := ts.hookEvents(j.ID)
	if len(evs) != 2 || evs[0].Type != webhook.EventFailed || evs[1].Type != webhook.EventDelivered {
		t.Fatalf("webhook events = %+v", evs)
	}
	first, second := hookEventData(t, evs[0]), hookEventData(t, evs[1])
	if first.StatusCode != 500 || first.Attempt != 1 || !first.WillRetry || first.Code != "http_status" ||
		!strings.Contains(first.Error, "500") || second.StatusCode != 200 || second.Attempt != 2 {
		t.Fatalf("webhook events data: %s / %s", evs[0].Data, evs[1].Data)
	}
}

// 410 Gone stops delivery at once: one attempt, a permanently failed delivery job.
func TestWebhookGoneStopsDelivery(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t, nil, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	ts := newTestServer(t, testOpts{Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true,
		Schedule: []time.Duration{10 * time.Millisecond}}})
	j := ts.Create(withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL))
	d := ts.waitDelivery(j.ID, store.StatusSucceeded, store.StatusFailed)
	if d.Status != store.StatusFailed || d.ErrorCode != "gone" || d.Attempt != 1 {
		t.Fatalf("delivery job = %s attempt %d error %s, want FAILED gone on attempt 1", d.Status, d.Attempt, d.ErrorCode)
	}
	if n := len(rc.of(j.ID)); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
	evs := ts.hookEvents(j.ID)
	if len(evs) != 1 || evs[0].Type != webhook.EventFailed {
		t.Fatalf("webhook events = %+v", evs)
	}
	if a := hookEventData(t, evs[0]); a.StatusCode != 410 || a.WillRetry || a.Code != "gone" {
		t.Fatalf("webhook_failed data %s", evs[0].Data)
	}
}

// A receiver's Retry-After postpones the next attempt at least that long: the delivery
// job's run_at says so in the store, and moving the clock past it delivers the same
// message.
func TestWebhookHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	rc := newHookReceiver(t, now, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	ts := newTestServer(t, testOpts{Now: now, Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true,
		Schedule: []time.Duration{10 * time.Millisecond}}})
	j := ts.Create(withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL))
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	apptest.WaitFor(t, 20*time.Second, func() (bool, string) {
		evs := ts.hookEvents(j.ID)
		return len(evs) == 1, fmt.Sprintf("webhook events %+v", evs)
	})
	d := ts.waitDelivery(j.ID, store.StatusPending)
	first := rc.of(j.ID)
	if d.Attempt != 1 || len(first) != 1 {
		t.Fatalf("delivery job attempt %d after %d deliveries, want 1 and 1", d.Attempt, len(first))
	}
	if earliest := first[0].at.Truncate(time.Millisecond).Add(time.Hour); d.RunAt.Before(earliest) {
		t.Fatalf("next attempt at %s, earlier than Retry-After allows (%s)", d.RunAt, earliest)
	}
	if d.RunAt.After(first[0].at.Add(2 * time.Hour)) {
		t.Fatalf("next attempt at %s, long after Retry-After (answered at %s)", d.RunAt, first[0].at)
	}

	offset.Store(int64(time.Hour + time.Second))
	ts.engine.Wake()
	d = ts.waitDelivery(j.ID, store.StatusSucceeded)
	got := rc.of(j.ID)
	if len(got) != 2 || d.Attempt != 2 || got[1].header.Get("webhook-id") != got[0].header.Get("webhook-id") {
		t.Fatalf("after the wait: %d deliveries, attempt %d", len(got), d.Attempt)
	}
}

// The webhook is part of an idempotent request: the same key with the same webhook
// replays the job, with another webhook it is refused.
func TestWebhookIdempotency(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t, nil, func(int, http.ResponseWriter) {})
	ts := newTestServer(t, testOpts{Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true}})
	body := withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL+"/a")
	first := ts.Post(body, "k1")
	if first.StatusCode != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.StatusCode, first.Body)
	}
	if again := ts.Post(body, "k1"); again.Header.Get("Idempotent-Replayed") != "true" ||
		apptest.DecodeJob(t, again).ID != apptest.DecodeJob(t, first).ID {
		t.Fatalf("replay: %d %s", again.StatusCode, again.Body)
	}
	apptest.CheckProblem(t, ts.Post(withHook(`{"report":"demo","params":{"rows":5}}`, rc.URL+"/b"), "k1"),
		http.StatusUnprocessableEntity, "idempotency_key_reused")
	apptest.CheckProblem(t, ts.Post(`{"report":"demo","params":{"rows":5}}`, "k1"),
		http.StatusUnprocessableEntity, "idempotency_key_reused")
	id := apptest.DecodeJob(t, first).ID
	ts.waitDelivery(id, store.StatusSucceeded)
	if n := len(rc.of(id)); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}

// The [webhooks] table of the config file: the secret may come from the environment, and
// a bad secret or a misspelt key stops the start instead of being ignored.
func TestWebhookConfigFile(t *testing.T) {
	dir := datadir.Dir{Root: t.TempDir()}
	path := dir.Config()
	open := func(conf string) (*webhook.Handler, error) {
		t.Helper()
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		fc, err := LoadFileConfig(path, true)
		if err != nil {
			return nil, err
		}
		return openWebhooks(fc, nil, slog.New(slog.DiscardHandler), nil)
	}
	t.Setenv("SHEETQ_TEST_WEBHOOK_SECRET", testWebhookSecret)
	for _, tc := range []struct {
		conf       string
		configured bool
		err        string
	}{
		{"", false, ""},
		{"[webhooks]\nsecret = \"" + testWebhookSecret + "\"\n", true, ""},
		{"[webhooks]\nsecret = \"env:SHEETQ_TEST_WEBHOOK_SECRET\"\nallow_private = true\n", true, ""},
		{"[webhooks]\nsecret = \"env:SHEETQ_TEST_WEBHOOK_UNSET\"\n", false, "SHEETQ_TEST_WEBHOOK_UNSET is not set"},
		{"[webhooks]\nsecret = \"whsec_c2hvcnQ=\"\n", false, "5 bytes"},
		{"[webhooks]\nalow_private = true\n", false, "unknown key webhooks.alow_private"},
	} {
		h, err := open(tc.conf)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want one mentioning %q", tc.conf, err, tc.err)
			}
			continue
		}
		if err != nil || h.Configured() != tc.configured {
			t.Errorf("%q: configured = %v, err = %v; want %v", tc.conf, h.Configured(), err, tc.configured)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFileConfig(path, true)
	if err != nil {
		t.Fatalf("a missing optional config file: %v", err)
	}
	if h, err := openWebhooks(fc, nil, slog.New(slog.DiscardHandler), nil); err != nil || h.Configured() {
		t.Fatalf("without a config file: configured %v, err %v", h.Configured(), err)
	}
}

// eventTypes lists a job's event types in order, read from the store.
func (ts *testServer) eventTypes(id string) []string { return apptest.EventTypes(ts.t, ts.store, id) }
