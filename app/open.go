package app

import (
	"sheetq/internal/datadir"

	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// OpenBrowser opens url in the user's default browser with the platform's opener. If the
// BROWSER environment variable is set (the first entry of a list), that command is run
// with the URL as its argument instead.
func OpenBrowser(url string) error {
	var cmd *exec.Cmd
	if b := filepath.SplitList(os.Getenv("BROWSER")); len(b) > 0 && b[0] != "" {
		cmd = exec.Command(b[0], url)
	} else {
		switch runtime.GOOS {
		case "windows":
			cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
		case "darwin":
			cmd = exec.Command("open", url)
		default:
			cmd = exec.Command("xdg-open", url)
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap the opener
	return nil
}

// OpenRunning opens the browser on the sheetq that owns dir and returns its URL. It is for
// a second launch: a double-click while sheetq already runs, or while it is still
// starting (a first run spends seconds writing the sample; a large database is checked).
// It waits up to wait for the owner to record its URL and answer GET /healthz, calling
// waiting once if it has to, and gives up early if the owner exits.
func OpenRunning(ctx context.Context, dir datadir.Dir, wait time.Duration, waiting func()) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for n := 0; ; n++ {
		url, err := ownerURL(ctx, dir)
		if err == nil {
			if err := OpenBrowser(url); err != nil {
				return "", err
			}
			return url, nil
		}
		lastErr = err
		if n == 0 && waiting != nil {
			waiting()
		}
		// About once a second: has the owner gone (it refused to start, or was
		// stopped)? Then nothing will answer.
		if n%10 == 9 {
			if running, rerr := dir.Running(); rerr == nil && !running {
				return "", fmt.Errorf("the sheetq that held %s exited before it answered (%v)", dir.Root, lastErr)
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the sheetq that holds %s did not answer within %s: %v", dir.Root, wait, lastErr)
		case <-tick.C:
		}
	}
}

// ownerURL returns the URL the owner of dir recorded, once it answers GET /healthz.
func ownerURL(ctx context.Context, dir datadir.Dir) (string, error) {
	o, err := dir.ReadOwner()
	if err != nil {
		return "", fmt.Errorf("read owner: %w", err)
	}
	if o.URL == "" {
		return "", errors.New("the owner recorded no URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL+"/healthz", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("check %s: %w", o.URL, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("check %s: %s", o.URL, resp.Status)
	}
	return o.URL, nil
}
