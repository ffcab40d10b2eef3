// Command riverbench runs sheetq's job engine and River (github.com/riverqueue/river, with
// its SQLite driver) side by side on no-op jobs, in one process, so that the figures are
// taken on the same machine at the same moment and can be compared as ratios
// (BENCHMARKS.md). It is its own Go module, so that the app never depends on River.
//
// Run it from this directory:
//
//	cd bench/river && go run . -n 5000 -rounds 3
//	cd bench/river && go run . -n 5000 -rounds 3 -workers 2,100   # also at River's doc setting
//
// Three variants, each on a fresh SQLite file (WAL, synchronous=FULL) in a temp dir, each
// with the same number of workers (-workers; 2 by default, as BenchmarkLifecycle):
//
//   - sheetq: the real jobs.Engine over sqlite.Open with the server's store settings, the
//     engine's defaults and a no-op handler.
//   - river-default: River's defaults (FetchCooldown 100 ms, FetchPollInterval 1 s) with
//     MaxWorkers set to the worker count.
//   - river-tuned: FetchCooldown 1 ms and FetchPollInterval -river-poll (5 ms).
//
// River fetches at most once per FetchCooldown and at most as many jobs as it has free
// workers, so at 2 workers its default caps it near 20 jobs/s; River's docs set
// MaxWorkers 100 in their SQLite example, hence the second worker count above.
//
// Three scenarios for each:
//
//   - prefilled: N jobs inserted before the timing starts (as River's own riverbench
//     does); the clock runs from starting the workers to the last job completed.
//   - one-by-one: N jobs enqueued one at a time from one goroutine while the workers run;
//     the clock runs from the first enqueue to the last job completed.
//   - pickup: an idle, started engine gets one job; the time from the enqueue returning
//     (the job is durable) to its handler starting, over -pickups rounds (p50 and p95);
//     run at the first worker count only.
//
// With -pg DSN it runs the PostgreSQL variants instead (sheetq-pg, river-pg with
// riverpgxv5, river-pg-tuned) and their scenarios: enqueue one by one and from -callers
// goroutines, end to end on each of -nodes node counts, and idle pickup across nodes
// (pg.go).
//
// "Completed" means committed as completed: the last job's finish is inside the clock.
// Variants run interleaved within each round, so that a change in the machine's load
// touches all of them alike. Nothing here asserts a time.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sheetq/internal/cpuprofile"
)

// variant is one engine under test; each method works on a fresh database in dir.
type variant interface {
	name() string
	workerCount() int
	// prefilled inserts n jobs, then starts the workers and returns the time from
	// the start to the n-th completion.
	prefilled(ctx context.Context, dir string, n int) (time.Duration, error)
	// oneByOne enqueues n jobs one at a time into a running engine and returns the time
	// from the first enqueue to the n-th completion.
	oneByOne(ctx context.Context, dir string, n int) (time.Duration, error)
	// pickup enqueues one job at a time into an idle engine, rounds times, and returns
	// each round's time from the enqueue returning to the handler starting.
	pickup(ctx context.Context, dir string, rounds int) ([]time.Duration, error)
}

