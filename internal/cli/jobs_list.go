package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sheetq/internal/client"
)

const jobsListHelp = "Usage: sheetq jobs list [--status S] [--report R] [--limit N] [--utc] [--json]\n\nList exports, newest first, with their parameters, file size, run time and when each was\nmade, in the local time zone (--utc: in UTC). Example:\n  sheetq jobs list --status PROCESSING --limit 10\n"

// jobsList runs `sheetq jobs list`: a table of exports, newest first.
func jobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("list", jobsListHelp, stderr)
	var zone zoneFlag
	zone.register(fs)
	var (
		status, report string
		limit          int
	)
	fs.StringVar(&status, "status", "", "only exports in this `status` (PENDING, PROCESSING, SUCCEEDED, FAILED, CANCELED, EXPIRED)")
	fs.StringVar(&report, "report", "", "only exports of this `report` id")
	fs.IntVar(&limit, "limit", 50, "at most `N` exports (1-1000)")
	wantRange(fs, "limit", limitRange)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{errors.New("jobs list takes no arguments")}
	}
	if !limitRange.holds(limit) {
		return blameEnv(fs, usageError{errors.New("--limit " + limitRange.rule())}, "limit")
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
	var page struct {
		Exports    []client.Job `json:"exports"`
		NextCursor string       `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return exitError{exitServer, fmt.Errorf("bad answer from the server: %w", err)}
	}
	// The server filters by any report id without complaint; a typo would read as "none
	// yet". Asked only when nothing matched, so exports of a removed report still list.
	if len(page.Exports) == 0 && report != "" {
		if err := checkReport(ctx, c, fs, report); err != nil {
			return err
		}
	}
	if jf.asJSON {
		return writeIndented(stdout, b)
	}
	if len(page.Exports) == 0 {
		var of []string
		if status != "" {
			of = append(of, "status "+status)
		}
		if report != "" {
			of = append(of, "report "+report)
		}
		if len(of) > 0 {
			fmt.Fprintf(stdout, "no exports with %s\n", strings.Join(of, " and "))
		} else {
			fmt.Fprintln(stdout, "no exports")
		}
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tREPORT\tPARAMS\tATTEMPT\tROWS\tSIZE\tDURATION\tCREATED")
	for _, j := range page.Exports {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", j.ID, j.Status, j.Report, paramSummary(j.Params, 40),
			j.Attempt, j.MaxAttempts, rowsText(j), sizeText(j), durationText(j, now), zone.format(j.CreatedAt, toSecond))
	}
	return tw.Flush()
}

// limitRange is jobs list's --limit: the API's own limit of a page.
var limitRange = intRange{1, 1000}

// checkReport is a usage error (exit 2) when the server has no report id, fs's
// --report.
func checkReport(ctx context.Context, c *client.Client, fs *flag.FlagSet, id string) error {
	ids, err := reportIDs(ctx, c)
	if err != nil {
		return err
	}
	if slices.Contains(ids, id) {
		return nil
	}
	return blameEnv(fs, usageError{noSuchReport("--report "+id, ids)}, "report")
}

// reportIDs are the ids of the server's reports, sorted.
func reportIDs(ctx context.Context, c *client.Client) ([]string, error) {
	b, err := c.Call(ctx, http.MethodGet, "/api/v1/reports", nil, nil)
	if err != nil {
		return nil, classify(err)
	}
	var list struct {
		Reports []struct {
			ID string `json:"id"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, exitError{exitServer, fmt.Errorf("bad answer from the server: %w", err)}
	}
	ids := make([]string, 0, len(list.Reports))
	for _, r := range list.Reports {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// noSuchReport is what jobs list --report and export say of a report the server does
// not have: "WHAT: the server has no such report (it has: a, b)".
func noSuchReport(what string, ids []string) error {
	has := strings.Join(ids, ", ")
	if len(ids) == 0 {
		has = "none"
	}
	return fmt.Errorf("%s: the server has no such report (it has: %s)", what, has)
}

// paramSummary is "rows=5000 seconds=10", sorted by name, cut to width runes with "…";
// "-" for none.
func paramSummary(params map[string]any, width int) string {
	if len(params) == 0 {
		return "-"
	}
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		v := params[k]
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			v = int64(f) // JSON numbers: 5000, not 5e+03
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	// A value's line break or tab would break the table's row (client.OneLine).
	s := client.OneLine(strings.Join(parts, " "))
	if r := []rune(s); len(r) > width {
		s = string(r[:width-1]) + "…"
	}
	return s
}

// rowsText is the progress with thousands separators: "50,000/50,000" or "1,234".
func rowsText(j client.Job) string {
	s := thousands(j.Progress.Rows)
	if j.Progress.TotalRows != nil {
		s += "/" + thousands(*j.Progress.TotalRows)
	}
	return s
}

// thousands writes n with a comma every three digits: 1234567 is "1,234,567".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return sign + b.String()
}

// sizeText is the file's size in bytes, KB, MB or GB (powers of 1000), "-" for none.
func sizeText(j client.Job) string {
	if j.File == nil {
		return "-"
	}
	n := float64(j.File.Size)
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", j.File.Size)
	case n < 1e6:
		return fmt.Sprintf("%.1f KB", n/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", n/1e6)
	default:
		return fmt.Sprintf("%.1f GB", n/1e9)
	}
}

// durationText is how long the export ran (so far, for a running one), "-" when it
// has not started.
func durationText(j client.Job, now time.Time) string {
	if j.StartedAt == nil {
		return "-"
	}
	end := now
	if j.FinishedAt != nil {
		end = *j.FinishedAt
	} else if j.Finished() {
		return "-"
	}
	d := max(end.Sub(*j.StartedAt), 0)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
