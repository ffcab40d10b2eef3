package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

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
		fs.PrintDefaults()
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
	for _, e := range entries {
		if e.Err != nil {
			broken++
			fmt.Fprintf(stdout, "FAIL %s\n", e.Err)
			continue
		}
		printReport(stdout, e.Report)
	}
	if broken > 0 {
		return fmt.Errorf("%d of %d report files in %s are broken", broken, len(entries), dir)
	}
	fmt.Fprintf(stdout, "%d report files in %s are valid\n", len(entries), dir)
	return nil
}

// printReport shows a valid report: a summary line, then what the header says about
// the file, written as the header lines it comes from so an author recognises them.
func printReport(w io.Writer, r export.Report) {
	fmt.Fprintf(w, "ok   %s  %s (source %s, %d params, %d column lines)\n", r.ID, r.Title, r.Source, len(r.Params), len(r.Columns))
	const indent = "       "
	if r.Description != "" {
		for line := range strings.SplitSeq(r.Description, "\n") {
			fmt.Fprintf(w, "%s%s\n", indent, line)
		}
	}
	if r.Filename != "" {
		fmt.Fprintf(w, "%sfilename: %s (+ .xlsx or .csv)\n", indent, r.Filename)
	}
	for _, c := range r.Columns {
		fmt.Fprintf(w, "%scolumn: %s\n", indent, c)
	}
}
