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
	"sheetq/store/sqlite"
)

// backupCmd runs `sheetq backup FILE [--data DIR]`: a consistent copy of the database,
// taken while the server may be running. It opens the database read-only and does not
// take the data directory's lock. With a PostgreSQL store it copies nothing and says
// what to use instead: a copy of the data directory's SQLite file would look like a
// backup of a queue it does not hold.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` whose database to copy (default: the user's data folder)")
	sf := addStoreFlags(fs, true, false)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sheetq backup FILE [--data DIR]\n\nWrite a consistent copy of the database to FILE, which must not exist.\nSafe while the server runs. Example:\n  sheetq backup ~/sheetq-2026-01-31.db\n\n"+
			"With a PostgreSQL job store (--store, SHEETQ_STORE or the config file's [store] url) it writes\n"+
			"nothing and exits 1: back that database up with pg_dump, and a bucket with its provider's tools.\n\nFlags:\n")
		printFlags(stderr, fs)
	}
	// Flags may come before or after FILE.
	var files []string
	for {
		if err := parseWithEnv(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	root, err := dataRoot(*data)
	if err != nil {
		return err
	}
	ss, err := sf.resolve(root)
	if err != nil {
		return err
	}
	if ss.DSN != "" && app.IsMySQL(ss.DSN) {
		return fmt.Errorf("backup: the job store is MySQL or MariaDB (%s): back it up with mysqldump --single-transaction (or mariadb-dump), "+
			"or the server's own backups; for a bucket, use the provider's versioning or replication", app.RedactURL(ss.DSN))
	}
	if ss.DSN != "" {
		return fmt.Errorf("backup: the job store is PostgreSQL (%s): back it up with pg_dump, e.g. pg_dump -Fc -f sheetq.dump 'postgres://...', "+
			"or the server's own backups; for a bucket, use the provider's versioning or replication", app.RedactURL(ss.DSN))
	}
	if len(files) != 1 {
		return usageError{errors.New("usage: sheetq backup FILE [--data DIR]")}
	}
	st, err := sqlite.OpenDriver(ctx, datadir.Dir{Root: root}.DB(), sqlite.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer st.Close()
	if err := st.Backup(ctx, files[0]); err != nil {
		return err
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes)\n", files[0], fi.Size())
	return nil
}
