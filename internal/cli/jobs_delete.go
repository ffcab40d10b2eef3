package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"sheetq/internal/client"
)

const jobsDeleteHelp = "Usage: sheetq jobs delete ID\n\nDelete a finished export: its file, its row and its events. A pending or running\nexport must be canceled first (exit 1). Example:\n  sheetq jobs delete 3xq4abcd...\n"

// jobsDelete runs `sheetq jobs delete ID`: DELETE /api/v1/exports/{id}.
func jobsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("delete", jobsDeleteHelp, stderr)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := oneExportID("delete", pos); err != nil {
		return err
	}
	c, err := jf.client()
	if err != nil {
		return err
	}
	if _, err := c.Call(ctx, http.MethodDelete, "/api/v1/exports/"+url.PathEscape(pos[0]), nil, nil); err != nil {
		// The server's advice names its API (POST .../cancel); this one names the
		// command that does it.
		if p := (*client.Problem)(nil); errors.As(err, &p) && p.Code == "not_finished" {
			return exitError{exitFailed, fmt.Errorf("export %s has not finished; cancel it first (sheetq jobs cancel %s), then delete it", pos[0], pos[0])}
		}
		return classify(err)
	}
	if jf.asJSON {
		return writeIndented(stdout, fmt.Appendf(nil, `{"id":%q,"deleted":true}`, pos[0]))
	}
	fmt.Fprintf(stdout, "export %s deleted\n", pos[0])
	return nil
}
