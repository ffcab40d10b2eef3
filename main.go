// Command sheetq turns slow data pulls into spreadsheets: a durable job queue on SQLite,
// a bounded worker pool, and an HTTP API and pages to request and collect .xlsx exports.
// The command line lives in internal/cli; this file only wires it to the process.
package main

import (
	"context"
	"os"
	"os/signal"

	"sheetq/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=..."; build info fills in
// the rest.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), cli.ShutdownSignals()...)
	err := cli.Run(ctx, version, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Exit(err, os.Stderr))
}
