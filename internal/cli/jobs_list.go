package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"

	"sheetq/internal/client"
)

const jobsListHelp = "Usage: sheetq jobs list [--status S] [--report R] [--limit N] [--json]\n\nList exports, newest first. Example:\n  sheetq jobs list --status PROCESSING --limit 10\n"

// jobsList runs `sheetq jobs list`: a table of exports, newest first.
func jobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("list", jobsListHelp, stderr)
	var (
		status, report string
		limit          int
	)
	fs.StringVar(&status, "status", "", "only exports in this `status` (PENDING, PROCESSING, SUCCEEDED, FAILED, CANCELED, EXPIRED)")
	fs.StringVar(&report, "report", "", "only exports of this `report` id")
	fs.IntVar(&limit, "limit", 50, "at most `N` exports (1-1000)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{errors.New("jobs list takes no arguments")}
	}
	if limit < 1 || limit > 1000 {
		return usageError{errors.New("--limit must be from 1 to 1000")}
	}
	c, err := jf.client()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if status != "" {
		q.Set("status", status)
	}
	if report != "" {
		q.Set("report", report)
	}
	b, err := c.Call(ctx, http.MethodGet, "/api/v1/exports?"+q.Encode(), nil, nil)
	if err != nil {
		return classify(err)
	}
	if jf.asJSON {
		return writeIndented(stdout, b)
	}
	var page struct {
		Exports    []client.Job `json:"exports"`
		NextCursor string       `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return exitError{exitServer, fmt.Errorf("bad answer from the server: %w", err)}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tREPORT\tATTEMPT\tROWS\tCREATED")
	for _, j := range page.Exports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Status, j.Report, j.Attempt, j.MaxAttempts, j.Rows(), fmtTime(j.CreatedAt))
	}
	return tw.Flush()
}
