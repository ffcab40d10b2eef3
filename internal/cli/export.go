package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sheetq/internal/client"
	"sheetq/internal/durable"
)

// exportCmd runs `sheetq export REPORT [-p name=value]... [--format xlsx|csv [--bom] [--csv-formulas keep]] [--wait] [-o FILE] [--json]`.
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cf     clientFlags
		params = map[string]string{}
		wait   bool
		out    string
		asJSON bool
		format string
		bom    bool
		// formulas is the request's csv_formulas: "" (the server's default), neutralise or keep.
		formulas string
	)
	cf.register(fs)
	fs.Func("p", "report parameter `name=value` (repeatable)", paramFlag(params))
	fs.StringVar(&format, "format", "", "the file's `format`: xlsx or csv (default xlsx)")
	fs.BoolVar(&bom, "bom", false, "with --format csv, start the file with a UTF-8 byte order mark, for Excel")
	fs.StringVar(&formulas, "csv-formulas", "", "with --format csv: `keep` writes text that starts with = + - @ as it is, formulas included; neutralise (the default) puts a ' in front, so that a spreadsheet does not run it")
	fs.BoolVar(&wait, "wait", false, "wait for the export, showing its progress, and download the file")
	fs.StringVar(&out, "o", "", "with --wait, save the file as `FILE` (default: the server's file name, in the current folder)")
	fs.BoolVar(&asJSON, "json", false, "print the job as JSON (with --wait, the finished job; progress goes to stderr)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sheetq export REPORT [-p name=value]... [--format xlsx|csv [--bom] [--csv-formulas keep]] [--wait] [-o FILE] [--json] [--server URL]

Ask a running sheetq server for an export of REPORT. Without --wait it prints the job id.
With --wait it follows the export's progress and downloads the file, checking its sha256.
Example:
  sheetq export demo -p rows=50000 -p seconds=10 --wait -o demo.xlsx
  sheetq export demo -p rows=50000 --format csv --bom --wait

Exit status: 0 done, 1 the export failed, 2 bad command line or rejected request
(unknown report, bad param), 3 the export was canceled, 4 server or network error,
130 interrupted while waiting (the export keeps running).

Flags (each also read from SHEETQ_<NAME>, e.g. SHEETQ_SERVER, SHEETQ_TOKEN):
`)
		printFlags(stderr, fs)
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("export takes one REPORT (try: sheetq export --help)")}
	}
	if out != "" && !wait {
		return blameEnv(fs, usageError{errors.New("-o needs --wait")}, "o")
	}
	// Checked here as well as by the server, so that a typo costs no request (exit 2).
	switch {
	case format != "" && format != "xlsx" && format != "csv":
		return blameEnv(fs, usageError{fmt.Errorf("--format %q: want xlsx or csv", format)}, "format")
	case bom && format != "csv":
		return blameEnv(fs, usageError{errors.New("--bom needs --format csv")}, "bom", "format")
	case formulas != "" && formulas != "neutralise" && formulas != "keep":
		return blameEnv(fs, usageError{fmt.Errorf("--csv-formulas %q: want neutralise (the default) or keep", formulas)}, "csv-formulas")
	case formulas == "keep" && format != "csv":
		return blameEnv(fs, usageError{errors.New("--csv-formulas keep needs --format csv")}, "csv-formulas", "format")
	}
	if wait {
		// Before any request: a path that cannot be written would otherwise be found
		// only after the export ran, and exit as if the export had failed.
		if err := checkDownload("-o", out); err != nil {
			return blameEnv(fs, usageError{err}, "o")
		}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}

	req := client.ExportRequest{Report: pos[0], Params: params, Format: format, BOM: bom, CSVFormulas: formulas}
	key := loadPendingKey(c.Base(), req)
	if key.Resumed {
		fmt.Fprintln(stderr, "sheetq: resuming the export an earlier run of this command started and did not see to its end")
	}
	// A failed try is said on a terminal in a short line that the next one replaces
	// (a line wider than the terminal would leave its wrapped part behind), and erased
	// at the end: the command's error, if any, stays its one line on stderr.
	tries, tty, noted := 1, isTerminal(stderr), false
	job, raw, err := c.CreateExport(ctx, req, key.Key, func(err error, wait time.Duration) {
		tries++
		if tty {
			what := "the server could not be reached"
			if p := (*client.Problem)(nil); errors.As(err, &p) {
				what = fmt.Sprintf("the server answered HTTP %d", p.Status)
			}
			fmt.Fprintf(stderr, "\rsheetq: %s; trying again in %s\x1b[K", what, wait)
			noted = true
		}
	})
	if noted {
		fmt.Fprint(stderr, "\r\x1b[K")
	}
	if err != nil {
		if ctx.Err() != nil {
			return exitError{exitInterrupted, errors.New("interrupted")}
		}
		if client.Refused(err) {
			key.done() // refused: running the command again is a new request
		}
		if p := (*client.Problem)(nil); errors.As(err, &p) && p.Code == "unknown_report" {
			// A typo lists the reports there are, as jobs list --report does; the
			// server's own words stand when the list cannot be had.
			if ids, lerr := reportIDs(ctx, c); lerr == nil {
				return usageError{noSuchReport("export "+req.Report, ids)}
			}
		}
		if tries > 1 {
			err = fmt.Errorf("%w (tried %d times)", err, tries)
		}
		return classify(err)
	}
	// Once the export ends (or is handed over without --wait) the request is complete;
	// an interrupted --wait keeps the key so that running the command again reattaches.
	defer func() {
		if !wait || job.Finished() {
			key.done()
		}
	}()
	if !wait {
		if asJSON {
			return writeIndented(stdout, raw)
		}
		fmt.Fprintln(stdout, job.ID)
		return nil
	}

	progressOut := stdout
	if asJSON {
		progressOut = stderr
	}
	if job, err = follow(ctx, c, job, progressOut); err != nil {
		return err
	}
	if err := endError(job); err != nil {
		if asJSON {
			// The finished job on stdout however it ended, as jobs wait --json prints
			// it: a script reads why it failed there, the one line on stderr aside.
			if _, b, gerr := c.GetJob(ctx, job.ID); gerr == nil {
				_ = writeIndented(stdout, b)
			}
		}
		return err
	}
	return download(ctx, c, job, out, asJSON, stdout)
}

// follow shows job's progress on w (a bar on a terminal, lines otherwise) until it
// ends; Ctrl-C is exit 130, and the export keeps running.
func follow(ctx context.Context, c *client.Client, job client.Job, w io.Writer) (client.Job, error) {
	pr := newProgress(w, isTerminal(w))
	pr.update(job)
	job, err := c.Wait(ctx, job, pr.update)
	pr.done()
	if err != nil {
		if ctx.Err() != nil {
			return job, exitError{exitInterrupted, fmt.Errorf("interrupted; export %s keeps running (sheetq jobs show %s)", job.ID, job.ID)}
		}
		return job, classify(err)
	}
	return job, nil
}

// endError is nil for a SUCCEEDED export, else the error and exit status of how it
// ended (docs/cli.md): 3 canceled, 1 failed or expired.
func endError(job client.Job) error {
	switch job.Status {
	case "SUCCEEDED":
		return nil
	case "CANCELED":
		return exitError{exitCanceled, fmt.Errorf("export %s was canceled", job.ID)}
	case "FAILED":
		code, msg := "unknown", "no error recorded"
		if job.Error != nil {
			code, msg = job.Error.Code, job.Error.Message
		}
		attempts := "attempts"
		if job.Attempt == 1 {
			attempts = "attempt"
		}
		return exitError{exitFailed, fmt.Errorf("export %s failed after %d %s: %s: %s", job.ID, job.Attempt, attempts, code, msg)}
	default: // EXPIRED
		return exitError{exitFailed, fmt.Errorf("export %s ended %s: its file is gone", job.ID, job.Status)}
	}
}

// checkDownload is checkOutput for a file client.Download saves, which it writes as
// out.part first: that must not be anything but a regular file either. A folder (or a
// pipe, or a device) there failed only once the server had sent the file, if at all; a
// regular out.part, left by an interrupted run, is overwritten as before.
func checkDownload(flagName, out string) error {
	if err := checkOutput(flagName, out); err != nil {
		return err
	}
	if out == "" {
		return nil // the server names the file: nothing to check before it answers
	}
	if why := notReplaceable(out + ".part"); why != "" {
		return fmt.Errorf("%s %s: %s.part %s, and the file is written there before it is renamed; remove it or name another file", flagName, out, out, why)
	}
	return nil
}

// checkOutput tells whether the file can be saved as out, flagName's value (or, when
// out is "", under the server's name in the current folder): out is not a folder, nor
// anything but a regular file, and its folder exists and takes a new file. It creates
// and removes a probe file, never out itself.
func checkOutput(flagName, out string) error {
	name := flagName + " " + out
	if out == "" {
		name = "the current folder"
	} else if why := notReplaceable(out); why != "" {
		return fmt.Errorf("%s: %s; name a file to save", name, why)
	}
	dir := filepath.Dir(out)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: the folder %s does not exist", name, dir)
	case err != nil:
		return fmt.Errorf("%s: %w", name, err)
	case !fi.IsDir():
		return fmt.Errorf("%s: %s is not a folder", name, dir)
	}
	if err := durable.Writable(dir); err != nil {
		return fmt.Errorf("%s: cannot write in %s: %w", name, dir, err)
	}
	return nil
}

// notReplaceable says why the download must not write or rename over path ("is a
// folder", "is not a regular file"), or is "" when path is a regular file or does not
// exist. The file is saved by renaming FILE.part over FILE, which would replace a device
// (-o /dev/null run as root) or a pipe with a regular file.
func notReplaceable(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "" // absent, or unreadable: the folder checks that follow say why
	case fi.IsDir():
		return "is a folder"
	case !fi.Mode().IsRegular():
		return "is not a regular file"
	}
	return ""
}

// paramFlag parses one -p name=value into params.
func paramFlag(params map[string]string) func(string) error {
	return func(s string) error {
		name, value, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return fmt.Errorf("want name=value, got %q", s)
		}
		params[name] = value
		return nil
	}
}
