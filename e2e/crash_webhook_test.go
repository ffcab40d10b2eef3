//go:build !windows

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sheetq/jobs/webhook"
	"sheetq/store"
)

// A crash right after an export's final state commits, before its webhook is sent, does
// not lose the notification: the delivery job was committed with the final state, and
// after a restart it is delivered once, with the webhook-id chosen before the crash.
func TestCrashAfterFinalCommitStillDeliversWebhook(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("sheetq crash test secret, 32 b.."))
	type delivery struct {
		header http.Header
		body   []byte
	}
	var (
		mu  sync.Mutex
		got []delivery
	)
	arrived := make(chan struct{}, 16)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Clone(), b})
		mu.Unlock()
		arrived <- struct{}{}
	}))
	defer rc.Close()
	deliveries := func() []delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]delivery(nil), got...)
	}

	// A config file (and a reports folder) makes this a configured data directory, so
	// the first-run sample is not installed.
	data := t.TempDir()
	conf := "[webhooks]\nsecret = \"" + secret + "\"\nallow_private = true # the receiver is on loopback\n"
	if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(data, "reports"), 0o755); err != nil {
		t.Fatal(err)
	}

	p := startBinary(t, data, []string{"SHEETQ_FAULT=after-commit"})
	j := p.submit(t, `{"report":"demo","params":{"rows":50},"webhook":{"url":"`+rc.URL+`/hook"}}`)
	if code := p.wait(t); code == 0 {
		t.Fatalf("the fault point did not kill the process\n%s", p.log())
	}
	row, ev := inspect(t, data, j.ID)
	if row.Status != store.StatusSucceeded {
		t.Fatalf("after the crash the export is %s, want SUCCEEDED (committed before the fault point)", row.Status)
	}
	var queued struct {
		WebhookID   string `json:"webhook_id"`
		DeliveryJob string `json:"delivery_job"`
	}
	for _, e := range ev {
		if e.Type == webhook.EventQueued {
			if err := json.Unmarshal(e.Data, &queued); err != nil {
				t.Fatal(err)
			}
		}
	}
	if queued.DeliveryJob == "" {
		t.Fatalf("the export's final commit queued no webhook: %+v", ev)
	}
	if d, _ := inspect(t, data, queued.DeliveryJob); d.Status != store.StatusPending || d.Attempt != 0 {
		t.Fatalf("delivery job after the crash: %s attempt %d, want PENDING and never tried", d.Status, d.Attempt)
	}
	if n := len(deliveries()); n != 0 {
		t.Fatalf("%d deliveries before the restart, want none", n)
	}

	p2 := startBinary(t, data, nil)
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("no delivery after the restart\n%s", p2.log())
	}
	// A graceful stop lets the running delivery finish and commit.
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p2.wait(t); code != 0 {
		t.Fatalf("graceful shutdown exited %d\n%s", code, p2.log())
	}

	got2 := deliveries()
	if len(got2) != 1 {
		t.Fatalf("%d deliveries, want 1", len(got2))
	}
	h := got2[0].header
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	// The signature scheme itself is checked by the npm standardwebhooks package in
	// jobs/webhook's tests; here it must be the one Sign gives for these headers.
	sec, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil || !slices.Contains(strings.Fields(h.Get("webhook-signature")),
		webhook.Sign(key, h.Get("webhook-id"), time.Unix(sec, 0), got2[0].body)) {
		t.Fatalf("delivery does not verify; headers %v", h)
	}
	if h.Get("webhook-id") != queued.WebhookID {
		t.Fatalf("webhook-id %q, want %q chosen before the crash", h.Get("webhook-id"), queued.WebhookID)
	}
	var payload struct {
		Type string `json:"type"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got2[0].body, &payload); err != nil || payload.Type != webhook.EventExportSucceeded || payload.Data.ID != j.ID {
		t.Fatalf("payload %s (%v)", got2[0].body, err)
	}
	if d, _ := inspect(t, data, queued.DeliveryJob); d.Status != store.StatusSucceeded || d.Attempt != 1 {
		t.Fatalf("delivery job: %s attempt %d, want SUCCEEDED on attempt 1", d.Status, d.Attempt)
	}
	if _, ev := inspect(t, data, j.ID); countEvents(ev, webhook.EventDelivered) != 1 {
		t.Fatalf("the export's timeline does not show the delivery: %+v", ev)
	}
}
