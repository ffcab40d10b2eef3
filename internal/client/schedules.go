package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"sheetq/internal/apiv1"
)

// Schedule, Target and ScheduledRun are API v1's (internal/apiv1), shared with the server.
type (
	Schedule     = apiv1.Schedule
	Target       = apiv1.Target
	ScheduledRun = apiv1.ScheduledRun
)

// ScheduleRequest is a schedule to create or preview: POST /api/v1/schedules's body.
type ScheduleRequest struct {
	Report string            `json:"report"`
	Params map[string]string `json:"params"`
	// Format is "xlsx" or "csv"; "" leaves it to the server (xlsx).
	Format   string   `json:"format,omitempty"`
	BOM      bool     `json:"bom,omitempty"`
	Cron     string   `json:"cron"`
	TimeZone string   `json:"timezone"`
	Deliver  []Target `json:"deliver,omitempty"`
	Paused   bool     `json:"paused,omitempty"`
}

// ListSchedules fetches every schedule, and the server's JSON as it came.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, []byte, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	b, err := c.callJSON(ctx, http.MethodGet, "/api/v1/schedules", nil, &out)
	return out.Schedules, b, err
}

// GetSchedule fetches one schedule.
func (c *Client) GetSchedule(ctx context.Context, id string) (Schedule, []byte, error) {
	var sc Schedule
	b, err := c.callJSON(ctx, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(id), nil, &sc)
	return sc, b, err
}

// CreateSchedule creates a schedule. It is not sent again on a failure: a schedule has
// no idempotency key, and a second one would fire every export twice.
func (c *Client) CreateSchedule(ctx context.Context, req ScheduleRequest) (Schedule, []byte, error) {
	var sc Schedule
	b, err := c.callJSON(ctx, http.MethodPost, "/api/v1/schedules", req, &sc)
	return sc, b, err
}

// PreviewSchedule asks for the next runs of a schedule not saved.
func (c *Client) PreviewSchedule(ctx context.Context, req ScheduleRequest) ([]ScheduledRun, []byte, error) {
	var out struct {
		NextRuns []ScheduledRun `json:"next_runs"`
	}
	b, err := c.callJSON(ctx, http.MethodPost, "/api/v1/schedules/preview", req, &out)
	return out.NextRuns, b, err
}

// SetSchedulePaused pauses or resumes a schedule.
func (c *Client) SetSchedulePaused(ctx context.Context, id string, paused bool) (Schedule, []byte, error) {
	action := "/resume"
	if paused {
		action = "/pause"
	}
	var sc Schedule
	b, err := c.callJSON(ctx, http.MethodPost, "/api/v1/schedules/"+url.PathEscape(id)+action, nil, &sc)
	return sc, b, err
}

// DeleteSchedule deletes a schedule; the exports it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	_, err := c.Call(ctx, http.MethodDelete, "/api/v1/schedules/"+url.PathEscape(id), nil, nil)
	return err
}

// callJSON is Call that decodes the answer into out.
func (c *Client) callJSON(ctx context.Context, method, path string, body, out any) ([]byte, error) {
	b, err := c.Call(ctx, method, path, body, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return b, fmt.Errorf("bad answer from the server: %w", err)
	}
	return b, nil
}
