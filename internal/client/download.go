package client

import (
	"bytes"
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
	return c.DownloadEncrypted(ctx, job, out, "")
}

// DownloadEncrypted is Download of the file encrypted with password (POST
// /api/v1/exports/{id}/file); "" is the plain file. An encrypted file is new bytes on
// every download, so it is checked against its announced size and for the compound
// file it must be, not against the export's sha256.
func (c *Client) DownloadEncrypted(ctx context.Context, job Job, out, password string) (string, error) {
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
		name, err := c.downloadOnce(ctx, path, job, out, password)
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

func (c *Client) downloadOnce(ctx context.Context, path string, job Job, out, password string) (string, error) {
	method, body := http.MethodGet, any(nil)
	if password != "" {
		method, body = http.MethodPost, map[string]string{"password": password}
	}
	resp, err := c.Request(ctx, method, path, body, nil)
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
	if password != "" {
		if err := checkEncrypted(part, n, resp.ContentLength); err != nil {
			os.Remove(part)
			return "", err
		}
	} else if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, job.File.SHA256) {
		os.Remove(part)
		return "", fmt.Errorf("%w: sha256 %s (%d bytes), the server says %s (%d bytes)", ErrCorrupt, sum, n, job.File.SHA256, job.File.Size)
	}
	if err := os.Rename(part, out); err != nil {
		os.Remove(part)
		return "", &SaveError{err}
	}
	return out, nil
}

// checkEncrypted checks a saved encrypted download: as long as the server announced,
// and an OLE compound file, as every encrypted workbook is.
func checkEncrypted(path string, n, announced int64) error {
	if announced >= 0 && n != announced {
		return fmt.Errorf("%w: %d bytes, the server announced %d", ErrCorrupt, n, announced)
	}
	f, err := os.Open(path)
	if err != nil {
		return &SaveError{err}
	}
	defer f.Close()
	head := make([]byte, 8)
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}) {
		return fmt.Errorf("%w: the file is not an encrypted workbook", ErrCorrupt)
	}
	return nil
}
