// Command xlsxbench measures the xlsx export: time, rows per second, peak memory and
// file size for a few ways of writing the same rows from one SQLite file.
//
//	go run ./jobs/export/internal/xlsxbench -rows 100000,1000000,3000000
//
// Modes:
//
//   - pipeline: the real thing. A job is enqueued in a store in a temporary directory
//     and run by the engine with the export kind, whose report is a SQL query over the
//     benchmark's SQLite file; the file is written, fsynced, renamed and hashed. The
//     child collects garbage as the server does by default (GOGC=400 under its soft
//     memory limit, internal/gcdefaults), so its peak RSS is the server's as shipped.
//   - pipeline-csv: the same export with "format": "csv".
//   - excelize: a bare excelize StreamWriter over the same rows, saved with SaveAs,
//     which builds the whole zip in memory first (excelize issue #2357).
//   - excelize-direct: the same, with SetZipWriter handing excelize a zip writer over
//     the output file, so the package goes straight to disk.
//   - csv: bare encoding/csv over the same rows, for scale.
//
// Every mode reads the rows from the same SQLite file through the export package's
// SQLite source (OpenSource), so the modes differ only in how they write. Each run is a
// child process (this program again), so its peak RSS is its own. The SQLite files
// are generated once per row count, deterministically, and kept in -cache. With -keep,
// each run's file is kept too, as MODE-ROWS.xlsx (or .csv), for benchmarks that read
// the files the export writes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"sheetq/internal/cpuprofile"
	"sheetq/internal/gcdefaults"
	"sheetq/jobs"
	"sheetq/jobs/export"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "xlsxbench:", err)
		os.Exit(1)
	}
}

