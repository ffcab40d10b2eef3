//go:build faultpoints

package jobs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"sheetq/store"
)

// With -tags faultpoints, SHEETQ_FAULT arms named points where the process kills itself
// with SIGKILL (no deferred code, no flush). It is a comma-separated list of
//
//	point       the first time execution reaches the point
//	point@N     the Nth time it reaches the point (N >= 1)
//	point%P     each time with probability P percent (0 < P <= 100)
//
// The probabilities draw from a generator seeded by SHEETQ_FAULT_SEED (an unsigned
// integer; random when unset), so a failing run can be replayed. The process writes one
// line to stderr before it dies, naming the point and how often it was reached.
// This is for crash tests only; production builds compile the no-op in fault.go.
//
// Two more variables set the node up for crash tests: SHEETQ_TEST_CLOCK_OFFSET (a
// duration) sets its own clock off, and SHEETQ_TEST_S3_PART_SIZE (bytes, or 5MiB) lowers
// the part size of its uploads to a bucket, so that an export of a few MiB goes up in
// parts and reaches the point mid-upload.
func init() {
	if v := os.Getenv("SHEETQ_TEST_CLOCK_OFFSET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sheetq: SHEETQ_TEST_CLOCK_OFFSET:", err)
			os.Exit(2)
		}
		clockOffset = d
	}
	if v := os.Getenv("SHEETQ_TEST_S3_PART_SIZE"); v != "" {
		n, err := parseByteSize(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sheetq: SHEETQ_TEST_S3_PART_SIZE:", err)
			os.Exit(2)
		}
		testPartSize = n
	}
	spec := os.Getenv("SHEETQ_FAULT")
	if spec == "" {
		return
	}
	arms, err := parseFaults(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sheetq: SHEETQ_FAULT:", err)
		os.Exit(2)
	}
	seed := rand.Uint64()
	if s := os.Getenv("SHEETQ_FAULT_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			fmt.Fprintln(os.Stderr, "sheetq: SHEETQ_FAULT_SEED:", err)
			os.Exit(2)
		}
	}
	var (
		mu   sync.Mutex
		rng  = rand.New(rand.NewPCG(seed, seed^0x5eed))
		hits = map[string]int{}
	)
	faultsArmed = true
	faultPoint = func(name string) {
		a, ok := arms[name]
		if !ok {
			return
		}
		mu.Lock()
		hits[name]++
		n := hits[name]
		fire := (a.nth > 0 && n == a.nth) || (a.percent > 0 && rng.Float64()*100 < a.percent)
		if !fire {
			mu.Unlock()
			return
		}
		// The lock is never released: no other point fires while this process dies.
		fmt.Fprintf(os.Stderr, "sheetq: fault point %s reached (hit %d, seed %d): SIGKILL\n", name, n, seed)
		p, _ := os.FindProcess(os.Getpid())
		_ = p.Kill()
		select {} // Kill is asynchronous on some platforms; never continue past the point
	}
	// The points inside a store's transaction (mid-batch-end in SQLite's write queue).
	store.SetCrashPoint(faultPoint)
}

// parseByteSize reads a whole number of bytes, or of KiB or MiB with that suffix ("5MiB").
func parseByteSize(v string) (int64, error) {
	num, unit := v, int64(1)
	if n, ok := strings.CutSuffix(v, "MiB"); ok {
		num, unit = n, 1<<20
	} else if n, ok := strings.CutSuffix(v, "KiB"); ok {
		num, unit = n, 1<<10
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive number of bytes, KiB or MiB, such as 5MiB", v)
	}
	return n * unit, nil
}

// faultArm is when one point fires: on its nth hit, or with a probability per hit.
type faultArm struct {
	nth     int
	percent float64
}

func parseFaults(spec string) (map[string]faultArm, error) {
	arms := map[string]faultArm{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, a := item, faultArm{nth: 1}
		if i := strings.IndexAny(item, "@%"); i >= 0 {
			name = item[:i]
			v, err := strconv.ParseFloat(item[i+1:], 64)
			switch {
			case err != nil:
				return nil, fmt.Errorf("%q: %w", item, err)
			case item[i] == '@' && (v < 1 || v != float64(int(v))):
				return nil, fmt.Errorf("%q: the hit count must be a whole number from 1", item)
			case item[i] == '%' && (v <= 0 || v > 100):
				return nil, fmt.Errorf("%q: the probability must be above 0 and at most 100 percent", item)
			case item[i] == '@':
				a = faultArm{nth: int(v)}
			default:
				a = faultArm{percent: v}
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%q: no point name", item)
		}
		arms[name] = a
	}
	return arms, nil
}
