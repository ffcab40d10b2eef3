package cli

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"sheetq/app"
	"sheetq/internal/apptest"
	"sheetq/jobs/deliver"
	"sheetq/jobs/webhook"
)

// startApp runs the real server, as app.Run builds it, over a migrated SQLite file in
// t.TempDir() with the fast engine settings of app's own tests, served by httptest; it
// returns the server's URL. Its config file names an SMTP relay (which no test mails
// through), so that a schedule may email. Everything stops when the test ends.
func startApp(t *testing.T) string {
	t.Helper()
	url, _ := startAppWithData(t)
	return url
}

// startAppWithData is startApp that also returns the server's data directory.
func startAppWithData(t *testing.T) (url, dir string) {
	t.Helper()
	dir = t.TempDir()
	cfg := app.Config{
		Addr: "127.0.0.1:0", DataDir: dir, ReportsDir: filepath.Join(dir, "reports"), Version: "test",
		File:   &app.FileConfig{SMTP: deliver.SMTP{Host: "smtp.example.com", From: "sheetq <reports@example.com>"}},
		Logger: apptest.Logger(t, nil),
		Test:   &app.TestHooks{Webhooks: &webhook.Config{}},
		Engine: apptest.EngineConfig(),
	}
	ctx := context.Background()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	t.Cleanup(a.Stop)
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start app: %v", err)
	}
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)
	// Runs before hs.Close (cleanups run last first): Stop ends the event streams, so
	// Close does not wait for them.
	t.Cleanup(a.Stop)
	return hs.URL, dir
}

// eventually fails the test unless cond holds within d, checking every 10 ms.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
