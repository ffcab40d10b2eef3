package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"sheetq/app"
	"sheetq/internal/datadir"
	"sheetq/internal/objstore"
	"sheetq/jobs"
	"sheetq/store/mysqlcopy"
	"sheetq/store/pgcopy"
	"sheetq/store/sqlite"
)

const storeUsage = "usage: sheetq store copy --to postgres://...|mysql://... [--files s3://...] [--data DIR]"

// storeCmd runs `sheetq store SUBCOMMAND`; copy is the only one.
func storeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New(storeUsage)}
	}
	switch args[0] {
	case "copy":
		return storeCopyCmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprintln(stdout, storeUsage)
		return nil
	}
	return usageError{fmt.Errorf("unknown store command %q (%s)", args[0], storeUsage)}
}

// storeCopyCmd runs `sheetq store copy`: moves a data directory's queue into an empty
// PostgreSQL, MySQL or MariaDB database and, with a file store, its published files into the bucket
// (docs/several-nodes.md). It holds the data directory's lock throughout, so no server
// changes the queue while it is read.
func storeCopyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("store copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "the job store to fill: a postgres:// or mysql://user:password@host:port/database `URL` (mariadb:// too), or env:NAME naming a variable that holds one")
	data := fs.String("data", "", "data `directory` whose queue to copy (default: the user's data folder)")
	sf := addStoreFlags(fs, false, true)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sheetq store copy --to postgres://...|mysql://... [--files s3://...] [--data DIR]

Copy the data directory's queue (every job in every state, its events and idempotency
keys) into an empty PostgreSQL, MySQL or MariaDB database, migrating it first. With a file store (--files,
SHEETQ_FILES or the config file's [files] url), each finished export's file goes to the
bucket first, checked by size and sha256; a second run finds the files already there.
The server must be stopped: the copy takes the data directory's lock. A failure leaves
the database as it was.

Flags:
`)
		printFlags(stderr, fs)
	}
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("store copy takes no arguments, got %q (%s)", fs.Args(), storeUsage)}
	}
	dsn, err := storeURL(fs, "to", *to)
	if err != nil {
		return err
	}
	if dsn == "" {
		return usageError{errors.New(storeUsage)}
	}
	root, err := dataRoot(*data)
	if err != nil {
		return err
	}
	dir := datadir.Dir{Root: root}
	if _, err := os.Stat(dir.DB()); err != nil {
		return fmt.Errorf("store copy: no queue to copy: %w", err)
	}
	st, err := sf.resolve(root)
	if err != nil {
		return err
	}
	lock, err := dir.Lock()
	if errors.Is(err, datadir.ErrInUse) {
		return fmt.Errorf("store copy: %w; stop the server first", err)
	}
	if err != nil {
		return fmt.Errorf("store copy: %w", err)
	}
	defer lock.Unlock()

	opts := pgcopy.Options{ExportsDir: dir.Exports(), Key: jobs.ObjectKey}
	if st.Bucket != nil {
		if opts.Bucket, err = objstore.New(*st.Bucket); err != nil {
			return fmt.Errorf("store copy: %w", err)
		}
	}
	// Opened for writing, as a server would (the lock is ours): an older file is
	// migrated to this build's schema, which the copy reads.
	src, err := sqlite.Open(ctx, dir.DB(), sqlite.Options{})
	if err != nil {
		return fmt.Errorf("store copy: %w", err)
	}
	defer src.Close()
	copyTo := pgcopy.Copy
	if app.IsMySQL(dsn) {
		copyTo = mysqlcopy.Copy
	}
	res, err := copyTo(ctx, src, dsn, opts)
	if errors.Is(err, pgcopy.ErrNotEmpty) || errors.Is(err, mysqlcopy.ErrNotEmpty) {
		return fmt.Errorf("store copy: %s already holds jobs or events; copy into an empty database", app.RedactURL(dsn))
	}
	if err != nil {
		return fmt.Errorf("store copy: %w", err) // on one line: Exit puts it on one line
	}
	files := "no files (the file store is the data directory's exports folder)"
	if opts.Bucket != nil {
		files = fmt.Sprintf("%d files to %s (%d already there)", res.Files, app.RedactURL(st.FilesURL), res.FilesPresent)
	}
	fmt.Fprintf(stdout, "copied %d jobs and %d events to %s, and %s\n", res.Jobs, res.Events, app.RedactURL(dsn), files)
	return nil
}
