package cli

import (
	"errors"
	"flag"
	"fmt"

	"sheetq/app"
)

// storeFlags are the flags that choose the stores, shared by doctor, backup and store
// copy, in fs.
type storeFlags struct {
	store, files, config *string
	fs                   *flag.FlagSet
}

// addStoreFlags defines --config on fs, and --store and --files when asked for.
func addStoreFlags(fs *flag.FlagSet, store, files bool) storeFlags {
	f := storeFlags{
		fs:     fs,
		store:  new(string),
		config: fs.String("config", "", "config `file` whose [store] and [files] tables to read (default <data>/sheetq.toml)"),
	}
	if store {
		f.store = fs.String("store", "", "job store: a postgres:// or mysql:// `URL`, or env:NAME naming a variable that holds one (default: the config file's [store] url, else the data directory's SQLite file)")
	}
	if files {
		f.files = fs.String("files", "", "file store: an s3://BUCKET/PREFIX?endpoint=http://host:port&region=REGION `URL` (default: the config file's [files] url, else the data directory's exports folder)")
	} else {
		f.files = new(string)
	}
	return f
}

// resolve is the job store and file store a tool command (doctor, backup, store copy)
// works on: the same ones `sheetq serve` would use with the same flags, SHEETQ_STORE /
// SHEETQ_FILES and config file (docs/several-nodes.md), resolved by the same rules
// (app.ResolveStores) from the flags, which parseWithEnv has filled from the
// environment, and the config file of the data directory root or --config.
func (f storeFlags) resolve(root string) (app.Stores, error) {
	fc, err := app.LoadConfigFile(root, *f.config)
	if err != nil {
		return app.Stores{}, err
	}
	s, err := app.ResolveStores(app.StoreFlags{Store: *f.store, Files: *f.files}, fc)
	if err != nil {
		return app.Stores{}, settingError(f.fs, err)
	}
	return s, nil
}

// settingError is how the command line reports a setting the app refused (app.Resolve,
// app.ResolveStores): a value of a flag or its variable (*app.BadValueError) is a usage
// error, exit 2, led by the SHEETQ_* variable when that set it; a value of the config
// file is the file's error, exit 1, which names the file and its key already.
func settingError(fs *flag.FlagSet, err error) error {
	if bad := (*app.BadValueError)(nil); errors.As(err, &bad) {
		return blameEnv(fs, usageError{err}, bad.Flag)
	}
	return err
}

// storeURL reads v, fs's flag name, as the job store's URL is read
// (app.StoreURL), naming the flag (and the variable, when SHEETQ_* set it) in its
// error: store copy's --to, which names a target rather than the store in use.
func storeURL(fs *flag.FlagSet, name, v string) (string, error) {
	u, err := app.StoreURL(v)
	if err != nil {
		return "", blameEnv(fs, usageError{fmt.Errorf("--%s: %w", name, err)}, name)
	}
	return u, nil
}
