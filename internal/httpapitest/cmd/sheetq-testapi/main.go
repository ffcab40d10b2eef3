// Command sheetq-testapi serves the httpapitest JSON API on a loopback address, so that
// tests of the built binary (crashes, restarts) can run it as a process of its own.
//
//	sheetq-testapi [-addr 127.0.0.1:0] [-rows 1000] [-page-size 100] [-delay 0s]
//
// It prints one line, "listening on http://ADDR", once it accepts connections, and
// serves until SIGINT or SIGTERM. It refuses an address that is not loopback: it is a
// test fixture, not a server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sheetq/internal/httpapitest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sheetq-testapi:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sheetq-testapi", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback `address` to listen on (port 0: any free port)")
	rows := fs.Int("rows", 1000, "rows in the dataset")
	pageSize := fs.Int("page-size", 100, "rows per page when a request gives no limit=")
	delay := fs.Duration("delay", 0, "how long every page waits before it answers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *rows < 0:
		return errors.New("-rows must be 0 or more")
	case *pageSize < 1 || *pageSize > httpapitest.MaxPageSize:
		return fmt.Errorf("-page-size must be 1 to %d", httpapitest.MaxPageSize)
	case *delay < 0:
		return errors.New("-delay must not be negative")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr %s is not a loopback address", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	api := httpapitest.New(httpapitest.Options{Rows: *rows, PageSize: *pageSize, Delay: *delay})
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	api.Close() // hanging pages return, so that Shutdown need not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
