package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/jobs"
	"sheetq/jobs/webhook"
)

// The signing example of the Standard Webhooks spec; the reference JavaScript library
// (standardwebhooks 1.1.1, Webhook.sign) gives the same signature for it.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignKnownVector(t *testing.T) {
	key, err := webhook.ParseSecret(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(specTimestamp, 0)
	if got := webhook.Sign(key, specID, ts, []byte(specBody)); got != specSignature {
		t.Fatalf("Sign = %s, want %s", got, specSignature)
	}
	ok := func(id, sigs, body string, now time.Time) error {
		return webhook.Verify(key, id, strconv.Itoa(specTimestamp), sigs, []byte(body), now, 5*time.Minute)
	}
	if err := ok(specID, "v1,bogus= "+specSignature, specBody, ts.Add(time.Minute)); err != nil {
		t.Fatalf("Verify with a rotated list of signatures: %v", err)
	}
	for name, err := range map[string]error{
		"other body":  ok(specID, specSignature, specBody+" ", ts),
		"other id":    ok("msg_other", specSignature, specBody, ts),
		"too old":     ok(specID, specSignature, specBody, ts.Add(6*time.Minute)),
		"from future": ok(specID, specSignature, specBody, ts.Add(-6*time.Minute)),
	} {
		if err == nil {
			t.Errorf("Verify passed with %s", name)
		}
	}
}

