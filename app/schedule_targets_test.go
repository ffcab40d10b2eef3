package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"sheetq/jobs/webhook"
)

// TestScheduleWebhookTargetCheckedLikeARequests (issue 36, item 7a): a schedule's
// webhook target to a loopback, link-local or localhost address, a URL of 10 KB or a
// port out of range is refused when the schedule is saved, created or edited, with 422
// invalid_schedule naming deliver[0], as an export request's webhook is refused; a
// public address is saved, and [webhooks] allow_private lets a private one through.
func TestScheduleWebhookTargetCheckedLikeARequests(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{Idle: true, Webhooks: webhook.Config{Secret: testWebhookSecret}})
	body := func(url string) string {
		target, err := json.Marshal(map[string]string{"type": "webhook", "url": url})
		if err != nil {
			t.Fatal(err)
		}
		return `{"report":"demo","cron":"@daily","timezone":"UTC","deliver":[` + string(target) + `]}`
	}
	type fieldError struct {
		Field  string
		Index  *int
		Detail string
	}
	refused := func(method, path, url, why string) {
		t.Helper()
		res := ts.Request(method, path, strings.NewReader(body(url)), http.Header{"Content-Type": {"application/json"}})
		var p struct {
			Code, Field string
			Errors      []fieldError
		}
		if res.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(res.Body, &p) != nil {
			t.Errorf("%s %.60s: %d %.300s, want 422", method, url, res.StatusCode, res.Body)
			return
		}
		if p.Code != "invalid_schedule" || p.Field != "deliver" || len(p.Errors) != 1 || p.Errors[0].Index == nil ||
			*p.Errors[0].Index != 0 || !strings.Contains(p.Errors[0].Detail, why) {
			t.Errorf("%s %.60s: %+v, want invalid_schedule naming deliver[0] for %q", method, url, p, why)
		}
		if len(res.Body) > 4<<10 {
			t.Errorf("%s %.60s: a refusal of %d bytes, which quotes the URL back", method, url, len(res.Body))
		}
	}
	bad := map[string]string{
		"http://127.0.0.1:8080/hook":                               "127.0.0.1 is not a public address",
		"http://169.254.169.254/latest/meta-data/":                 "169.254.169.254 is not a public address",
		"http://localhost/hook":                                    "localhost resolves to",
		"https://hooks.example.com/" + strings.Repeat("a", 10<<10): "at most 2048",
		"https://hooks.example.com:99999/hook":                     `bad port "99999"`,
	}
	for url, why := range bad {
		refused("POST", "/api/v1/schedules", url, why)
	}
	// A public address is saved (an address, so that no DNS answer is needed), and an
	// edit to a refused target is refused as a creation is.
	sc := ts.Schedule("POST", "/api/v1/schedules", body("https://93.184.215.14/hook"), http.StatusCreated)
	for url, why := range bad {
		refused("PATCH", "/api/v1/schedules/"+sc.ID, url, why)
	}

	private := newTestServer(t, testOpts{Idle: true, Webhooks: webhook.Config{Secret: testWebhookSecret, AllowPrivate: true}})
	private.Schedule("POST", "/api/v1/schedules", body("http://127.0.0.1:8080/hook"), http.StatusCreated)
	res := private.Request("POST", "/api/v1/schedules", strings.NewReader(body("https://hooks.example.com:99999/hook")),
		http.Header{"Content-Type": {"application/json"}})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("allow_private, port 99999: %d %s, want 422", res.StatusCode, res.Body)
	}
}
