package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL half: sheetq's engine over store/pg and River over riverpgxv5, on one
// database given by -pg, each run on a schema of its own that is dropped afterwards.
//
// Scenarios (each variant, each round, interleaved):
//
//   - enqueue: -n jobs inserted one at a time from one goroutine into a queue nobody
//     works; jobs/s of the inserts alone.
//   - enqueue-concurrent: the same from -callers goroutines at once.
//   - e2e: -n no-op jobs enqueued by -callers goroutines, spread round-robin over the
//     nodes, into running workers on each of -nodes nodes (a node is one pool and one
//     engine or River client); jobs/s from the first enqueue to the last job committed
//     as completed, once per node count.
//   - pickup: an idle node B (its own pool) runs a job enqueued on node A, which runs no
//     workers; the time from A's enqueue returning to B's handler starting, over
//     -pickups rounds (p50, p95). Only a wake-up that crosses the database can do it
//     quickly: LISTEN/NOTIFY for both (sheetq: pg.Listener; River: its notifier).

// pgVariant is one engine on PostgreSQL; dsn names a fresh schema (search_path).
type pgVariant interface {
	name() string
	// enqueue inserts n jobs from callers goroutines, with no worker running, and
	// returns the time from the first insert to the last one returning.
	enqueue(ctx context.Context, dsn string, n, callers int) (time.Duration, error)
	// endToEnd starts workers on nodes nodes, enqueues n jobs from callers goroutines
	// spread over the nodes, and returns the time from the first enqueue to the n-th
	// completion.
	endToEnd(ctx context.Context, dsn string, n, callers, nodes int) (time.Duration, error)
	// pickup enqueues one job at a time on a node that runs no workers into an idle
	// other node, rounds times, and returns each round's time from the enqueue returning
	// to the handler starting.
	pickup(ctx context.Context, dsn string, rounds int) ([]time.Duration, error)
}

// pgResult is one PostgreSQL variant's figures in one round; 0 is "not run".
type pgResult struct {
	variant           string
	round             int
	enqueue, enqueueC float64         // jobs/s
	e2e               map[int]float64 // jobs/s by node count
	p50, p95          time.Duration
}

// pgRun is the settings of a PostgreSQL run.
type pgRun struct {
	dsn                         string
	n, rounds, pickups, callers int
	nodes                       []int
	want                        map[string]bool
}

// runPG runs every variant's scenarios, -rounds times, interleaved, and prints each
// row and then the summary.
func runPG(ctx context.Context, out io.Writer, run pgRun, vs []pgVariant) error {
	var results []pgResult
	for r := 1; r <= run.rounds; r++ {
		for _, v := range vs {
			res := pgResult{variant: v.name(), round: r, e2e: map[int]float64{}}
			if run.want["enqueue"] {
				d, err := onFreshSchema(ctx, run.dsn, func(dsn string) (time.Duration, error) { return v.enqueue(ctx, dsn, run.n, 1) })
				if err != nil {
					return fmt.Errorf("%s enqueue: %w", v.name(), err)
				}
				res.enqueue = float64(run.n) / d.Seconds()
			}
			if run.want["enqueue-concurrent"] {
				d, err := onFreshSchema(ctx, run.dsn, func(dsn string) (time.Duration, error) {
					return v.enqueue(ctx, dsn, run.n, run.callers)
				})
				if err != nil {
					return fmt.Errorf("%s enqueue-concurrent: %w", v.name(), err)
				}
				res.enqueueC = float64(run.n) / d.Seconds()
			}
			if run.want["e2e"] {
				for _, k := range run.nodes {
					d, err := onFreshSchema(ctx, run.dsn, func(dsn string) (time.Duration, error) {
						return v.endToEnd(ctx, dsn, run.n, run.callers, k)
					})
					if err != nil {
						return fmt.Errorf("%s e2e on %d nodes: %w", v.name(), k, err)
					}
					res.e2e[k] = float64(run.n) / d.Seconds()
				}
			}
			if run.want["pickup"] {
				var ds []time.Duration
				_, err := onFreshSchema(ctx, run.dsn, func(dsn string) (time.Duration, error) {
					var err error
					ds, err = v.pickup(ctx, dsn, run.pickups)
					return 0, err
				})
				if err != nil {
					return fmt.Errorf("%s pickup: %w", v.name(), err)
				}
				res.p50, res.p95 = percentile(ds, 50), percentile(ds, 95)
			}
			results = append(results, res)
			printPGRow(out, run, res)
		}
	}
	printPGSummary(out, run, results)
	return nil
}

// onFreshSchema runs f on a schema made for it, reached through the DSN's search_path,
// and drops the schema with everything in it afterwards.
func onFreshSchema(ctx context.Context, dsn string, f func(dsn string) (time.Duration, error)) (time.Duration, error) {
	name := "riverbench_" + strings.ToLower(rand.Text()[:12])
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+name); err != nil {
		return 0, err
	}
	defer admin.Exec(context.WithoutCancel(ctx), `DROP SCHEMA `+name+` CASCADE`)
	sdsn, err := withSearchPath(dsn, name)
	if err != nil {
		return 0, err
	}
	return f(sdsn)
}

