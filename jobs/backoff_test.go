package jobs

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBackoff: attempt n waits base*2^(n-1), capped at max, with equal jitter: somewhere
// in [d/2, d].
func TestBackoff(t *testing.T) {
	e := New(nil, Config{BackoffBase: 10 * time.Millisecond, BackoffMax: 300 * time.Millisecond})
	for _, tc := range []struct {
		attempt int
		d       time.Duration
	}{
		{1, 10 * time.Millisecond},
		{2, 20 * time.Millisecond},
		{3, 40 * time.Millisecond},
		{4, 80 * time.Millisecond},
		{5, 160 * time.Millisecond},
		{6, 300 * time.Millisecond}, // capped
		{60, 300 * time.Millisecond},
		{1000, 300 * time.Millisecond},
	} {
		lo, hi := tc.d, time.Duration(0)
		for range 500 {
			got := e.backoff(tc.attempt)
			if got < tc.d/2 || got > tc.d {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tc.attempt, got, tc.d/2, tc.d)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		// 500 draws from a range of millions of nanoseconds: equal ones mean no jitter.
		if lo == hi {
			t.Fatalf("backoff(%d) always %s: no jitter", tc.attempt, lo)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		code      string
		permanent bool
	}{
		{Permanentf("bad_params", "x"), "bad_params", true},
		{Retryable("upstream", errTest), "upstream", false},
		{errTest, "error", false},
		// A full disk has its own code under whatever wrapped it.
		{Retryable("io", fmt.Errorf("write part: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})), "disk_full", false},
		{fmt.Errorf("spill: %w", syscall.ENOSPC), "disk_full", false},
	} {
		code, msg, permanent := classify(tc.err)
		if code != tc.code || permanent != tc.permanent || msg != tc.err.Error() {
			t.Errorf("classify(%v) = %q %q %v", tc.err, code, msg, permanent)
		}
	}
}

var errTest = testError("test error")

type testError string

func (e testError) Error() string { return string(e) }
