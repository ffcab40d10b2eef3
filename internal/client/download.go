package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrCorrupt is a downloaded file whose sha256 is not the one the job records.
var ErrCorrupt = errors.New("downloaded file is corrupt")

// SaveError is a failure to write the downloaded file here, not the server's.
type SaveError struct{ Err error }

// Error is the underlying error's text.
func (e *SaveError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *SaveError) Unwrap() error { return e.Err }

// Download saves the finished job's file as out (default: the server's file name, in
// the current folder) through out.part, checks its sha256 against the job's, and
// returns the name it saved. Network errors and 5xx answers are tried up to 3 times.
func (c *Client) Download(ctx context.Context, job Job, out string) (string, error) {
	if job.File == nil {
		return "", errors.New("the server reports no file for export " + job.ID)
	}
	path := job.DownloadURL
	if path == "" {
		path = "/api/v1/exports/" + url.PathEscape(job.ID) + "/file"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		name, err := c.downloadOnce(ctx, path, job, out)
		if err == nil {
			return name, nil
		}
		lastErr = err
		var se *SaveError
		if Refused(err) || errors.As(err, &se) || errors.Is(err, ErrCorrupt) || ctx.Err() != nil {
			break
		}
	}
	return "", lastErr
}

func (c *Client) downloadOnce(ctx context.Context, path string, job Job, out string) (string, error) {
	resp, err := c.Request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if out == "" {
		out = job.File.Name
		if _, ps, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && ps["filename"] != "" {
			out = ps["filename"]
		}
		out = filepath.Base(filepath.Clean("/" + out)) // a name, never a path
		if out == "/" || out == "." {
			out = job.ID + ".xlsx"
			if job.Format == "csv" {
				out = job.ID + ".csv"
			}
		}
	}
	part := out + ".part"
	f, err := os.Create(part)
	if err != nil {
		return "", &SaveError{err}
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), resp.Body)
	if err == nil {
		err = f.Sync() // the name must never point at a partial file
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(part)
		return "", err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, job.File.SHA256) {
		os.Remove(part)
		return "", fmt.Errorf("%w: sha256 %s (%d bytes), the server says %s (%d bytes)", ErrCorrupt, sum, n, job.File.SHA256, job.File.Size)
	}
	if err := os.Rename(part, out); err != nil {
		os.Remove(part)
		return "", &SaveError{err}
	}
	return out, nil
}
