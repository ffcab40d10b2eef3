package apptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"sheetq/internal/apiv1"
	"sheetq/store"
)

// Client sends a test's requests to a server and fails the test when one cannot be
// sent or read.
type Client struct {
	T   testing.TB
	URL string       // the server's scheme://host:port
	HC  *http.Client // the server's client
}

// NewClient is a client of hs.
func NewClient(t testing.TB, hs *httptest.Server) *Client {
	return &Client{T: t, URL: hs.URL, HC: hs.Client()}
}

// Serve serves h with httptest until the test ends and returns its client.
func Serve(t testing.TB, h http.Handler) *Client {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return NewClient(t, hs)
}

// Response is a finished HTTP exchange. Body, the whole body as read, stands in for the
// http.Response's stream, which is read and closed.
type Response struct {
	*http.Response
	Body []byte
}

// Request sends method path with body (nil for none); header values are added as given,
// so a name listed twice sends two header lines, and a Host header sets the request's
// host.
func (c *Client) Request(method, path string, body io.Reader, header http.Header) Response {
	c.T.Helper()
	req, err := http.NewRequest(method, c.URL+path, body)
	if err != nil {
		c.T.Fatalf("new request: %v", err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if host := header.Get("Host"); host != "" {
		req.Host = host
	}
	res, err := c.HC.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.T.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return Response{Response: res, Body: b}
}

// Get sends GET path.
func (c *Client) Get(path string) Response {
	c.T.Helper()
	return c.Request(http.MethodGet, path, nil, nil)
}

// Post sends a JSON body to POST /api/v1/exports, with an Idempotency-Key when key is set.
func (c *Client) Post(body, key string) Response {
	c.T.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return c.Request(http.MethodPost, "/api/v1/exports", strings.NewReader(body), h)
}

// Create posts body and requires a 202 with a job.
func (c *Client) Create(body string) apiv1.Job {
	c.T.Helper()
	res := c.Post(body, "")
	if res.StatusCode != http.StatusAccepted {
		c.T.Fatalf("POST %s: status %d, want 202; body %s", body, res.StatusCode, res.Body)
	}
	return DecodeJob(c.T, res)
}

// Job fetches GET /api/v1/exports/{id}, requiring a 200.
func (c *Client) Job(id string) (apiv1.Job, Response) {
	c.T.Helper()
	res := c.Get("/api/v1/exports/" + id)
	if res.StatusCode != http.StatusOK {
		c.T.Fatalf("GET job %s: status %d; body %s", id, res.StatusCode, res.Body)
	}
	return DecodeJob(c.T, res), res
}

// WaitStatus polls GET /api/v1/exports/{id} until the job's status is one of want and
// returns it.
func (c *Client) WaitStatus(id string, want ...store.Status) (apiv1.Job, Response) {
	c.T.Helper()
	var (
		j   apiv1.Job
		res Response
	)
	WaitFor(c.T, 20*time.Second, func() (bool, string) {
		j, res = c.Job(id)
		return slices.Contains(want, store.Status(j.Status)), fmt.Sprintf("job %s is %s (attempt %d, error %+v), want %v",
			id, j.Status, j.Attempt, j.Error, want)
	})
	return j, res
}

// ListPage is GET /api/v1/exports decoded.
type ListPage struct {
	Exports    []apiv1.Job `json:"exports"`
	NextCursor string      `json:"next_cursor"`
}

// List fetches GET /api/v1/exports with query, requiring a 200.
func (c *Client) List(query string) ListPage {
	c.T.Helper()
	res := c.Get("/api/v1/exports" + query)
	if res.StatusCode != http.StatusOK {
		c.T.Fatalf("list %s: status %d; body %s", query, res.StatusCode, res.Body)
	}
	var page ListPage
	if err := json.Unmarshal(res.Body, &page); err != nil {
		c.T.Fatalf("list %s: %v; body %s", query, err, res.Body)
	}
	return page
}

// ScheduleAnswer is a schedule as the API answers it.
type ScheduleAnswer struct {
	ID           string         `json:"id"`
	Params       map[string]any `json:"params"`
	Paused       bool           `json:"paused"`
	NextRunAt    *time.Time     `json:"next_run_at"`
	LastFiredFor *time.Time     `json:"last_fired_for"`
	NextRuns     []struct {
		At     time.Time      `json:"at"`
		Params map[string]any `json:"params"`
	} `json:"next_runs"`
}

// Schedule sends a JSON body (or none) to a schedules route, requires the status and
// returns the schedule answered.
func (c *Client) Schedule(method, path, body string, want int) ScheduleAnswer {
	c.T.Helper()
	res := c.Request(method, path, strings.NewReader(body), http.Header{"Content-Type": {"application/json"}})
	if res.StatusCode != want {
		c.T.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, res.Body)
	}
	var sc ScheduleAnswer
	if want < 300 && len(res.Body) > 0 {
		if err := json.Unmarshal(res.Body, &sc); err != nil {
			c.T.Fatalf("%s %s: %v: %s", method, path, err, res.Body)
		}
	}
	return sc
}

// DecodeJob requires a JSON answer holding a job with an id, and returns the job.
func DecodeJob(t testing.TB, res Response) apiv1.Job {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, res.Body)
	}
	var j apiv1.Job
	if err := json.Unmarshal(res.Body, &j); err != nil {
		t.Fatalf("decode job: %v; body %s", err, res.Body)
	}
	if j.ID == "" {
		t.Fatalf("job without id: %s", res.Body)
	}
	return j
}

// CheckProblem requires an RFC 9457 problem with the given status and code (any code
// when ""), and returns its members.
func CheckProblem(t testing.TB, res Response, status int, code string) map[string]any {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", res.StatusCode, status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, res.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(res.Body, &p); err != nil {
		t.Fatalf("decode problem: %v; body %s", err, res.Body)
	}
	for _, k := range []string{"type", "title", "detail", "code"} {
		if s, _ := p[k].(string); s == "" {
			t.Errorf("problem member %q missing or empty: %s", k, res.Body)
		}
	}
	if got, _ := p["status"].(float64); int(got) != status {
		t.Errorf("problem status %v, want %d", p["status"], status)
	}
	if code != "" && p["code"] != code {
		t.Errorf("problem code %v, want %q; detail %v", p["code"], code, p["detail"])
	}
	return p
}
