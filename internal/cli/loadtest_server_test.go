package cli

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// hist is a cumulative histogram with the given bounds and counts per bucket (not
// cumulative), and the +Inf bucket a parsed exposition has.
func hist(bounds []float64, per []uint64) *dto.Histogram {
	h := &dto.Histogram{}
	var n uint64
	for i, le := range append(bounds, math.Inf(1)) {
		n += per[i]
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: new(le), CumulativeCount: new(n)})
	}
	h.SampleCount = new(n)
	return h
}

// The writes between two readings are the difference of the histograms: counts over 5
// and 10 ms from the buckets, quantiles interpolated within theirs.
func TestWritesBetween(t *testing.T) {
	bounds := []float64{0.001, 0.002, 0.005, 0.01, 0.1}
	a := hist(bounds, []uint64{10, 5, 0, 0, 0, 0})
	// Since a: 100 more, 50 in (0, 1 ms], 40 in (1, 2], 5 in (2, 5], 3 in (5, 10], 2 in (10, 100].
	b := hist(bounds, []uint64{60, 45, 5, 3, 2, 0})
	w := writesBetween(a, b)
	if w == nil {
		t.Fatal("no writes")
	}
	if w.Count != 100 || w.Over5MS != 5 || w.Over10MS != 2 {
		t.Fatalf("count %d, over 5 ms %d, over 10 ms %d; want 100, 5, 2", w.Count, w.Over5MS, w.Over10MS)
	}
	// p50: rank 50, the last of the first bucket: 1 ms. p99: rank 99, the first of the
	// two in (10, 100] ms: halfway, 55 ms.
	if math.Abs(w.P50MS-1) > 1e-9 || math.Abs(w.P99MS-55) > 1e-9 {
		t.Fatalf("p50 %v ms, p99 %v ms; want 1 and 55", w.P50MS, w.P99MS)
	}
	if writesBetween(nil, b) != nil || writesBetween(a, hist(bounds[:4], []uint64{1, 1, 1, 1, 1})) != nil {
		t.Fatal("a missing histogram or other buckets gave figures")
	}
	if z := writesBetween(b, b); z.Count != 0 || z.P50MS != 0 || z.P99MS != 0 {
		t.Fatalf("no writes in between gave %+v", z)
	}
}
