package metrics

import (
	"testing"
	"time"
)

func TestDepthBucketsKeepTheMostPerSlot(t *testing.T) {
	var d Depth
	now := time.Date(2026, 1, 2, 10, 59, 30, 0, time.UTC)
	if bs, since := d.Buckets(now, 5*time.Minute, 12); len(bs) != 12 || bs[11].Sampled || !since.IsZero() {
		t.Fatalf("no samples: %+v since %v", bs, since)
	}
	d.record(now.Add(-26*time.Hour), 99) // older than a day: its slot is reused
	d.record(now.Add(-12*time.Minute), 4)
	d.record(now.Add(-11*time.Minute), 9)
	d.record(now.Add(-11*time.Minute+10*time.Second), 2)
	d.record(now, 3)
	bs, since := d.Buckets(now, 5*time.Minute, 12)
	if !since.Equal(now.Add(-26 * time.Hour)) {
		t.Errorf("since %v", since)
	}
	// Buckets as the store's throughput: aligned on 5 minutes, the last holds now.
	if want := time.Date(2026, 1, 2, 10, 55, 0, 0, time.UTC); !bs[11].Start.Equal(want) {
		t.Errorf("last bucket starts %v, want %v", bs[11].Start, want)
	}
	got := map[int]int{}
	for i, b := range bs {
		if b.Sampled {
			got[i] = b.Waiting
		}
	}
	// 10:47:30 and 10:48:30 fall in the 10:45 bucket (index 9); 10:59:30 in the last.
	if len(got) != 2 || got[9] != 9 || got[11] != 3 {
		t.Errorf("sampled buckets %v", got)
	}
	day, _ := d.Buckets(now, time.Hour, 24)
	for _, b := range day {
		if b.Waiting == 99 {
			t.Error("a sample older than a day is shown")
		}
	}
}
