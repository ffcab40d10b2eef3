package app

import (
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

// OpenRunning opens the browser on the sheetq that owns dir, after checking that it
// answers GET /healthz, and returns its URL. It is for a second launch (a double-click
// while sheetq already runs).
func OpenRunning(ctx context.Context, dir DataDir) (string, error) {
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
	if err := OpenBrowser(o.URL); err != nil {
		return "", err
	}
	return o.URL, nil
}
