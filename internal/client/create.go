package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// CreateExport posts an export of report with params under the Idempotency-Key key,
// sending the very same request again on network errors and 5xx answers (up to 4 tries,
// backing off from 0.5 s): however many tries, one job (ARCHITECTURE.md, rule 11).
// retrying, when not nil, is told of each failed try before the wait. It returns the
// job and the server's JSON.
func (c *Client) CreateExport(ctx context.Context, report string, params map[string]string, key string, retrying func(err error, wait time.Duration)) (Job, []byte, error) {
	var job Job
	body := map[string]any{"report": report, "params": params}
	hdr := http.Header{"Idempotency-Key": {key}}
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		b, err := c.Call(ctx, http.MethodPost, "/api/v1/exports", body, hdr)
		if err == nil {
			if err := json.Unmarshal(b, &job); err != nil || job.ID == "" {
				return job, nil, fmt.Errorf("bad answer from the server: %s", strings.TrimSpace(string(b)))
			}
			return job, b, nil
		}
		if Refused(err) || attempt == 4 || ctx.Err() != nil {
			return job, nil, err
		}
		if retrying != nil {
			retrying(err, backoff)
		}
		select {
		case <-ctx.Done():
			return job, nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}
