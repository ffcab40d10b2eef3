// Package client is the HTTP client of a sheetq server's API (docs/api.md): requests
// with a bearer token, problem+json answers as errors, the job's JSON, the event stream,
// creating an export with one Idempotency-Key however often it is retried, and
// downloading a file checked against its sha256. The CLI's export, jobs and loadtest
// commands and the end-to-end tests use it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one sheetq server's HTTP API.
type Client struct {
	base, token string
	hc          *http.Client
}

// New returns a client of the server at base (http:// or https://, without a trailing
// slash needed) that sends token, when not empty, as Authorization: Bearer. A nil hc
// means a plain http.Client.
func New(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, hc: hc}
}

// Base is the server's URL, without a trailing slash.
func (c *Client) Base() string { return c.base }

// Request sends one request, body (when not nil) as JSON. A non-2xx answer is returned
// as a *Problem (with the body closed); a 2xx answer's body is the caller's to close.
func (c *Client) Request(ctx context.Context, method, path string, body any, hdr http.Header) (*http.Response, error) {
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
	return nil, readProblem(resp)
}

// Call sends a request with a short deadline and returns the raw JSON answer.
func (c *Client) Call(ctx context.Context, method, path string, body any, hdr http.Header) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.Request(ctx, method, path, body, hdr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// GetJob fetches one export: the decoded job and the server's JSON as it came.
func (c *Client) GetJob(ctx context.Context, id string) (Job, []byte, error) {
	var j Job
	b, err := c.Call(ctx, http.MethodGet, "/api/v1/exports/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return j, nil, err
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return j, nil, fmt.Errorf("bad job from the server: %w", err)
	}
	return j, b, nil
}
