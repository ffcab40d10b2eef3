package cli

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"sheetq/internal/client"
)

// serverStats is what the server itself spent while the requests were sent and answered,
// read from its GET /metrics before the first request and after the last answer.
type serverStats struct {
	CPUSeconds      float64 `json:"cpu_s"` // process_cpu_seconds_total, exports included
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
}

// serverCPU reads the server's process_cpu_seconds_total from GET /metrics. ok is false
// when the server does not report it: /metrics refused, or a system without the process
// collector's CPU figure.
func serverCPU(ctx context.Context, api *client.Client) (seconds float64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := api.Request(ctx, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, false
	}
	f := fams["process_cpu_seconds_total"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter() == nil {
		return 0, false
	}
	return f.GetMetric()[0].GetCounter().GetValue(), true
}