func TestParseSecret(t *testing.T) {
	k24 := "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // 24 bytes
	for _, tc := range []struct {
		in   string
		ok   bool
		size int
	}{
		{"whsec_" + k24, true, 24},
		{k24, true, 24}, // the prefix is optional, as in the reference libraries
		{"whsec_" + strings.TrimRight(k24, "="), true, 24},
		{"whsec_" + strings.Repeat("A", 86) + "==", true, 64},
		{"whsec_" + strings.Repeat("A", 88), false, 0}, // 66 bytes
		{"whsec_c2hvcnQ=", false, 0},                   // 5 bytes
		{"whsec_not base64!", false, 0},
		{"whsec_", false, 0},
		{"", false, 0},
	} {
		key, err := webhook.ParseSecret(tc.in)
		if (err == nil) != tc.ok || (tc.ok && len(key) != tc.size) {
			t.Errorf("ParseSecret(%q) = %d bytes, %v; want ok=%v size %d", tc.in, len(key), err, tc.ok, tc.size)
		}
		if err != nil && strings.TrimPrefix(tc.in, "whsec_") != "" && strings.Contains(err.Error(), strings.TrimPrefix(tc.in, "whsec_")) {
			t.Errorf("ParseSecret error quotes the secret: %v", err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"0", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true}, // a date in the past: now
		{"86401", 24 * time.Hour, true},                        // capped
		{"99999999999999999999999", 24 * time.Hour, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), 24 * time.Hour, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"soon", 0, false},
		{"Fri, 99 Foo 2030 00:00:00 GMT", 0, false},
	} {
		got, ok := webhook.ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// Delays grow along the schedule, each within ±10% of its entry, so even with jitter
// attempt n+1 always waits longer than attempt n; past the schedule the last one repeats.
func TestBackoffGrowth(t *testing.T) {
	h, err := webhook.New(webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := webhook.DefaultSchedule
	var prevMax time.Duration
	for attempt := 1; attempt <= len(s)+3; attempt++ {
		want := s[min(attempt, len(s))-1]
		lo, hi := want*9/10, want*11/10
		mn, mx := hi, lo
		for range 500 {
			d := h.Backoff(attempt)
			if d < lo || d > hi {
				t.Fatalf("Backoff(%d) = %s, want within [%s, %s]", attempt, d, lo, hi)
			}
			mn, mx = min(mn, d), max(mx, d)
		}
		if mn == mx {
			t.Errorf("Backoff(%d) has no jitter: always %s", attempt, mn)
		}
		if attempt <= len(s) && mn <= prevMax {
			t.Errorf("Backoff(%d) min %s does not exceed the previous attempt's max %s", attempt, mn, prevMax)
		}
		prevMax = mx
	}
	if total := sum(s); total < 24*time.Hour || total > 48*time.Hour {
		t.Errorf("the schedule spans %s; deliveries should retry over about a day", total)
	}
	if len(s)+1 != webhook.MaxAttempts {
		t.Errorf("schedule has %d delays for %d attempts", len(s), webhook.MaxAttempts)
	}
}

func sum(ds []time.Duration) (t time.Duration) {
	for _, d := range ds {
		t += d
	}
	return t
}

func TestBlocked(t *testing.T) {
	for _, tc := range []struct {
		ip      string
		blocked bool
	}{
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true}, // IPv4-mapped
		{"10.0.0.1", true},
		{"172.16.5.4", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"fd00:ec2::254", true}, // unique local (an AWS metadata address)
		{"169.254.169.254", true},
		{"fe80::1", true},
		{"0.0.0.0", true},
		{"::", true},
		{"0.1.2.3", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"ff02::1", true},
		{"ff0e::1", true},
		{"100.100.100.100", true}, // carrier-grade NAT
		{"198.18.0.1", true},
		{"255.255.255.255", true},
		{"240.0.0.1", true},
		{"::127.0.0.1", true},           // IPv4-compatible
		{"64:ff9b::a00:1", true},        // NAT64 of 10.0.0.1
		{"2002:7f00:1::", true},         // 6to4 of 127.0.0.1
		{"64:ff9b:1::1", true},          // local-use NAT64
		{"93.184.216.34", false},        // public
		{"8.8.8.8", false},              // public
		{"172.32.0.1", false},           // just outside 172.16/12
		{"100.128.0.1", false},          // just outside 100.64/10
		{"2606:4700:4700::1111", false}, // public IPv6
		{"64:ff9b::808:808", false},     // NAT64 of 8.8.8.8
		{"2002:808:808::", false},       // 6to4 of 8.8.8.8
	} {
		if got := webhook.Blocked(netip.MustParseAddr(tc.ip)); got != tc.blocked {
			t.Errorf("Blocked(%s) = %v, want %v", tc.ip, got, tc.blocked)
		}
	}
	if !webhook.Blocked(netip.Addr{}) {
		t.Error("the zero Addr is not blocked")
	}
}

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	long := "https://example.com/" + strings.Repeat("a", webhook.MaxURLLength)
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		want         error
	}{
		{"https://93.184.216.34/hook", false, nil},
		{"http://93.184.216.34:8080/hook?x=1", false, nil},
		{"https://[2606:4700:4700::1111]/hook", false, nil},
		{"http://127.0.0.1:9000/hook", false, webhook.ErrNotAllowed},
		{"http://127.0.0.1:9000/hook", true, nil},
		{"http://localhost:9000/hook", false, webhook.ErrNotAllowed}, // resolves to loopback
		{"http://[::1]/", false, webhook.ErrNotAllowed},
		{"http://10.0.0.7/", false, webhook.ErrNotAllowed},
		{"http://169.254.169.254/latest/meta-data", false, webhook.ErrNotAllowed},
		{"http://0.0.0.0/", false, webhook.ErrNotAllowed},
		{"http://[::ffff:192.168.0.1]/", false, webhook.ErrNotAllowed},
		{"http://sheetq-test.invalid/", false, webhook.ErrInvalidURL}, // does not resolve
		{"ftp://example.com/", false, webhook.ErrInvalidURL},
		{"example.com/hook", false, webhook.ErrInvalidURL},
		{"/hook", false, webhook.ErrInvalidURL},
		{"https://", false, webhook.ErrInvalidURL},
		{"https:opaque", false, webhook.ErrInvalidURL},
		{"https://example.com:99999/", false, webhook.ErrInvalidURL},
		{"https://exa mple.com/", false, webhook.ErrInvalidURL},
		{"https://example.com/\n", false, webhook.ErrInvalidURL},
		{long, true, webhook.ErrInvalidURL},
		{"", false, webhook.ErrInvalidURL},
	} {
		err := webhook.CheckURL(ctx, tc.url, tc.allowPrivate, nil)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("CheckURL(%.60q, allowPrivate=%v) = %v, want %v", tc.url, tc.allowPrivate, err, tc.want)
		}
	}
	if _, err := webhook.ValidateURL("https://example.com/" + strings.Repeat("a", webhook.MaxURLLength-len("https://example.com/"))); err != nil {
		t.Errorf("a URL of exactly %d characters: %v", webhook.MaxURLLength, err)
	}
}

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is an httptest server that records deliveries and answers with the next of
// its scripted responses (the last one repeats).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []delivery
	answers []func(w http.ResponseWriter)
}

