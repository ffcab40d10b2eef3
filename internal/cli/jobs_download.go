package cli

import (
	"context"
	"fmt"
	"io"

	"sheetq/internal/client"
)

const jobsDownloadHelp = "Usage: sheetq jobs download ID [-o FILE]\n\nSave a finished export's file, checking its sha256. Example:\n  sheetq jobs download 3xq4abcd... -o orders.xlsx\n"

// jobsDownload runs `sheetq jobs download ID [-o FILE]`: the file of an export that
// succeeded earlier, through client.Download (FILE.part, sha256, rename).
func jobsDownload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("download", jobsDownloadHelp, stderr)
	var out string
	fs.StringVar(&out, "o", "", "save the file as `FILE` (default: the server's file name, in the current folder)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := oneExportID("download", pos); err != nil {
		return err
	}
	if err := checkDownload("-o", out); err != nil {
		return blameEnv(fs, usageError{err}, "o")
	}
	c, err := jf.client()
	if err != nil {
		return err
	}
	job, _, err := c.GetJob(ctx, pos[0])
	if err != nil {
		return classify(err)
	}
	if !job.Finished() {
		return exitError{exitFailed, fmt.Errorf("export %s is %s, it has no file yet (sheetq jobs wait %s)", job.ID, job.Status, job.ID)}
	}
	if err := endError(job); err != nil {
		return err
	}
	return download(ctx, c, job, out, jf.asJSON, stdout)
}

// download saves job's file as out and says so: "saved FILE (N bytes, sha256 ...)", or
// with asJSON the job as the server has it now.
func download(ctx context.Context, c *client.Client, job client.Job, out string, asJSON bool, stdout io.Writer) error {
	path, err := c.Download(ctx, job, out)
	if err != nil {
		if ctx.Err() != nil {
			return exitError{exitInterrupted, fmt.Errorf("interrupted while downloading export %s", job.ID)}
		}
		return classify(err)
	}
	if asJSON {
		_, b, err := c.GetJob(ctx, job.ID)
		if err != nil {
			return classify(err)
		}
		return writeIndented(stdout, b)
	}
	fmt.Fprintf(stdout, "saved %s (%d bytes, sha256 %s)\n", path, job.File.Size, job.File.SHA256)
	return nil
}
