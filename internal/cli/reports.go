package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"sheetq/app"
	"sheetq/internal/datadir"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// reportsCmd runs `sheetq reports check [DIR]`: CI for report authors.
func reportsCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usageError{errors.New("usage: sheetq reports check [DIR]")}
	}
	fs := flag.NewFlagSet("reports check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` whose reports folder to check (default: the user's data folder)")
	config := fs.String("config", "", "config `file` whose [queues] the reports may name (default without DIR: <data>/sheetq.toml; with DIR: none, and queue names are checked for their form only)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sheetq reports check [--config FILE] [DIR]\n\nParse every report file in DIR and print its errors with file and line.\nExits 1 if any file is broken. Example:\n  sheetq reports check --config ./sheetq.toml ./reports\n\nFlags:\n")
		printFlags(stderr, fs)
	}
	if err := parseWithEnv(fs, args[1:]); err != nil {
		return err
	}
	var dir, configPath string
	optional := false
	switch fs.NArg() {
	case 0:
		root, err := dataRoot(*data)
		if err != nil {
			return err
		}
		dir = datadir.Dir{Root: root}.Reports()
		configPath, optional = datadir.Dir{Root: root}.Config(), true
	case 1:
		dir = fs.Arg(0)
	default:
		return usageError{errors.New("reports check takes at most one folder")}
	}
	if *config != "" {
		configPath, optional = *config, false
	}
	// The queues a report may name are the lanes the server would run (rule 27).
	var queues []string
	if configPath != "" {
		fc, err := app.LoadFileConfig(configPath, optional)
		if err != nil {
			return err
		}
		eng, err := fc.Lanes(jobs.Config{}, false)
		if err != nil {
			return err
		}
		queues = append([]string{store.DefaultQueue}, slices.Sorted(maps.Keys(eng.Queues))...)
	}
	entries, err := export.CheckDir(dir, queues)
	if err != nil {
		return err
	}
	broken := 0
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, e := range entries {
		if e.Err != nil {
			broken++
			fmt.Fprintf(tw, "FAIL\t\t%s\n", e.Err)
			continue
		}
		printReport(tw, e.Report)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if broken > 0 {
		return fmt.Errorf("%d of %d report files in %s are broken", broken, len(entries), dir)
	}
	fmt.Fprintf(stdout, "%d report files in %s are valid\n", len(entries), dir)
	return nil
}

// printReport shows a valid report as a row of tw: ok, its id, then its title and a
// summary; under the title, what the header says about the file, written as the header
// lines it comes from so an author recognises them. The detail lines (and a broken
// file's error) are rows of the same table, with empty first cells, so that the ids and
// titles of all reports line up.
func printReport(tw io.Writer, r export.Report) {
	fmt.Fprintf(tw, "ok\t%s\t%s (source %s, %s, %s)\n", r.ID, r.Title, r.Source,
		plural(len(r.Params), "param", "params"), plural(len(r.Columns), "column line", "column lines"))
	detail := func(s string) { fmt.Fprintf(tw, "\t\t%s\n", s) }
	if r.Description != "" {
		for line := range strings.SplitSeq(r.Description, "\n") {
			detail(line)
		}
	}
	if r.Filename != "" {
		detail("filename: " + r.Filename + " (+ .xlsx or .csv)")
	}
	for _, c := range r.Columns {
		detail("column: " + c.String())
	}
}

// plural is "1 param", "0 params", "2 params".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
