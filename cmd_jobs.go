package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

const jobsUsage = `Usage:
  sheetq jobs list [--status S] [--report R] [--limit N] [--json]
  sheetq jobs show ID [--json]
  sheetq jobs cancel ID [--json]
  sheetq jobs retry ID [--json]

Look at and manage the exports of a running sheetq server. Examples:
  sheetq jobs list --status FAILED
  sheetq jobs show 3xq4abcd... --json
  sheetq jobs retry 3xq4abcd...

Exit status: 0 done, 1 refused by the server (unknown id, already finished, not
retryable), 2 bad command line, 4 server or network error.
`

// jobsCmd runs `sheetq jobs list|show|cancel|retry`.
func jobsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, jobsUsage)
		return usageError{errors.New("jobs needs a subcommand: list, show, cancel or retry")}
	}
	sub := args[0]
	switch sub {
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, jobsUsage)
		return nil
	case "list", "show", "cancel", "retry":
	default:
		return usageError{fmt.Errorf("unknown jobs subcommand %q (want list, show, cancel or retry)", sub)}
	}
	fs := flag.NewFlagSet("jobs "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cf     clientFlags
		asJSON bool
		status string
		report string
		limit  int
	)
	cf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the server's JSON")
	examples := map[string]string{
		"list":   "Usage: sheetq jobs list [--status S] [--report R] [--limit N] [--json]\n\nList exports, newest first. Example:\n  sheetq jobs list --status PROCESSING --limit 10\n",
		"show":   "Usage: sheetq jobs show ID [--json]\n\nShow one export. Example:\n  sheetq jobs show 3xq4abcd... --json\n",
		"cancel": "Usage: sheetq jobs cancel ID [--json]\n\nCancel a pending or running export. Example:\n  sheetq jobs cancel 3xq4abcd...\n",
		"retry":  "Usage: sheetq jobs retry ID [--json]\n\nRun a failed or canceled export again. Example:\n  sheetq jobs retry 3xq4abcd...\n",
	}
	if sub == "list" {
		fs.StringVar(&status, "status", "", "only exports in this `status` (PENDING, PROCESSING, SUCCEEDED, FAILED, CANCELED, EXPIRED)")
		fs.StringVar(&report, "report", "", "only exports of this `report` id")
		fs.IntVar(&limit, "limit", 50, "at most `N` exports (1-1000)")
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, examples[sub]+"\nFlags (each also read from SHEETQ_<NAME>):\n")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if sub == "list" && len(pos) != 0 {
		return usageError{errors.New("jobs list takes no arguments")}
	}
	if sub != "list" && len(pos) != 1 {
		return usageError{fmt.Errorf("jobs %s takes one export ID", sub)}
	}
	if sub == "list" && (limit < 1 || limit > 1000) {
		return usageError{errors.New("--limit must be from 1 to 1000")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var b []byte
	switch sub {
	case "list":
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if status != "" {
			q.Set("status", status)
		}
		if report != "" {
			q.Set("report", report)
		}
		b, err = c.call(ctx, http.MethodGet, "/api/v1/exports?"+q.Encode(), nil, nil)
	case "show":
		b, err = c.call(ctx, http.MethodGet, "/api/v1/exports/"+url.PathEscape(pos[0]), nil, nil)
	default:
		b, err = c.call(ctx, http.MethodPost, "/api/v1/exports/"+url.PathEscape(pos[0])+"/"+sub, nil, nil)
	}
	if err != nil {
		return classify(err)
	}
	if asJSON {
		return writeIndented(stdout, b)
	}
	if sub == "list" {
		var page struct {
			Exports    []clientJob `json:"exports"`
			NextCursor string      `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return exitError{exitServer, fmt.Errorf("bad answer from the server: %w", err)}
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tREPORT\tATTEMPT\tROWS\tCREATED")
		for _, j := range page.Exports {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Status, j.Report, j.Attempt, j.MaxAttempts, j.rows(), fmtTime(j.CreatedAt))
		}
		return tw.Flush()
	}
	var j clientJob
	if err := json.Unmarshal(b, &j); err != nil {
		return exitError{exitServer, fmt.Errorf("bad answer from the server: %w", err)}
	}
	switch sub {
	case "cancel":
		if j.Status == "CANCELED" {
			fmt.Fprintf(stdout, "export %s canceled\n", j.ID)
		} else {
			fmt.Fprintf(stdout, "export %s: cancel requested (%s); it stops within one heartbeat\n", j.ID, j.Status)
		}
		return nil
	case "retry":
		fmt.Fprintf(stdout, "export %s: %s again (attempt budget %d)\n", j.ID, j.Status, j.MaxAttempts)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", j.ID)
	row("status", j.Status)
	row("report", j.Report)
	if len(j.Params) > 0 {
		p, _ := json.Marshal(j.Params)
		row("params", string(p))
	}
	row("attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
	row("rows", j.rows())
	row("created", fmtTime(j.CreatedAt))
	row("started", fmtTime(j.StartedAt))
	row("finished", fmtTime(j.FinishedAt))
	if j.CancelRequested {
		row("cancel", "requested")
	}
	if j.Error != nil {
		row("error", j.Error.Code+": "+j.Error.Message)
	}
	if j.File != nil {
		row("file", fmt.Sprintf("%s (%d bytes)", j.File.Name, j.File.Size))
		row("sha256", j.File.SHA256)
		row("download", c.base+j.DownloadURL)
	}
	return tw.Flush()
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
