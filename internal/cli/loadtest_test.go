package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadtestBadFlags: usage mistakes exit 2 with one line on stderr.
func TestLoadtestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--profile", "nope"},
		{"--profile", "steady"},
		{"--rate", "20", "--duration", "1s"}, // the default profile is burst
		{"--profile", "steady", "--rate", "1e9", "--duration", "1h", "--server", "http://127.0.0.1:1"},
		{"--profile", "overload", "--duration", "1s"},
		// Nonsense rates, and a rate and duration that send no request at all (a run
		// that would pass having checked nothing); the server cannot be reached, so a
		// run would end in exit 1, not 2.
		{"--profile", "steady", "--rate", "NaN", "--duration", "1s", "--server", "http://127.0.0.1:1"},
		{"--profile", "steady", "--rate", "+Inf", "--duration", "1s", "--server", "http://127.0.0.1:1"},
		{"--profile", "steady", "--rate", "0.5", "--duration", "1s", "--server", "http://127.0.0.1:1"},
		{"--profile", "steady", "--rate", "100", "--duration", "1ms", "--server", "http://127.0.0.1:1"},
		{"--server", "localhost:1"},
		{"--retries", "-1"},
		{"--procs", "0"},
		{"--token", "a\nX-Injected: 1", "--server", "http://127.0.0.1:1"},
		// Checked before the run, whose figures would be lost at its end; the server
		// cannot be reached, so a request would end in exit 1, not 2.
		{"--json", filepath.Join(string(filepath.Separator)+"nonexistent-sheetq-dir", "x.json"), "--server", "http://127.0.0.1:1"},
		{"--json", t.TempDir(), "--server", "http://127.0.0.1:1"}, // a folder
	} {
		_, stderr, code := runCLI(t, append([]string{"loadtest"}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("loadtest %v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
}

// newLatency: nearest-rank percentiles of the samples, in milliseconds.
func TestLatencyPercentiles(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- {
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	got := newLatency(samples)
	want := latency{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}
	if got != want {
		t.Fatalf("newLatency(1..100 ms) = %+v, want %+v", got, want)
	}
	if got := newLatency(nil); got != (latency{}) {
		t.Fatalf("no samples: %+v", got)
	}
	if got := newLatency([]time.Duration{7 * time.Millisecond}); got != (latency{N: 1, P50: 7, P95: 7, P99: 7, Max: 7}) {
		t.Fatalf("one sample: %+v", got)
	}
}