// result is what a child run reports to its parent, as JSON on stdout.
type result struct {
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`

	path string // the written file, in the child's temporary folder
}

var allModes = []string{"pipeline", "pipeline-resume", "excelize", "excelize-direct", "pipeline-csv", "csv"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("xlsxbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rowsFlag  = fs.String("rows", "100000,1000000,3000000", "comma-separated row counts")
		modesFlag = fs.String("modes", strings.Join(allModes, ","), "comma-separated modes: "+strings.Join(allModes, ", "))
		cache     = fs.String("cache", filepath.Join(os.TempDir(), "sheetq-xlsxbench"), "where the generated SQLite files are kept")
		repeat    = fs.Int("repeat", 1, "runs per mode and size (each a fresh child process)")
		child     = fs.Bool("child", false, "internal: run one mode on one size and print its result as JSON")
		mode      = fs.String("mode", "", "internal, with -child: the mode")
		db        = fs.String("db", "", "internal, with -child: the SQLite file")
		cpuprof   = fs.String("cpuprofile", "", "with one mode and size: write a CPU profile of the child here")
		memprof   = fs.String("memprofile", "", "with one mode and size: write a heap profile (allocations) of the child here")
		keep      = fs.String("keep", "", "keep each run's file in this folder (on the temporary folder's file system) as MODE-ROWS.xlsx or .csv")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *child {
		n, err := strconv.ParseInt(*rowsFlag, 10, 64)
		if err != nil {
			return fmt.Errorf("-rows: %w", err)
		}
		return runChild(ctx, *mode, *db, n, *cpuprof, *memprof, *keep, stdout)
	}

	var sizes []int64
	for s := range strings.SplitSeq(*rowsFlag, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(strings.ReplaceAll(s, "_", "")), 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("-rows: bad count %q", s)
		}
		sizes = append(sizes, n)
	}
	var modes []string
	for m := range strings.SplitSeq(*modesFlag, ",") {
		m = strings.TrimSpace(m)
		if !contains(allModes, m) {
			return fmt.Errorf("-modes: unknown mode %q", m)
		}
		modes = append(modes, m)
	}
	if (*cpuprof != "" || *memprof != "") && (len(sizes) > 1 || len(modes) > 1 || *repeat > 1) {
		return errors.New("-cpuprofile and -memprofile need one mode, one size and one run")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*cache, 0o755); err != nil {
		return err
	}

	type row struct {
		mode string
		rows int64
		res  result
		rss  int64
		cpu  time.Duration
	}
	var table []row
	for _, n := range sizes {
		path, err := ensureDB(ctx, *cache, n, stderr)
		if err != nil {
			return err
		}
		// Modes alternate within each round, so a busy spell on the machine is shared.
		for range *repeat {
			for _, m := range modes {
				fmt.Fprintf(stderr, "running %s on %d rows...\n", m, n)
				cmd := exec.CommandContext(ctx, self, "-child", "-mode", m, "-db", path, "-rows", strconv.FormatInt(n, 10),
					"-cpuprofile", *cpuprof, "-memprofile", *memprof, "-keep", *keep)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, stderr
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("%s on %d rows: %w", m, n, err)
				}
				var res result
				if err := json.Unmarshal(out.Bytes(), &res); err != nil {
					return fmt.Errorf("%s on %d rows: bad result %q: %w", m, n, out.String(), err)
				}
				if res.Rows != n {
					return fmt.Errorf("%s on %d rows: wrote %d rows", m, n, res.Rows)
				}
				ps := cmd.ProcessState
				table = append(table, row{m, n, res, maxRSS(ps), ps.UserTime() + ps.SystemTime()})
			}
		}
	}

	fmt.Fprintln(stdout, "| mode | rows | time | rows/s | CPU (user+sys) | rows/CPU-s | peak RSS | file size |")
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range table {
		fmt.Fprintf(stdout, "| %s | %s | %.1f s | %s | %.1f s | %s | %s | %s |\n", r.mode, group(r.rows),
			r.res.Seconds, group(int64(float64(r.rows)/r.res.Seconds)),
			r.cpu.Seconds(), group(int64(float64(r.rows)/r.cpu.Seconds())), mib(r.rss), mib(r.res.Bytes))
	}

	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "time: wall time of the export in the child process; CPU: the child's user+sys time;")
	fmt.Fprintln(stdout, "peak RSS: the child's maxrss (getrusage); file size: the written file.")

	// The targets. With -repeat, each figure is the best of the runs (the
	// fastest wall time, the least CPU time), except peak RSS: the highest.
	type best struct {
		wall, cpu time.Duration
		rss       int64
	}
	bests := map[string]map[int64]*best{}
	for _, r := range table {
		if bests[r.mode] == nil {
			bests[r.mode] = map[int64]*best{}
		}
		wall := time.Duration(r.res.Seconds * float64(time.Second))
		b := bests[r.mode][r.rows]
		if b == nil {
			bests[r.mode][r.rows] = &best{wall, r.cpu, r.rss}
			continue
		}
		b.wall, b.cpu, b.rss = min(b.wall, wall), min(b.cpu, r.cpu), max(b.rss, r.rss)
	}
	lo, hi := sizes[0], sizes[0]
	for _, n := range sizes {
		lo, hi = min(lo, n), max(hi, n)
	}
	fmt.Fprintln(stdout)
	if lo != hi {
		for _, m := range modes {
			a, b := bests[m][lo], bests[m][hi]
			if a.rss > 0 && b.rss > 0 {
				fmt.Fprintf(stdout, "- %s: peak RSS at %s rows is %.2f x that at %s rows (target for pipeline: <= 1.25)\n",
					m, group(hi), float64(b.rss)/float64(a.rss), group(lo))
			}
		}
	}
	for _, n := range sizes {
		p := bests["pipeline"][n]
		if p == nil {
			continue
		}
		for _, m := range []string{"excelize", "excelize-direct"} {
			if e := bests[m][n]; e != nil {
				fmt.Fprintf(stdout, "- %s rows: pipeline runs at %.2fx %s's rows/s by wall time, %.2fx by CPU time (target at 1,000,000 rows: >= 2x by wall time)\n",
					group(n), e.wall.Seconds()/p.wall.Seconds(), m, e.cpu.Seconds()/p.cpu.Seconds())
			}
		}
	}
	return nil
}

// runChild runs one mode and prints its result. With keep, the file it wrote is moved
// there.
func runChild(ctx context.Context, mode, db string, n int64, cpuprof, memprof, keep string, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "xlsxbench-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stopProfile, err := cpuprofile.Start(cpuprof)
	if err != nil {
		return err
	}
	defer stopProfile()
	query := fmt.Sprintf("SELECT %s FROM orders WHERE id <= %d ORDER BY id", strings.Join(columnNames, ", "), n)
	start := time.Now()
	var res result
	switch mode {
	case "pipeline":
		gcdefaults.Apply(jobs.Defaults().Workers)
		res, err = runPipeline(ctx, dir, db, query, export.FormatXLSX, false)
	case "pipeline-resume":
		gcdefaults.Apply(jobs.Defaults().Workers)
		res, err = runPipeline(ctx, dir, db, query, export.FormatXLSX, true)
	case "pipeline-csv":
		gcdefaults.Apply(jobs.Defaults().Workers)
		res, err = runPipeline(ctx, dir, db, query, export.FormatCSV, false)
	case "excelize":
		res, err = runExcelize(ctx, dir, db, query, false)
	case "excelize-direct":
		res, err = runExcelize(ctx, dir, db, query, true)
	case "csv":
		res, err = runCSV(ctx, dir, db, query)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	res.Seconds = time.Since(start).Seconds()
	if keep != "" {
		if err := os.Rename(res.path, filepath.Join(keep, fmt.Sprintf("%s-%d%s", mode, n, filepath.Ext(res.path)))); err != nil {
			return fmt.Errorf("-keep: %w", err)
		}
	}
	if memprof != "" {
		f, err := os.Create(memprof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return json.NewEncoder(stdout).Encode(res)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func mib(n int64) string {
	if n <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
