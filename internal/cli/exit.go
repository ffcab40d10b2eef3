package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"

	"sheetq/internal/client"
)

// Exit statuses; docs/cli.md. Every command exits 0 on success, 1 on an
// error and 2 on a bad command line; the client commands (export, jobs) also use 3, 4
// and 130.
const (
	exitFailed      = 1   // the export FAILED (or expired), or the server refused (403, 404, 409, 410)
	exitUsage       = 2   // a bad command line, or a request the server rejects (400, 422)
	exitCanceled    = 3   // the export was CANCELED
	exitServer      = 4   // the server could not be reached, answered 5xx, or sent a bad file
	exitInterrupted = 130 // Ctrl-C while waiting; the export keeps running
)

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ error }

// exitError is an error with its own exit status; Exit honours it.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// Exit writes err as one line, "sheetq: ...", to stderr (nothing for --help, whose text
// is already out) and returns the process's exit status for it: 0 for nil, a client
// command's own status, 2 for a bad command line, else 1.
func Exit(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if !errors.Is(err, flag.ErrHelp) {
		// One line even when the error carries another's text with line breaks: an
		// export's error as its source worded it ("no such table: a\nb"), say.
		fmt.Fprintln(stderr, "sheetq:", client.OneLine(err.Error()))
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
		return exitUsage
	}
	return exitFailed
}

// classify gives a server or network error its exit status.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ee exitError
	if errors.As(err, &ee) {
		return err
	}
	// The command's context ended: Ctrl-C (a request's own deadline is
	// context.DeadlineExceeded), not a server that could not be reached.
	if errors.Is(err, context.Canceled) {
		return exitError{exitInterrupted, errors.New("interrupted")}
	}
	var p *client.Problem
	if errors.As(err, &p) {
		switch {
		case p.Status == http.StatusBadRequest || p.Status == http.StatusUnprocessableEntity:
			return exitError{exitUsage, err}
		case p.Status >= 500 || p.Status == http.StatusUnauthorized:
			return exitError{exitServer, err}
		default:
			return exitError{exitFailed, err}
		}
	}
	var se *client.SaveError
	if errors.As(err, &se) {
		return exitError{exitFailed, err}
	}
	return exitError{exitServer, err}
}