// result is one variant's figures in one round.
type result struct {
	variant             string // name and worker count, as "sheetq/w2"
	workers             int
	round               int
	prefilled, oneByOne float64 // jobs/s; 0 when not run
	p50, p95            time.Duration
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("riverbench", flag.ContinueOnError)
	n := fs.Int("n", 5000, "jobs per throughput run")
	rounds := fs.Int("rounds", 3, "rounds; every variant runs once per round, interleaved")
	pickups := fs.Int("pickups", 200, "idle pickup samples per variant and round")
	variants := fs.String("variants", "sheetq,river-default,river-tuned", "comma-separated variants to run")
	scenarios := fs.String("scenarios", "prefilled,one-by-one,pickup", "comma-separated scenarios to run")
	workerList := fs.String("workers", "2", "comma-separated worker counts; each variant runs at each")
	riverPoll := fs.Duration("river-poll", 5*time.Millisecond, "FetchPollInterval of river-tuned")
	dir := fs.String("dir", "", "parent of the per-run temp dirs (default: the system temp dir)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	pgDSN := fs.String("pg", "", "a PostgreSQL DSN: run the PostgreSQL variants and scenarios on it instead (each run on a schema of its own, dropped after)")
	mysqlDSN := fs.String("mysql", "", "with -pg: a MySQL/MariaDB DSN (go-sql-driver's form) to run sheetq-mariadb beside the PostgreSQL variants (each run on a database of its own, dropped after)")
	nodeList := fs.String("nodes", "1,3", "PostgreSQL e2e: comma-separated node counts")
	callers := fs.Int("callers", 16, "PostgreSQL: goroutines enqueueing at once (enqueue-concurrent, e2e)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *pgDSN != "" {
		if !set["variants"] {
			*variants = "sheetq-pg,river-pg,river-pg-tuned"
			if *mysqlDSN != "" {
				*variants += ",sheetq-mariadb"
			}
		}
		if !set["scenarios"] {
			*scenarios = "enqueue,enqueue-concurrent,e2e,pickup"
		}
	}
	stopProfile, err := cpuprofile.Start(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *n < 1 || *rounds < 1 || *pickups < 1 {
		return fmt.Errorf("-n, -rounds and -pickups must be at least 1")
	}
	var workers []int
	for w := range strings.SplitSeq(*workerList, ",") {
		k, err := strconv.Atoi(w)
		if err != nil || k < 1 {
			return fmt.Errorf("bad worker count %q", w)
		}
		workers = append(workers, k)
	}
	if *mysqlDSN != "" && *pgDSN == "" {
		return fmt.Errorf("-mysql runs beside the PostgreSQL variants: give -pg too")
	}
	if *pgDSN != "" {
		return runPGFlags(ctx, out, *pgDSN, *mysqlDSN, *variants, *scenarios, *nodeList, workers[0], *riverPoll,
			pgRun{n: *n, rounds: *rounds, pickups: *pickups, callers: *callers})
	}
	var vs []variant
	for _, w := range workers {
		all := map[string]variant{
			"sheetq":        sheetqVariant{workers: w},
			"river-default": riverVariant{label: "river-default", workers: w},
			"river-tuned":   riverVariant{label: "river-tuned", workers: w, cooldown: time.Millisecond, poll: *riverPoll},
		}
		for v := range strings.SplitSeq(*variants, ",") {
			vv, ok := all[v]
			if !ok && (strings.HasSuffix(v, "-pg") || strings.HasPrefix(v, "river-pg")) {
				return fmt.Errorf("variant %q: %w", v, errNoPG)
			}
			if !ok {
				return fmt.Errorf("unknown variant %q", v)
			}
			vs = append(vs, vv)
		}
	}
	want := map[string]bool{}
	for s := range strings.SplitSeq(*scenarios, ",") {
		switch s {
		case "prefilled", "one-by-one", "pickup":
			want[s] = true
		default:
			return fmt.Errorf("unknown scenario %q", s)
		}
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "# %s  n=%d rounds=%d pickups=%d workers=%s river-tuned FetchPollInterval=%s  %s GOMAXPROCS=%d NumCPU=%d  loadavg %s\n",
		time.Now().UTC().Format(time.RFC3339), *n, *rounds, *pickups, *workerList, *riverPoll, runtime.Version(),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), strings.TrimSpace(string(load)))

	var results []result
	for r := 1; r <= *rounds; r++ {
		for _, v := range vs {
			res := result{variant: fmt.Sprintf("%s/w%d", v.name(), v.workerCount()), workers: v.workerCount(), round: r}
			if want["prefilled"] {
				d, err := inTempDir(*dir, func(d string) (time.Duration, error) { return v.prefilled(ctx, d, *n) })
				if err != nil {
					return fmt.Errorf("%s prefilled: %w", v.name(), err)
				}
				res.prefilled = float64(*n) / d.Seconds()
			}
			if want["one-by-one"] {
				d, err := inTempDir(*dir, func(d string) (time.Duration, error) { return v.oneByOne(ctx, d, *n) })
				if err != nil {
					return fmt.Errorf("%s one-by-one: %w", v.name(), err)
				}
				res.oneByOne = float64(*n) / d.Seconds()
			}
			if want["pickup"] && v.workerCount() == workers[0] {
				var ds []time.Duration
				_, err := inTempDir(*dir, func(d string) (time.Duration, error) {
					var err error
					ds, err = v.pickup(ctx, d, *pickups)
					return 0, err
				})
				if err != nil {
					return fmt.Errorf("%s pickup: %w", v.name(), err)
				}
				res.p50, res.p95 = percentile(ds, 50), percentile(ds, 95)
			}
			results = append(results, res)
			printRow(out, res)
		}
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "# finished %s  loadavg %s\n\n", time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(load)))
	printSummary(out, results)
	return nil
}

