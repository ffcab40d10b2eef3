package cli

import (
	"context"
	"fmt"
	"io"
)

const jobsWaitHelp = `Usage: sheetq jobs wait ID [--json]

Follow an export's progress, as export --wait does, until it ends; then
sheetq jobs download ID saves its file. Example:
  sheetq jobs wait 3xq4abcd... && sheetq jobs download 3xq4abcd...

Exit status: 0 succeeded, 1 failed or expired, 3 canceled, 4 server or network error,
130 interrupted (the export keeps running).
`

// jobsWait runs `sheetq jobs wait ID`: export --wait's progress for an export made
// earlier, with export's exit statuses.
func jobsWait(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("wait", jobsWaitHelp, stderr)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := oneExportID("wait", pos); err != nil {
		return err
	}
	c, err := jf.client()
	if err != nil {
		return err
	}
	job, _, err := c.GetJob(ctx, pos[0])
	if err != nil {
		return classify(err)
	}
	progressOut := stdout
	if jf.asJSON {
		progressOut = stderr
	}
	if job, err = follow(ctx, c, job, progressOut); err != nil {
		return err
	}
	if jf.asJSON {
		_, b, err := c.GetJob(ctx, job.ID)
		if err != nil {
			return classify(err)
		}
		if err := writeIndented(stdout, b); err != nil {
			return err
		}
	} else if job.Status == "SUCCEEDED" {
		fmt.Fprintf(stdout, "export %s succeeded: %s rows, %s (sheetq jobs download %s)\n", job.ID, rowsText(job), sizeText(job), job.ID)
	}
	return endError(job)
}
