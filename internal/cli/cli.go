// Package cli is sheetq's command line: one file per command (serve, reports, export,
// jobs, backup, doctor, loadtest, version), the flag and SHEETQ_* parsing they share, and
// the exit statuses. main.go only wires it to the process (ARCHITECTURE.md, "Parts").
package cli

import (
	"context"
	"fmt"
	"io"
)

// Run runs the sheetq command line args (without the program name) of the given build
// version. ctx ends on the first shutdown signal; Exit turns the error into the
// process's exit status and its one line on stderr.
func Run(ctx context.Context, version string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		// A double-click: serve on the defaults and open the browser.
		args = []string{"serve", "--open"}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, version, args[1:], stdout, stderr)
	case "reports":
		return reportsCmd(args[1:], stdout, stderr)
	case "export":
		return exportCmd(ctx, args[1:], stdout, stderr)
	case "jobs":
		return jobsCmd(ctx, args[1:], stdout, stderr)
	case "schedules":
		return schedulesCmd(ctx, args[1:], stdout, stderr)
	case "backup":
		return backupCmd(ctx, args[1:], stdout, stderr)
	case "doctor":
		return doctorCmd(ctx, args[1:], stdout, stderr)
	case "store":
		return storeCmd(ctx, args[1:], stdout, stderr)
	case "loadtest":
		return loadtestCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		if len(args) > 1 {
			// Printing the version anyway would pass off "version --json" or a
			// misplaced argument as understood.
			return usageError{fmt.Errorf("version takes no arguments, got %q", args[1:])}
		}
		fmt.Fprintln(stdout, versionString(version))
		return nil
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return usageError{fmt.Errorf("unknown command %q (try: sheetq help)", args[0])}
	}
}

const usage = `sheetq turns slow data pulls into spreadsheets.

Usage:
  sheetq                 serve on 127.0.0.1:8080 and open the browser
  sheetq serve [flags]   serve the API and pages (sheetq serve --help lists the flags)
  sheetq reports check [DIR]
                         check report files (default: the data directory's reports folder)
  sheetq backup FILE [--data DIR]
                         copy the database to FILE, safe while the server runs
  sheetq doctor [--data DIR] [--json] [--fix]
                         check the data directory: database, stray files, missing files, disk space
                         (or the PostgreSQL or MySQL store and bucket that --store and --files name)
  sheetq store copy --to postgres://...|mysql://... [--files s3://...] [--data DIR]
                         move a stopped server's queue into PostgreSQL or MySQL, and its files into a bucket
  sheetq export REPORT [-p name=value]... [--wait] [-o FILE] [--server URL]
                         ask a running server for an export; --wait follows it and downloads the file
  sheetq jobs list|show|wait|download|cancel|retry|delete|events
                         look at and manage a running server's exports
  sheetq schedules list|show|create|preview|pause|resume|delete
                         keep a running server's scheduled exports
  sheetq loadtest [--profile burst|overload|steady] [--server URL]
                         measure a running server under load and check every request
  sheetq version         print the version

Every flag can also be set with SHEETQ_<NAME>, for example SHEETQ_WORKERS=4.
`
