package app

import (
	"sheetq/internal/datadir"

	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunRefusesBadConfig: validation comes first, so nothing is created.
func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		cfg    Config
		noData bool
		want   string
	}{
		{"any address without token", Config{Addr: "0.0.0.0:0"}, false, "--token"},
		{"IPv6 any address without token", Config{Addr: "[::]:0"}, false, "--token"},
		{"empty host without token", Config{Addr: ":0"}, false, "--token"},
		{"LAN address without token", Config{Addr: "192.168.1.10:8080"}, false, "--token"},
		{"host name without token", Config{Addr: "example.com:8080"}, false, "--token"},
		{"bad address", Config{Addr: "127.0.0.1"}, false, "--addr"},
		{"no data directory", Config{Addr: "127.0.0.1:0"}, true, "--data"},
		{"store of another kind", Config{Addr: "127.0.0.1:0", StoreURL: "redis://u:p@h/db"}, false, "--store"},
		{"mysql store without a database", Config{Addr: "127.0.0.1:0", StoreURL: "mysql://u:p@h"}, false, "--store"},
		{"store URL with an unencoded password", Config{Addr: "127.0.0.1:0", StoreURL: "postgres://u:p?w@h/db"}, false, "percent-encode"},
		{"store from an unset variable", Config{Addr: "127.0.0.1:0", StoreURL: "env:SHEETQ_TEST_NO_SUCH_VARIABLE"}, false, "--store"},
		{"files of another kind", Config{Addr: "127.0.0.1:0", FilesURL: "gs://bucket/x"}, false, "--files"},
		{"unknown download mode", Config{Addr: "127.0.0.1:0", FilesDownload: "teleport"}, false, "--files-download"},
		{"node name with a space", Config{Addr: "127.0.0.1:0", Node: "node a"}, false, "--node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if !tt.noData {
				tt.cfg.DataDir = dir
			}
			err := Run(ctx, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v, want an error mentioning %s", err, tt.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("refused config created %s (stat: %v)", dir, err)
			}
		})
	}
}

// TestRunServesAndStops runs the whole server on a free port: it answers, a second
// process on the same data directory is refused, and cancelling ctx stops it cleanly.
func TestRunServesAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// An explicit reports folder skips the first-run sample, which takes a minute to
	// generate under -race; the binary's crash tests cover the first run.
	url, stop := startRun(t, Config{
		Addr: "127.0.0.1:0", DataDir: dir, ReportsDir: filepath.Join(dir, "reports"), Version: "test",
		Logger: slog.New(slog.DiscardHandler),
	}, 20*time.Second)

	res, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("/healthz: %d %s", res.StatusCode, body)
	}

	owner, err := datadir.Dir{Root: dir}.ReadOwner()
	if err != nil || owner.PID != os.Getpid() || owner.URL != url {
		t.Errorf("owner %+v (%v), want pid %d and url %s", owner, err, os.Getpid(), url)
	}
	err = Run(context.Background(), Config{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, datadir.ErrInUse) || !strings.Contains(err.Error(), url) {
		t.Errorf("second Run on the directory: %v, want datadir.ErrInUse naming %s", err, url)
	}

	if err := stop(); err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
	if _, err := os.Stat(datadir.Dir{Root: dir}.PIDFile()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid file left after stop (stat: %v)", err)
	}
	// The directory is free again.
	lk, err := datadir.Dir{Root: dir}.Lock()
	if err != nil {
		t.Fatalf("lock after stop: %v", err)
	}
	lk.Unlock()
}

// startRun runs Run with cfg (its Ready is set here) and returns the URL it serves on
// once it does, within wait. stop cancels Run and returns its error; it also runs when
// the test ends.
func startRun(t *testing.T, cfg Config, wait time.Duration) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg.Ready = func(url string) { ready <- url }
	go func() { done <- Run(ctx, cfg) }()
	select {
	case url = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(wait):
		cancel()
		t.Fatal("Run never became ready")
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(wait):
				err = errors.New("Run did not stop after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return url, stop
}