// withSearchPath adds search_path to a URL or a keyword/value DSN.
func withSearchPath(dsn, schema string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse -pg: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// fanOut runs n calls of f (with the call's number) on callers goroutines and returns
// the first error.
func fanOut(n, callers int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range max(callers, 1) {
		wg.Go(func() {
			for i := w; i < n; i += max(callers, 1) {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func printPGRow(out io.Writer, run pgRun, r pgResult) {
	var e2e []string
	for _, k := range run.nodes {
		e2e = append(e2e, fmt.Sprintf("e2e %dn %7s", k, rateOrDash(r.e2e[k])))
	}
	fmt.Fprintf(out, "round %d  %-15s  enqueue %6s  enqueue x%d %6s  %s jobs/s  pickup p50 %s ms  p95 %s ms\n",
		r.round, r.variant, rateOrDash(r.enqueue), run.callers, rateOrDash(r.enqueueC), strings.Join(e2e, "  "),
		msOrDash(r.p50), msOrDash(r.p95))
}

// printPGSummary prints each variant's median over the rounds (with the range), and
// sheetq-pg's ratio to each River variant, taken per round and given as their median.
// Every ratio is "sheetq is better" above 1: throughput over throughput, and the other's
// latency over sheetq's.
func printPGSummary(out io.Writer, run pgRun, results []pgResult) {
	type column = pgColumn
	cols := []column{
		{"enqueue", func(r pgResult) float64 { return r.enqueue }, false},
		{fmt.Sprintf("enqueue x%d", run.callers), func(r pgResult) float64 { return r.enqueueC }, false},
	}
	for _, k := range run.nodes {
		cols = append(cols, column{fmt.Sprintf("e2e %d node(s)", k), func(r pgResult) float64 { return r.e2e[k] }, false})
	}
	cols = append(cols,
		column{"pickup p50 ms", func(r pgResult) float64 { return ms(r.p50) }, true},
		column{"pickup p95 ms", func(r pgResult) float64 { return ms(r.p95) }, true})

	byVariant := map[string][]pgResult{}
	var order []string
	for _, r := range results {
		if _, ok := byVariant[r.variant]; !ok {
			order = append(order, r.variant)
		}
		byVariant[r.variant] = append(byVariant[r.variant], r)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "variant (jobs/s; median, min-max)\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", c.title)
	}
	fmt.Fprintln(tw)
	for _, v := range order {
		fmt.Fprintf(tw, "%s\t", v)
		for _, c := range cols {
			xs := collectPG(byVariant[v], c.get)
			switch {
			case median(xs) == 0:
				fmt.Fprint(tw, "-\t")
			case c.latency:
				fmt.Fprintf(tw, "%.2f\t", median(xs))
			default:
				fmt.Fprintf(tw, "%s\t", rangeOrDash(xs))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	printRatios(out, "sheetq-pg", cols, order, byVariant)
	printRatios(out, "sheetq-mariadb", cols, order, byVariant)
	base, ok := byVariant["sheetq-pg"]
	if !ok {
		return
	}
	// The target, said plainly rather than left to the reader.
	p95 := median(collectPG(base, func(r pgResult) float64 { return ms(r.p95) }))
	if p95 > 0 {
		verdict := "meets"
		if p95 >= 10 {
			verdict = "misses"
		}
		fmt.Fprintf(out, "\nsheetq-pg pickup p95 across nodes %.2f ms: %s the 10 ms target (GOMAXPROCS=%d)\n", p95, verdict, runtime.GOMAXPROCS(0))
	}
}

// pgColumn is one column of the summary.
type pgColumn struct {
	title   string
	get     func(pgResult) float64
	latency bool
}

// printRatios prints the ratio of variant baseName to each other variant, per column,
// taken per round and given as their median.
func printRatios(out io.Writer, baseName string, cols []pgColumn, order []string, byVariant map[string][]pgResult) {
	base, ok := byVariant[baseName]
	if !ok {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s / variant (above 1: %s ahead)\t", baseName, baseName)
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", c.title)
	}
	fmt.Fprintln(tw)
	for _, v := range order {
		if v == baseName {
			continue
		}
		other := byVariant[v]
		fmt.Fprintf(tw, "%s\t", v)
		for _, c := range cols {
			var rs []float64
			for i := range min(len(base), len(other)) {
				a, b := c.get(base[i]), c.get(other[i])
				if c.latency {
					a, b = b, a
				}
				if a > 0 && b > 0 {
					rs = append(rs, a/b)
				}
			}
			if len(rs) == 0 {
				fmt.Fprint(tw, "-\t")
			} else {
				fmt.Fprintf(tw, "%.2fx\t", median(rs))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func collectPG(rs []pgResult, f func(pgResult) float64) []float64 {
	out := make([]float64, 0, len(rs))
	for _, r := range rs {
		out = append(out, f(r))
	}
	if len(out) == 0 || slices.Max(out) == 0 {
		return []float64{0}
	}
	return out
}

// runPGFlags checks the PostgreSQL run's flags, prints the header and runs it.
func runPGFlags(ctx context.Context, out io.Writer, dsn, mysqlDSN, variants, scenarios, nodeList string, workers int,
	riverPoll time.Duration, run pgRun) error {
	run.dsn = dsn
	if run.callers < 1 {
		return fmt.Errorf("-callers must be at least 1")
	}
	for k := range strings.SplitSeq(nodeList, ",") {
		n, err := strconv.Atoi(k)
		if err != nil || n < 1 {
			return fmt.Errorf("bad node count %q", k)
		}
		run.nodes = append(run.nodes, n)
	}
	run.want = map[string]bool{}
	for s := range strings.SplitSeq(scenarios, ",") {
		switch s {
		case "enqueue", "enqueue-concurrent", "e2e", "pickup":
			run.want[s] = true
		default:
			return fmt.Errorf("unknown PostgreSQL scenario %q (enqueue, enqueue-concurrent, e2e, pickup)", s)
		}
	}
	all := map[string]pgVariant{
		"sheetq-pg":      sheetqPGVariant{workers: workers},
		"river-pg":       riverPGVariant{label: "river-pg", workers: workers},
		"river-pg-tuned": riverPGVariant{label: "river-pg-tuned", workers: workers, cooldown: time.Millisecond, poll: riverPoll},
	}
	if mysqlDSN != "" {
		all["sheetq-mariadb"] = sheetqMySQLVariant{workers: workers, dsn: mysqlDSN}
	}
	var vs []pgVariant
	for v := range strings.SplitSeq(variants, ",") {
		vv, ok := all[v]
		if !ok {
			return fmt.Errorf("unknown PostgreSQL variant %q (sheetq-pg, river-pg, river-pg-tuned; sheetq-mariadb with -mysql)", v)
		}
		vs = append(vs, vv)
	}
	var version string
	if conn, err := pgx.Connect(ctx, dsn); err != nil {
		return fmt.Errorf("-pg: %w", err)
	} else {
		conn.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&version)
		conn.Close(ctx)
	}
	if mysqlDSN != "" {
		v, err := mysqlVersion(ctx, mysqlDSN)
		if err != nil {
			return fmt.Errorf("-mysql: %w", err)
		}
		version += "  MySQL/MariaDB " + v
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "# %s  PostgreSQL %s  n=%d rounds=%d pickups=%d workers/node=%d callers=%d nodes=%s river-pg-tuned FetchCooldown=1ms FetchPollInterval=%s  %s GOMAXPROCS=%d NumCPU=%d  loadavg %s\n",
		time.Now().UTC().Format(time.RFC3339), version, run.n, run.rounds, run.pickups, workers, run.callers, nodeList, riverPoll,
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), strings.TrimSpace(string(load)))
	if err := printCommits(ctx, out, dsn, mysqlDSN, run.callers); err != nil {
		return err
	}
	if err := runPG(ctx, out, run, vs); err != nil {
		return err
	}
	if err := printCommits(ctx, out, dsn, mysqlDSN, run.callers); err != nil {
		return err
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Fprintf(out, "# finished %s  loadavg %s\n", time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(load)))
	return nil
}

// printCommits prints the servers' raw commit rates, each write's limit: single-row
// INSERTs in autocommit from one connection and from callers at once (commitSamples
// each), on PostgreSQL and, with -mysql, on MariaDB.
func printCommits(ctx context.Context, out io.Writer, pgDSN, mysqlDSN string, callers int) error {
	const commitSamples = 2000
	line := "# raw commits/s (single-row INSERT, autocommit):"
	for _, conns := range []int{1, callers} {
		r, err := pgCommits(ctx, pgDSN, commitSamples, conns)
		if err != nil {
			return fmt.Errorf("PostgreSQL raw commits: %w", err)
		}
		line += fmt.Sprintf("  PostgreSQL x%d %.0f", conns, r)
	}
	if mysqlDSN != "" {
		for _, conns := range []int{1, callers} {
			r, err := mysqlCommits(ctx, mysqlDSN, commitSamples, conns)
			if err != nil {
				return fmt.Errorf("MariaDB raw commits: %w", err)
			}
			line += fmt.Sprintf("  MariaDB x%d %.0f", conns, r)
		}
	}
	fmt.Fprintln(out, line)
	return nil
}

// pgCommits is mysqlCommits on PostgreSQL: n single-row INSERTs in autocommit from conns
// connections at once, on a fresh schema; commits/s.
func pgCommits(ctx context.Context, dsn string, n, conns int) (float64, error) {
	d, err := onFreshSchema(ctx, dsn, func(dsn string) (time.Duration, error) {
		cs := make([]*pgx.Conn, conns)
		for i := range cs {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return 0, err
			}
			defer c.Close(context.WithoutCancel(ctx))
			cs[i] = c
		}
		if _, err := cs[0].Exec(ctx, `CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT)`); err != nil {
			return 0, err
		}
		t0 := time.Now()
		err := fanOut(n, conns, func(i int) error {
			_, err := cs[i%conns].Exec(ctx, `INSERT INTO t (v) VALUES ($1)`, strconv.Itoa(i))
			return err
		})
		return time.Since(t0), err
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / d.Seconds(), nil
}
