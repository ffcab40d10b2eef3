package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sheetq/app"
	"sheetq/jobs"
	"sheetq/jobs/deliver"
	"sheetq/jobs/webhook"
)

// startApp runs the real server, as app.Run builds it, over a migrated SQLite file in
// t.TempDir() with the fast engine settings of app's own tests, served by httptest; it
// returns the server's URL. Its config file names an SMTP relay (which no test mails
// through), so that a schedule may email. Everything stops when the test ends.
func startApp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cfg := app.Config{
		Addr: "127.0.0.1:0", DataDir: dir, ReportsDir: filepath.Join(dir, "reports"), Version: "test",
		File:   &app.FileConfig{SMTP: deliver.SMTP{Host: "smtp.example.com", From: "sheetq <reports@example.com>"}},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Test:   &app.TestHooks{Webhooks: &webhook.Config{}},
		Engine: jobs.Config{
			Workers:       2,
			Heartbeat:     50 * time.Millisecond,
			StaleAfter:    10 * time.Second,
			PollInterval:  20 * time.Millisecond,
			BackoffBase:   10 * time.Millisecond,
			BackoffMax:    50 * time.Millisecond,
			ShutdownGrace: 200 * time.Millisecond,
		},
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
	return hs.URL
}

// syncBuffer is an io.Writer that a test may read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
