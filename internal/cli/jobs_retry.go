package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"sheetq/internal/client"
)

const jobsRetryHelp = "Usage: sheetq jobs retry ID [--json]\n\nRun a failed or canceled export again. Example:\n  sheetq jobs retry 3xq4abcd...\n"

// jobsRetry runs `sheetq jobs retry ID`.
func jobsRetry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return jobAction(ctx, "retry", jobsRetryHelp, http.MethodPost, "/retry", args, stdout, stderr, nil, func(_ *client.Client, j client.Job) error {
		fmt.Fprintf(stdout, "export %s: %s again (attempt budget %d)\n", j.ID, j.Status, j.MaxAttempts)
		return nil
	})
}
