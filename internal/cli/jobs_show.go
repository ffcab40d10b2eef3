package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"sheetq/internal/client"
)

const jobsShowHelp = "Usage: sheetq jobs show ID [--utc] [--json]\n\nShow one export, its times in the local time zone (--utc: in UTC). Example:\n  sheetq jobs show 3xq4abcd... --json\n"

// jobsShow runs `sheetq jobs show ID`: the export's fields, one per line.
func jobsShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var zone zoneFlag
	return jobAction(ctx, "show", jobsShowHelp, http.MethodGet, "", args, stdout, stderr, &zone, func(c *client.Client, j client.Job) error {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		row := func(k, v string) {
			if v != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", k, v)
			}
		}
		row("id", j.ID)
		row("status", j.Status)
		row("report", j.Report)
		format := j.Format
		switch {
		case j.BOM && j.CSVFormulas == "keep":
			format += " (with a UTF-8 BOM, formulas kept)"
		case j.BOM:
			format += " (with a UTF-8 BOM)"
		case j.CSVFormulas == "keep":
			format += " (formulas kept)"
		}
		row("format", format)
		if len(j.Params) > 0 {
			p, _ := json.Marshal(j.Params)
			row("params", string(p))
		}
		row("attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
		row("rows", j.Rows())
		row("created", zone.format(j.CreatedAt, toSecond))
		row("started", zone.format(j.StartedAt, toSecond))
		row("finished", zone.format(j.FinishedAt, toSecond))
		if j.CancelRequested {
			row("cancel", "requested")
		}
		// The error is its source's words, line breaks and all, and the file's name the
		// server's: one field is one line, for grep and awk (--json has them as sent).
		if j.Error != nil {
			row("error", client.OneLine(j.Error.Code+": "+j.Error.Message))
		}
		if j.File != nil {
			row("file", fmt.Sprintf("%s (%d bytes)", client.OneLine(j.File.Name), j.File.Size))
			row("sha256", j.File.SHA256)
			if j.DownloadURL != "" {
				row("download", c.Base()+j.DownloadURL)
			} else if j.EncryptRequired {
				row("download", "only encrypted: sheetq jobs download "+j.ID+" --password")
			}
		}
		return tw.Flush()
	})
}