// inTempDir runs f in a fresh directory under parent and removes it afterwards.
func inTempDir(parent string, f func(dir string) (time.Duration, error)) (time.Duration, error) {
	d, err := os.MkdirTemp(parent, "riverbench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(d)
	return f(d)
}

func printRow(out io.Writer, r result) {
	fmt.Fprintf(out, "round %d  %-18s  prefilled %7s jobs/s  one-by-one %7s jobs/s  pickup p50 %s ms  p95 %s ms\n",
		r.round, r.variant, rateOrDash(r.prefilled), rateOrDash(r.oneByOne), msOrDash(r.p50), msOrDash(r.p95))
}

// rateOrDash is a rate in jobs/s, or "-" for a scenario that did not run.
func rateOrDash(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", x)
}

// rangeOrDash is the median of xs with its range, or "-" for a scenario that did not run.
func rangeOrDash(xs []float64) string {
	if median(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", median(xs), slices.Min(xs), slices.Max(xs))
}

// msOrDash is d in milliseconds, or "-" for a scenario that did not run.
func msOrDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ms(d))
}

// printSummary prints each variant's median over the rounds, with the spread, and
// sheetq's ratio to each River variant, computed per round (the variants of one round
// ran minutes apart at most) and given as the median of those.
func printSummary(out io.Writer, results []result) {
	byVariant := map[string][]result{}
	var order []string
	for _, r := range results {
		if _, ok := byVariant[r.variant]; !ok {
			order = append(order, r.variant)
		}
		byVariant[r.variant] = append(byVariant[r.variant], r)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tprefilled jobs/s (min-max)\tone-by-one jobs/s (min-max)\tpickup p50 ms\tpickup p95 ms\t")
	for _, v := range order {
		rs := byVariant[v]
		pre := collect(rs, func(r result) float64 { return r.prefilled })
		obo := collect(rs, func(r result) float64 { return r.oneByOne })
		p50 := collect(rs, func(r result) float64 { return ms(r.p50) })
		p95 := collect(rs, func(r result) float64 { return ms(r.p95) })
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", v, rangeOrDash(pre), rangeOrDash(obo),
			msOrDash(time.Duration(median(p50)*float64(time.Millisecond))), msOrDash(time.Duration(median(p95)*float64(time.Millisecond))))
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sheetq (same workers) / variant\tprefilled\tone-by-one\tpickup p50\tpickup p95\t")
	for _, v := range order {
		other := byVariant[v]
		base, ok := byVariant[fmt.Sprintf("sheetq/w%d", other[0].workers)]
		if !ok || strings.HasPrefix(v, "sheetq/") {
			continue
		}
		k := min(len(base), len(other))
		ratio := func(f func(result) float64, inverse bool) float64 {
			var rs []float64
			for i := range k {
				a, b := f(base[i]), f(other[i])
				if inverse {
					a, b = b, a
				}
				if b > 0 {
					rs = append(rs, a/b)
				}
			}
			return median(rs)
		}
		// Throughput: sheetq's jobs/s over the other's. Pickup: the other's latency over
		// sheetq's, so that above 1 means sheetq is faster in every column.
		pickup := func(f func(result) float64) string {
			if x := ratio(f, true); x > 0 {
				return fmt.Sprintf("%.1fx faster", x)
			}
			return "-"
		}
		times := func(f func(result) float64) string {
			if x := ratio(f, false); x > 0 {
				return fmt.Sprintf("%.2fx", x)
			}
			return "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", v,
			times(func(r result) float64 { return r.prefilled }),
			times(func(r result) float64 { return r.oneByOne }),
			pickup(func(r result) float64 { return ms(r.p50) }),
			pickup(func(r result) float64 { return ms(r.p95) }))
	}
	tw.Flush()
}

func collect(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile is the nearest-rank percentile p of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[cmp.Or((len(s)*p+99)/100, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// idleGap is the pause before each pickup round, after the previous job completed: long
// enough for an engine to go back to sleep, and random so that the enqueue lands at a
// random point of any poll cycle instead of in step with it.
func idleGap() time.Duration {
	return 2*time.Millisecond + rand.N(10*time.Millisecond)
}

// waitTimeout bounds every wait, so that a lost completion fails the run instead of
// hanging it.
const waitTimeout = 2 * time.Minute
