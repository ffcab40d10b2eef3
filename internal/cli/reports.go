package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"sheetq/internal/datadir"
	"sheetq/jobs/export"
)

// reportsCmd runs `sheetq reports check [DIR]`: CI for report authors.
func reportsCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return usageError{errors.New("usage: sheetq reports check [DIR]")}
	}
	fs := flag.NewFlagSet("reports check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` whose reports folder to check (default: the user's data folder)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sheetq reports check [DIR]\n\nParse every report file in DIR and print its errors with file and line.\nExits 1 if any file is broken. Example:\n  sheetq reports check ./reports\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseWithEnv(fs, args[1:]); err != nil {
		return err
	}
	var dir string
	switch fs.NArg() {
	case 0:
		root, err := dataRoot(*data)
		if err != nil {
			return err
		}
		dir = datadir.Dir{Root: root}.Reports()
	case 1:
		dir = fs.Arg(0)
	default:
		return usageError{errors.New("reports check takes at most one folder")}
	}
	entries, err := export.CheckDir(dir)
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
		fmt.Fprintf(stdout, "ok   %s  %s (source %s, %d params)\n", e.Report.ID, e.Report.Title, e.Report.Source, len(e.Report.Params))
	}
	if broken > 0 {
		return fmt.Errorf("%d of %d report files in %s are broken", broken, len(entries), dir)
	}
	fmt.Fprintf(stdout, "%d report files in %s are valid\n", len(entries), dir)
	return nil
}
