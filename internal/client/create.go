package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ExportRequest is an export to ask for: POST /api/v1/exports's body.
type ExportRequest struct {
	Report string
	Params map[string]string
	// Format is "xlsx" or "csv"; "" leaves it to the server (xlsx). BOM asks a csv
	// file for a UTF-8 byte order mark, and CSVFormulas "keep" for its text as it is,
	// formulas included ("neutralise", or "", the server's default, neutralises them).
	Format      string
	BOM         bool
	CSVFormulas string
}

// CreateExport posts the export req under the Idempotency-Key key,
// sending the very same request again on network errors and 5xx answers (up to 4 tries,
// backing off from 0.5 s): however many tries, one job (ARCHITECTURE.md, rule 11).
// retrying, when not nil, is told of each failed try before the wait. It returns the
// job and the server's JSON.
func (c *Client) CreateExport(ctx context.Context, req ExportRequest, key string, retrying func(err error, wait time.Duration)) (Job, []byte, error) {
	var job Job
	body := map[string]any{"report": req.Report, "params": req.Params}
	// Sent only when set: the request is then the very one a client without formats sent.
	if req.Format != "" {
		body["format"] = req.Format
	}
	if req.BOM {
		body["bom"] = true
	}
	if req.CSVFormulas != "" {
		body["csv_formulas"] = req.CSVFormulas
	}
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
