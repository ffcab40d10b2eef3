package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"sheetq/internal/client"
)

const jobsCancelHelp = "Usage: sheetq jobs cancel ID [--json]\n\nCancel a pending or running export. Example:\n  sheetq jobs cancel 3xq4abcd...\n"

// jobsCancel runs `sheetq jobs cancel ID`.
func jobsCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return jobAction(ctx, "cancel", jobsCancelHelp, http.MethodPost, "/cancel", args, stdout, stderr, nil, func(_ *client.Client, j client.Job) error {
		if j.Status == "CANCELED" {
			fmt.Fprintf(stdout, "export %s canceled\n", j.ID)
		} else {
			fmt.Fprintf(stdout, "export %s: cancel requested (%s); it stops within one heartbeat\n", j.ID, j.Status)
		}
		return nil
	})
}
