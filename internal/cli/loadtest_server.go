package cli

import (
	"context"
	"math"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"sheetq/internal/client"
)

// serverStats is what the server itself spent while the requests were sent and answered,
// read from its GET /metrics before the first request and after the last answer.
type serverStats struct {
	CPUSeconds      float64 `json:"cpu_s"` // process_cpu_seconds_total, exports included
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	// Writes is nil when the server has no sheetq_store_write_seconds (PostgreSQL).
	Writes *writeStats `json:"writes,omitempty"`
}

// writeStats are the server's write transactions on SQLite's one writer while sending,
// from the sheetq_store_write_seconds histogram: the quantiles are interpolated within
// its buckets (0.5, 1, 2, 5, 10 ms ...), as Prometheus' histogram_quantile does.
type writeStats struct {
	Count    uint64  `json:"count"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	Over5MS  uint64  `json:"over_5ms"`  // transactions that took longer than 5 ms
	Over10MS uint64  `json:"over_10ms"` // and longer than 10 ms
}

// serverReading is one read of the server's /metrics.
type serverReading struct {
	cpu    float64
	writes *dto.Histogram // nil: not reported
}

// readServer reads the server's process_cpu_seconds_total and, where it has one, its
// write histogram from GET /metrics. ok is false when the server does not report its
// CPU: /metrics refused, or a system without the process collector's CPU figure.
func readServer(ctx context.Context, api *client.Client) (r serverReading, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := api.Request(ctx, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return r, false
	}
	if f := fams["sheetq_store_write_seconds"]; f != nil && len(f.GetMetric()) == 1 {
		r.writes = f.GetMetric()[0].GetHistogram()
	}
	f := fams["process_cpu_seconds_total"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter() == nil {
		return r, false
	}
	r.cpu = f.GetMetric()[0].GetCounter().GetValue()
	return r, true
}

// serverBetween is what the server spent between readings a and b, for n requests.
func serverBetween(a, b serverReading, n int) *serverStats {
	s := &serverStats{CPUSeconds: b.cpu - a.cpu, CPUPerRequestUS: (b.cpu - a.cpu) * 1e6 / float64(max(n, 1))}
	s.Writes = writesBetween(a.writes, b.writes)
	return s
}

// writesBetween is the histogram b less a (same buckets, both cumulative), summed up;
// nil when either reading lacks it or their buckets differ.
func writesBetween(a, b *dto.Histogram) *writeStats {
	if a == nil || b == nil || len(a.GetBucket()) != len(b.GetBucket()) {
		return nil
	}
	type bucket struct {
		le float64
		n  uint64 // cumulative
	}
	bs := make([]bucket, len(b.GetBucket()))
	for i, bb := range b.GetBucket() {
		if bb.GetUpperBound() != a.GetBucket()[i].GetUpperBound() {
			return nil
		}
		bs[i] = bucket{bb.GetUpperBound(), bb.GetCumulativeCount() - a.GetBucket()[i].GetCumulativeCount()}
	}
	w := &writeStats{Count: b.GetSampleCount() - a.GetSampleCount()}
	within := func(le float64) uint64 { // transactions that took at most le
		for _, bk := range bs {
			if bk.le == le {
				return bk.n
			}
		}
		return w.Count
	}
	w.Over5MS, w.Over10MS = w.Count-within(0.005), w.Count-within(0.010)
	quantile := func(q float64) float64 {
		if w.Count == 0 {
			return 0
		}
		rank := q * float64(w.Count)
		lower, below := 0.0, uint64(0)
		for _, bk := range bs {
			if float64(bk.n) >= rank {
				if math.IsInf(bk.le, 1) {
					return lower * 1000 // past the last bound: say the bound
				}
				return (lower + (bk.le-lower)*(rank-float64(below))/float64(bk.n-below)) * 1000
			}
			lower, below = bk.le, bk.n
		}
		return lower * 1000
	}
	w.P50MS, w.P99MS = quantile(0.5), quantile(0.99)
	return w
}
