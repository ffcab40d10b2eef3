package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"sheetq/app"
)

// Exit statuses of the client commands (export, jobs); README.md, "Command line".
const (
	exitFailed      = 1   // the export FAILED (or expired), or the server refused (404, 409, 410)
	exitUsage       = 2   // a bad command line, or a request the server rejects (400, 422)
	exitCanceled    = 3   // the export was CANCELED
	exitServer      = 4   // the server could not be reached, answered 5xx, or sent a bad file
	exitInterrupted = 130 // Ctrl-C while waiting; the export keeps running
)

// exitError is an error with its own exit status; main honours it.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// clientFlags are the flags every client command takes.
type clientFlags struct {
	server, token, data string
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.server, "server", "", "server `URL` (default: the local instance of the data directory, else http://127.0.0.1:8080)")
	fs.StringVar(&cf.token, "token", "", "access `token`, sent as Authorization: Bearer")
	fs.StringVar(&cf.data, "data", "", "data `directory` whose running server to use when --server is not set")
}

// client builds the API client: --server, else the URL the data directory's owner
// recorded in its pid file, else the default address.
func (cf *clientFlags) client() (*apiClient, error) {
	base := cf.server
	if base == "" {
		if dir, err := dataRoot(cf.data); err == nil {
			if o, err := (app.DataDir{Root: dir}).ReadOwner(); err == nil && o.URL != "" {
				base = o.URL
			}
		}
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, usageError{fmt.Errorf("--server %q: want an http:// or https:// URL", base)}
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: cf.token, hc: &http.Client{}}, nil
}

// parseArgs parses flags that may come before, between or after the positional
// arguments (`export demo -p rows=5 --wait`), then SHEETQ_* for the flags not given.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		// A "--" ends the flags: everything after it is positional.
		if len(args) > 0 && len(fs.Args()) < len(args) && args[len(args)-len(fs.Args())-1] == "--" {
			pos = append(pos, fs.Args()...)
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, parseWithEnv(fs, nil)
}

// apiClient talks to a sheetq server's HTTP API.
type apiClient struct {
	base, token string
	hc          *http.Client
}

// apiProblem is a problem detail answered by the server.
type apiProblem struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Param  string `json:"param"`
	Job    string `json:"job"`
}

func (p *apiProblem) Error() string {
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if p.Param != "" && !strings.Contains(msg, p.Param) {
		msg = "param " + p.Param + ": " + msg
	}
	if p.Code != "" {
		msg = p.Code + ": " + msg
	}
	return strings.ReplaceAll(fmt.Sprintf("server: %s (HTTP %d)", msg, p.Status), "\n", " ")
}

// classify gives a server or network error its exit status.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ee exitError
	if errors.As(err, &ee) {
		return err
	}
	var p *apiProblem
	if errors.As(err, &p) {
		switch {
		case p.Status == http.StatusBadRequest || p.Status == http.StatusUnprocessableEntity:
			return exitError{exitUsage, err}
		case p.Status >= 500 || p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden:
			return exitError{exitServer, err}
		default:
			return exitError{exitFailed, err}
		}
	}
	return exitError{exitServer, err}
}

// request sends one request. A non-2xx answer is returned as an *apiProblem (with the
// body closed); a 2xx answer's body is the caller's to close.
func (c *apiClient) request(ctx context.Context, method, path string, body any, hdr http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	p := &apiProblem{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if json.Unmarshal(b, p) != nil || (p.Detail == "" && p.Code == "") {
		p.Title = resp.Status
		if s := strings.TrimSpace(string(b)); s != "" && len(s) < 200 {
			p.Detail = s
		}
	}
	p.Status = resp.StatusCode
	return nil, p
}

// call sends a request with a short deadline and returns the raw JSON answer.
func (c *apiClient) call(ctx context.Context, method, path string, body any, hdr http.Header) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.request(ctx, method, path, body, hdr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// clientJob is a job as the API returns it (the fields the client uses).
type clientJob struct {
	ID          string         `json:"id"`
	Status      string         `json:"status"`
	Report      string         `json:"report"`
	Params      map[string]any `json:"params"`
	Attempt     int            `json:"attempt"`
	MaxAttempts int            `json:"max_attempts"`
	Progress    struct {
		Rows      int64  `json:"rows"`
		TotalRows *int64 `json:"total_rows"`
	} `json:"progress"`
	CreatedAt  *time.Time `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	DownloadURL     string `json:"download_url"`
	CancelRequested bool   `json:"cancel_requested"`
	File            *struct {
		Name   string `json:"name"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"file"`
}

func (j *clientJob) finished() bool {
	switch j.Status {
	case "SUCCEEDED", "FAILED", "CANCELED", "EXPIRED":
		return true
	}
	return false
}

func (j *clientJob) rows() string {
	if j.Progress.TotalRows != nil {
		return fmt.Sprintf("%d/%d", j.Progress.Rows, *j.Progress.TotalRows)
	}
	return fmt.Sprint(j.Progress.Rows)
}

func (c *apiClient) getJob(ctx context.Context, id string) (clientJob, []byte, error) {
	var j clientJob
	b, err := c.call(ctx, http.MethodGet, "/api/v1/exports/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return j, nil, err
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, nil, fmt.Errorf("bad job from the server: %w", err)
	}
	return j, b, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writeIndented writes a JSON answer indented, ending with a newline.
func writeIndented(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		buf.Reset()
		buf.Write(bytes.TrimSpace(b))
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
