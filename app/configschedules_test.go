package app

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// [[schedules]] in the config file: read as written (params and deliveries too), made at
// start with the file as its owner; a wrong one refuses the start, naming it.
func TestConfigFileSchedules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sheetq.toml")
	write := func(text string) FileConfig {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		fc, err := LoadFileConfig(path, false)
		if err != nil {
			t.Fatal(err)
		}
		return fc
	}
	fc := write(`
[deliveries]
folders = ["` + dir + `"]

[[schedules]]
id = "daily-demo"
report = "demo"
cron = "0 6 * * *"
timezone = "Europe/Berlin"
params = { rows = 7 }
deliver = [{ type = "folder", path = "` + dir + `" }]
`)
	ts := newDeliveryServer(t, fc, testOpts{Idle: true}, nil)
	res := ts.Get("/api/v1/schedules/daily-demo")
	var sc struct {
		Owner   string            `json:"owner"`
		Cron    string            `json:"cron"`
		Params  map[string]any    `json:"params"`
		Deliver []json.RawMessage `json:"deliver"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(res.Body, &sc) != nil {
		t.Fatalf("declared schedule: %d %s", res.StatusCode, res.Body)
	}
	if sc.Owner != "sheetq.toml" || sc.Cron != "0 6 * * *" || sc.Params["rows"] != float64(7) || len(sc.Deliver) != 1 {
		t.Fatalf("declared schedule: %+v", sc)
	}

	bad := write(`
[[schedules]]
id = "broken"
report = "demo"
cron = "0 25 * * *"
timezone = "UTC"
`)
	cfg := testConfig(t, testOpts{Idle: true})
	cfg.File = &bad
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	// The one line names the file, the schedule and the field.
	if err := a.Start(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "config "+path+": ") ||
		!strings.Contains(err.Error(), `"broken"`) || !strings.Contains(err.Error(), "cron") {
		t.Fatalf("a wrong declared schedule: start err = %v", err)
	}

	// An email schedule without [smtp] host: one line naming the schedule, its target
	// and what to set.
	mailed := write(`
[[schedules]]
id = "mailed"
report = "demo"
cron = "0 6 * * *"
timezone = "UTC"
deliver = [{ type = "email", to = ["ann@example.com"] }]
`)
	cfg = testConfig(t, testOpts{Idle: true})
	cfg.File = &mailed
	a, err = New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	err = a.Start(context.Background())
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an email schedule without [smtp]: start err = %v", err)
	}
	if want := `schedule "mailed": deliver[0]: email delivery needs an SMTP relay: set [smtp] host`; !strings.Contains(err.Error(), want) {
		t.Fatalf("an email schedule without [smtp]: start err = %v, want it to say %q", err, want)
	}
	mailed.SMTP = relayConfig().SMTP
	newDeliveryServer(t, mailed, testOpts{Idle: true}, nil) // starts
}