func newReceiver(t *testing.T, answers ...func(w http.ResponseWriter)) *receiver {
	rc := &receiver{answers: answers}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: b})
		answer := rc.answers[min(len(rc.got), len(rc.answers))-1]
		rc.mu.Unlock()
		answer(w)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d\n", code)
	}
}

func newHandler(t *testing.T, cfg webhook.Config) *webhook.Handler {
	t.Helper()
	if cfg.Secret == "" {
		cfg.Secret = specSecret
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	h, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func deliveryRun(t *testing.T, url string, attempt int) *jobs.Run {
	t.Helper()
	args, err := json.Marshal(webhook.Args{ExportID: "exp1", URL: url, Event: webhook.EventExportSucceeded,
		MessageID: "msg_test1", Payload: json.RawMessage(`{"type":"export.succeeded","data":{"id":"exp1"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	return &jobs.Run{JobID: "d1", Kind: webhook.Name, Args: args, Attempt: attempt, MaxAttempts: webhook.MaxAttempts}
}

func jobError(t *testing.T, err error) *jobs.Error {
	t.Helper()
	var je *jobs.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v (%T) is not a *jobs.Error", err, err)
	}
	return je
}

func TestDeliverySignsAndClassifiesAnswers(t *testing.T) {
	ctx := context.Background()
	key, _ := webhook.ParseSecret(specSecret)
	schedule := []time.Duration{time.Second, 2 * time.Second}
	h := newHandler(t, webhook.Config{AllowPrivate: true, Schedule: schedule})

	ok := newReceiver(t, status(204))
	for attempt := 1; attempt <= 2; attempt++ {
		if err := h.Run(ctx, deliveryRun(t, ok.URL+"/hook?token=x", attempt)); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	got := ok.deliveries()
	for _, d := range got {
		if d.header.Get("Content-Type") != "application/json" || d.header.Get("webhook-id") != "msg_test1" {
			t.Fatalf("headers %v", d.header)
		}
		if err := webhook.Verify(key, d.header.Get("webhook-id"), d.header.Get("webhook-timestamp"),
			d.header.Get("webhook-signature"), d.body, time.Now(), 5*time.Minute); err != nil {
			t.Fatalf("signature does not verify: %v; headers %v", err, d.header)
		}
		if string(d.body) != `{"type":"export.succeeded","data":{"id":"exp1"}}` {
			t.Fatalf("body %s is not the frozen payload", d.body)
		}
	}

	for _, tc := range []struct {
		name      string
		answer    func(http.ResponseWriter)
		code      string
		permanent bool
		minDelay  time.Duration
	}{
		{"server error", status(500), "http_status", false, schedule[0] * 9 / 10},
		{"client error", status(404), "http_status", false, schedule[0] * 9 / 10},
		{"too many requests", status(429, "Retry-After", "120"), "http_status", false, 120 * time.Second},
		{"unavailable until a date", status(503, "Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)),
			"http_status", false, time.Hour - 2*time.Second},
		{"short Retry-After does not bring the retry forward", status(503, "Retry-After", "0"), "http_status", false, schedule[0] * 9 / 10},
		{"redirect is not followed", status(307, "Location", "/elsewhere"), "http_status", false, schedule[0] * 9 / 10},
		{"gone", status(410), "gone", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, tc.answer)
			err := h.Run(ctx, deliveryRun(t, rc.URL+"/hook?token=secret-token", 1))
			je := jobError(t, err)
			if je.Code != tc.code || je.Permanent != tc.permanent || je.RetryAfter < tc.minDelay {
				t.Fatalf("error = %+v (%v), want code %s permanent %v delay at least %s", je, err, tc.code, tc.permanent, tc.minDelay)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Fatalf("error quotes the URL's token: %v", err)
			}
			if n := len(rc.deliveries()); n != 1 {
				t.Fatalf("receiver got %d requests, want 1", n)
			}
		})
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	je := jobError(t, h.Run(ctx, deliveryRun(t, closed.URL+"/hook?token=secret-token", 1)))
	if je.Code != "network" || je.Permanent || strings.Contains(je.Error(), "secret-token") {
		t.Fatalf("connection refused: %+v (%v)", je, je)
	}

	unconfigured, err := webhook.New(webhook.Config{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	if je := jobError(t, unconfigured.Run(ctx, deliveryRun(t, ok.URL, 1))); je.Code != "not_configured" || !je.Permanent {
		t.Fatalf("without a secret: %+v", je)
	}
	if _, err := webhook.New(webhook.Config{Secret: "whsec_short"}); err == nil {
		t.Fatal("New accepted a bad secret")
	}
}

// Delivery checks the address it actually connects to, whatever the URL said at
// acceptance: a name that resolves to loopback now (DNS rebinding) is refused before any
// byte is sent, and the failure is permanent.
func TestDeliveryRefusesPrivateAddressesAtDial(t *testing.T) {
	rc := newReceiver(t, status(200))
	h := newHandler(t, webhook.Config{})
	u, _ := url.Parse(rc.URL)
	for _, target := range []string{rc.URL, "http://localhost:" + u.Port() + "/hook"} {
		je := jobError(t, h.Run(context.Background(), deliveryRun(t, target, 1)))
		if je.Code != "not_allowed" || !je.Permanent || !errors.Is(je, webhook.ErrNotAllowed) {
			t.Fatalf("%s: %+v (%v), want a permanent not_allowed", target, je, je)
		}
	}
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}

// nodeModules finds the standardwebhooks package for the independent check: under
// $SHEETQ_NODE_MODULES, or testdata/ where .ci/run installs it. Missing, the test skips
// locally and fails in CI.
func nodeModules(t *testing.T) (node, dir string) {
	t.Helper()
	dir = os.Getenv("SHEETQ_NODE_MODULES")
	if dir == "" {
		dir = "testdata"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	missing := func(what string) {
		const how = "install it with: npm install --no-save --prefix jobs/webhook/testdata standardwebhooks@1.1.1"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (%s)", what, how)
		}
		t.Skipf("%s (%s)", what, how)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err != nil {
		missing("no node_modules/standardwebhooks under " + dir)
	}
	return node, dir
}

// The reference Standard Webhooks library accepts what sheetq sends, and refuses it when
// the body or the id is changed.
func TestSignatureVerifiesWithStandardWebhooksLibrary(t *testing.T) {
	node, dir := nodeModules(t)
	rc := newReceiver(t, status(200))
	h := newHandler(t, webhook.Config{AllowPrivate: true})
	if err := h.Run(context.Background(), deliveryRun(t, rc.URL, 1)); err != nil {
		t.Fatal(err)
	}
	d := rc.deliveries()[0]
	verify := func(id string, body []byte) error {
		cmd := exec.Command(node, filepath.Join("testdata", "verify.mjs"), specSecret, id,
			d.header.Get("webhook-timestamp"), d.header.Get("webhook-signature"))
		cmd.Env = append(os.Environ(), "SHEETQ_NODE_MODULES="+dir)
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := verify(d.header.Get("webhook-id"), d.body); err != nil {
		t.Fatalf("standardwebhooks refused sheetq's delivery: %v", err)
	}
	if err := verify(d.header.Get("webhook-id"), append(d.body, ' ')); err == nil {
		t.Fatal("standardwebhooks accepted a changed body: the check proves nothing")
	}
	if err := verify("msg_other", d.body); err == nil {
		t.Fatal("standardwebhooks accepted another webhook-id")
	}
}
