package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"

	"sheetq/internal/client"
)

const jobsUsage = `Usage:
  sheetq jobs list [--status S] [--report R] [--limit N] [--utc] [--json]
  sheetq jobs show ID [--utc] [--json]
  sheetq jobs wait ID [--json]
  sheetq jobs download ID [-o FILE] [--json]
  sheetq jobs cancel ID [--json]
  sheetq jobs retry ID [--json]
  sheetq jobs delete ID [--json]
  sheetq jobs events [ID] [--utc] [--json]

Look at and manage the exports of a running sheetq server. Times are shown in the
local time zone (the TZ variable), named, or in UTC with --utc. Examples:
  sheetq jobs list --status FAILED
  sheetq jobs show 3xq4abcd... --json
  sheetq jobs retry 3xq4abcd...
  sheetq jobs wait 3xq4abcd... && sheetq jobs download 3xq4abcd... -o orders.xlsx

Exit status: 0 done, 1 refused by the server (unknown id, already finished, not
retryable, not finished yet) or, for wait and download, the export failed or expired,
2 bad command line (an unknown --report too), 3 (wait, download) the export was
canceled, 4 server or network error, 130 interrupted (wait, events).
`

// jobsCmd runs `sheetq jobs list|show|wait|download|cancel|retry|delete|events`: one
// file per subcommand.
func jobsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, jobsUsage)
		return usageError{errors.New("jobs needs a subcommand: " + jobsSubs)}
	}
	switch sub := args[0]; sub {
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, jobsUsage)
		return nil
	case "list":
		return jobsList(ctx, args[1:], stdout, stderr)
	case "show":
		return jobsShow(ctx, args[1:], stdout, stderr)
	case "cancel":
		return jobsCancel(ctx, args[1:], stdout, stderr)
	case "retry":
		return jobsRetry(ctx, args[1:], stdout, stderr)
	case "wait":
		return jobsWait(ctx, args[1:], stdout, stderr)
	case "download":
		return jobsDownload(ctx, args[1:], stdout, stderr)
	case "delete":
		return jobsDelete(ctx, args[1:], stdout, stderr)
	case "events":
		return jobsEvents(ctx, args[1:], stdout, stderr)
	default:
		return usageError{fmt.Errorf("unknown jobs subcommand %q (want %s)", sub, jobsSubs)}
	}
}

const jobsSubs = "list, show, wait, download, cancel, retry, delete or events"

// jobsFlags are the flags every jobs subcommand takes.
type jobsFlags struct {
	clientFlags
	asJSON bool
}

// newJobsFlags is the flag set of `sheetq jobs SUB`, whose --help prints help (what the
// subcommand does, with an example) before the flags.
func newJobsFlags(sub, help string, stderr io.Writer) (*flag.FlagSet, *jobsFlags) {
	fs := flag.NewFlagSet("jobs "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	jf := &jobsFlags{}
	jf.register(fs)
	fs.BoolVar(&jf.asJSON, "json", false, "print the server's JSON")
	fs.Usage = func() {
		fmt.Fprint(stderr, help+"\nFlags (each also read from SHEETQ_<NAME>):\n")
		printFlags(stderr, fs)
	}
	return fs, jf
}

// jobAction runs `sheetq jobs SUB ID`: it sends method to the export's URL plus
// suffix, then prints the server's JSON with --json, else hands the job to show. A
// subcommand that prints times passes zone, which takes --utc; the others pass nil.
func jobAction(ctx context.Context, sub, help, method, suffix string, args []string, stdout, stderr io.Writer,
	zone *zoneFlag, show func(c *client.Client, j client.Job) error) error {
	fs, jf := newJobsFlags(sub, help, stderr)
	if zone != nil {
		zone.register(fs)
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := oneExportID(sub, pos); err != nil {
		return err
	}
	c, err := jf.client()
	if err != nil {
		return err
	}
	b, err := c.Call(ctx, method, "/api/v1/exports/"+url.PathEscape(pos[0])+suffix, nil, nil)
	if err != nil {
		return classify(err)
	}
	if jf.asJSON {
		return writeIndented(stdout, b)
	}
	var j client.Job
	if err := json.Unmarshal(b, &j); err != nil {
		return exitError{exitServer, fmt.Errorf("bad answer from the server: %w", err)}
	}
	return show(c, j)
}

// oneExportID refuses the arguments of a jobs command that takes one export ID unless
// they are one that checkID lets through.
func oneExportID(sub string, pos []string) error {
	if len(pos) != 1 {
		return usageError{fmt.Errorf("jobs %s takes one export ID", sub)}
	}
	return checkID(sub, pos[0])
}

// checkID refuses an export ID that no export can have because it is no path segment:
// "", "." and ".." would otherwise name another URL once the path is cleaned (the list
// of exports, or the API's root), so that jobs wait waited forever on nothing and jobs
// delete said DELETE is not allowed. Any other ID goes to the server, whose 404 says it
// has no such export.
func checkID(sub, id string) error {
	if id == "" || id == "." || id == ".." {
		return usageError{fmt.Errorf("jobs %s: %q is not an export ID", sub, id)}
	}
	return nil
}
