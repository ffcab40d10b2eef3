package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"sheetq/internal/client"
	"sheetq/internal/envref"
	"sheetq/internal/officecrypt"
)

const jobsDownloadHelp = "Usage: sheetq jobs download ID [-o FILE] [--password-file FILE | --password]\n\n" +
	"Save a finished export's file, checking its sha256; with a password, the xlsx file encrypted\n" +
	"with it (Excel and LibreOffice ask for it when they open the file). Examples:\n" +
	"  sheetq jobs download 3xq4abcd... -o orders.xlsx\n" +
	"  sheetq jobs download 3xq4abcd... --password-file ~/.payroll-password\n" +
	"  sheetq jobs download 3xq4abcd... --password     (asks twice, without echo)\n"

// jobsDownload runs `sheetq jobs download ID [-o FILE]`: the file of an export that
// succeeded earlier, through client.Download (FILE.part, sha256, rename).
func jobsDownload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("download", jobsDownloadHelp, stderr)
	var out string
	fs.StringVar(&out, "o", "", "save the file as `FILE` (default: the server's file name, in the current folder)")
	var pwFile string
	var ask bool
	fs.StringVar(&pwFile, "password-file", "", "encrypt the file with the password in `FILE` (its first line; - reads standard input)")
	fs.BoolVar(&ask, "password", false, "encrypt the file with a password typed at the terminal (asked twice, not echoed)")
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
	if pwFile != "" && ask {
		return blameEnv(fs, usageError{errors.New("give --password-file or --password, not both")}, "password-file", "password")
	}
	var password string
	switch {
	case pwFile != "":
		if password, err = readPasswordFile(pwFile, os.Stdin); err != nil {
			return blameEnv(fs, usageError{err}, "password-file")
		}
	case ask:
		if password, err = askPassword(stderr); err != nil {
			return usageError{err}
		}
	}
	if password != "" {
		if err := officecrypt.CheckPassword(password); err != nil {
			return usageError{err}
		}
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
	if password != "" {
		return downloadEncrypted(ctx, c, job, out, password, jf.asJSON, stdout)
	}
	return download(ctx, c, job, out, jf.asJSON, stdout)
}

// download saves job's file as out and says so: "saved FILE (N bytes, sha256 ...)", or
// with asJSON the job as the server has it now.
func download(ctx context.Context, c *client.Client, job client.Job, out string, asJSON bool, stdout io.Writer) error {
	return downloadEncrypted(ctx, c, job, out, "", asJSON, stdout)
}

// downloadEncrypted is download of the file encrypted with password ("": the plain
// file, which a report that requires encryption does not hand out).
func downloadEncrypted(ctx context.Context, c *client.Client, job client.Job, out, password string, asJSON bool, stdout io.Writer) error {
	if job.EncryptRequired && password == "" {
		return exitError{exitFailed, fmt.Errorf("export %s's report hands out its files only encrypted: sheetq jobs download %s --password (or --password-file FILE)", job.ID, job.ID)}
	}
	path, err := c.DownloadEncrypted(ctx, job, out, password)
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
	if password != "" {
		fmt.Fprintf(stdout, "saved %s, encrypted with the password (the export's file: %d bytes, sha256 %s)\n", path, job.File.Size, job.File.SHA256)
	} else {
		fmt.Fprintf(stdout, "saved %s (%d bytes, sha256 %s)\n", path, job.File.Size, job.File.SHA256)
	}
	return nil
}

// readPasswordFile reads a password from path's first line ("-": standard input),
// without its line ending.
func readPasswordFile(path string, stdin io.Reader) (string, error) {
	if path != "-" {
		pw, err := envref.Secret("file:"+path, "")
		if err != nil {
			return "", fmt.Errorf("--password-file: %w", err)
		}
		pw, _, _ = strings.Cut(pw, "\n")
		return strings.TrimSuffix(pw, "\r"), nil
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("--password-file -: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("--password-file -: standard input holds no password")
	}
	return line, nil
}

// askPassword asks for a password twice at the terminal, without echo.
func askPassword(stderr io.Writer) (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("--password asks at a terminal, and standard input is none: use --password-file FILE (or - for standard input)")
	}
	read := func(prompt string) (string, error) {
		fmt.Fprint(stderr, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(stderr)
		return string(b), err
	}
	pw, err := read("Password for the file: ")
	if err != nil {
		return "", err
	}
	again, err := read("The same password again: ")
	if err != nil {
		return "", err
	}
	if pw != again {
		return "", errors.New("the two passwords differ")
	}
	return pw, nil
}
