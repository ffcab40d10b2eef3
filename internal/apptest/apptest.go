// Package apptest is the test kit of the server's packages: the real parts a handler
// stands on (parts.go), the HTTP helpers of the API (http.go) and of the pages
// (pages.go), and the small things their tests share (this file). Each package's
// harness_test.go keeps only what is particular to it: which routes it mounts, its
// middleware, its options.
//
// Only _test.go files import it. It never imports sheetq/app, so that the tests of
// app/api, app/web and app/schedules need not go through the composition root, and it
// imports no store driver: a harness passes the one function that opens its store
// (store/layout_test.go allows drivers only in the composition root and the tools).
// It lives under internal/ rather than app/internal/ so that internal/cli's tests may
// use it too.
package apptest

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sheetq/internal/datadir"
	"sheetq/jobs"
)

// EngineConfig is the worker pool's fast test settings: short heartbeats, polls and
// backoffs, so that a test waits milliseconds where production waits seconds.
func EngineConfig() jobs.Config {
	return jobs.Config{
		Workers:       2,
		Heartbeat:     50 * time.Millisecond,
		StaleAfter:    10 * time.Second, // no recovery of live jobs on a slow -race machine
		PollInterval:  20 * time.Millisecond,
		BackoffBase:   10 * time.Millisecond,
		BackoffMax:    50 * time.Millisecond,
		ShutdownGrace: 200 * time.Millisecond,
	}
}

// Logger is a test server's logger: warnings and worse into the test's output, or, when
// w is not nil, everything from debug up into w.
func Logger(t testing.TB, w io.Writer) *slog.Logger {
	if w != nil {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// WaitFor polls cond until it holds or the deadline passes; cond's message says what was
// seen last, for the failure.
func WaitFor(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s: %s", timeout, msg)
		}
		<-tick.C
	}
}

// TickClock is a clock whose readings are at least a millisecond apart, so that jobs
// created one after another have distinct created_at and "newest first" has one answer.
func TickClock() func() time.Time {
	var (
		mu   sync.Mutex
		last time.Time
	)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if next := last.Add(time.Millisecond); now.Before(next) {
			now = next
		}
		last = now
		return now
	}
}

// SyncBuffer is a bytes.Buffer that a server's or a command's goroutines may write to
// while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// MonthReport is "orders in a period": a pair of dates, the end after the start.
const MonthReport = `-- title: Orders in a period
-- source: demo
-- param: from date "From"
-- param: to date "To" after=from
-- param: rows int "Rows" = 3
SELECT :from, :to, :rows;
`

// WriteReport puts a report file in the reports folder of dir; the caller waits until
// the catalog serves it, each package in its own way.
func WriteReport(t testing.TB, dir datadir.Dir, name, text string) {
	t.Helper()
	if err := os.MkdirAll(dir.Reports(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir.Reports(), name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
