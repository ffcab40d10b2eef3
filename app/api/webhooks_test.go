package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"sheetq/internal/apptest"
	"sheetq/jobs/webhook"
)

// testWebhookSecret is a signing secret in the form the config file takes.
var testWebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("sheetq webhook test secret 32 b!"))

// withHook adds a webhook with url to an export request's body.
func withHook(body, url string) string {
	return strings.TrimSuffix(body, "}") + `,"webhook":{"url":"` + url + `"}}`
}

// A webhook is checked before the job is accepted.
func TestWebhookRequestValidation(t *testing.T) {
	t.Parallel()
	const body = `{"report":"demo","params":{"rows":5}}`
	unconfigured := newTestServer(t, testOpts{})
	apptest.CheckProblem(t, unconfigured.Post(withHook(body, "https://example.com/hook"), ""),
		http.StatusUnprocessableEntity, "webhooks_not_configured")

	ts := newTestServer(t, testOpts{Webhooks: webhook.Config{Secret: testWebhookSecret}})
	for i, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{withHook(body, "http://127.0.0.1:9/hook"), 422, "webhook_not_allowed"},
		{withHook(body, "http://localhost:9/hook"), 422, "webhook_not_allowed"},
		{withHook(body, "http://[::1]/hook"), 422, "webhook_not_allowed"},
		{withHook(body, "http://169.254.169.254/latest/meta-data/"), 422, "webhook_not_allowed"},
		{withHook(body, "http://10.1.2.3/hook"), 422, "webhook_not_allowed"},
		{withHook(body, "ftp://example.com/hook"), 422, "invalid_webhook"},
		{withHook(body, "/hook"), 422, "invalid_webhook"},
		{withHook(body, "https://"), 422, "invalid_webhook"},
		{withHook(body, "https://example.com/"+strings.Repeat("a", 2048)), 422, "invalid_webhook"},
		{withHook(body, "https://sheetq-test.invalid/hook"), 422, "invalid_webhook"},
		{strings.TrimSuffix(body, "}") + `,"webhook":{}}`, 422, "invalid_webhook"},
		{strings.TrimSuffix(body, "}") + `,"webhook":"https://example.com"}`, 400, "malformed_json"},
		{strings.TrimSuffix(body, "}") + `,"webhook":{"url":"https://example.com","secret":"x"}}`, 400, "malformed_json"},
	} {
		t.Run(fmt.Sprintf("%d_%s", i, tc.code), func(t *testing.T) {
			apptest.CheckProblem(t, ts.Post(tc.body, ""), tc.status, tc.code)
		})
	}
	if n := ts.jobCount() + unconfigured.jobCount(); n != 0 {
		t.Fatalf("%d jobs were created by refused requests", n)
	}
}
