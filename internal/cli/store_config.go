package cli

import (
	"cmp"
	"flag"
	"fmt"

	"sheetq/app"
	"sheetq/internal/datadir"
	"sheetq/internal/objstore"
)

// stores is the job store and file store a tool command (doctor, backup, store copy)
// works on: the same ones `sheetq serve` would use with the same flags, SHEETQ_STORE /
// SHEETQ_FILES and config file (docs/several-nodes.md).
type stores struct {
	// DSN is the PostgreSQL job store's URL, env:NAME already read; "" is the data
	// directory's SQLite file.
	DSN string
	// Files is the bucket's settings; nil is the data directory's exports/ folder.
	Files *objstore.Config
	// FilesURL is the s3:// URL Files came from, for messages ("" with Files nil).
	FilesURL string
}

// storeFlags are the flags that choose the stores, shared by doctor and backup, in fs.
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
		f.store = fs.String("store", "", "job store: a postgres:// `URL`, or env:NAME naming a variable that holds one (default: the config file's [store] url, else the data directory's SQLite file)")
	}
	if files {
		f.files = fs.String("files", "", "file store: an s3://BUCKET/PREFIX?endpoint=http://host:port&region=REGION `URL` (default: the config file's [files] url, else the data directory's exports folder)")
	} else {
		f.files = new(string)
	}
	return f
}

// resolve reads the flags (which parseWithEnv has filled from SHEETQ_STORE and
// SHEETQ_FILES), then the config file for what they left empty, as serve does: flags
// beat the environment, which beats the file.
func (f storeFlags) resolve(root string) (stores, error) {
	path := *f.config
	if path == "" {
		path = datadir.Dir{Root: root}.Config()
	}
	fc, err := app.LoadFileConfig(path, *f.config == "")
	if err != nil {
		return stores{}, err
	}
	var s stores
	// A value from the file is the file's error (exit 1, naming it and the key), as in
	// serve; one from a flag or the environment is a usage error (exit 2).
	if *f.store == "" && fc.Store.URL != "" {
		if s.DSN, err = app.PostgresURL(fc.Store.URL); err != nil {
			return stores{}, fc.Errorf("[store] url: %w", err)
		}
	} else if s.DSN, err = postgresURL(f.fs, "store", *f.store); err != nil {
		return stores{}, err
	}
	if err := fc.CheckBucketKeys(*f.files); err != nil {
		return stores{}, err
	}
	if s.FilesURL = cmp.Or(*f.files, fc.Files.URL); s.FilesURL != "" {
		cfg, err := bucketConfig(s.FilesURL, fc, *f.files == "", f.fs)
		if err != nil {
			return stores{}, err
		}
		s.Files = &cfg
	}
	return s, nil
}

// postgresURL reads v, fs's flag name, as serve does (app.PostgresURL), naming the flag
// (and the variable, when SHEETQ_* set it) in its error.
func postgresURL(fs *flag.FlagSet, name, v string) (string, error) {
	u, err := app.PostgresURL(v)
	if err != nil {
		return "", blameEnv(fs, usageError{fmt.Errorf("--%s: %w", name, err)}, name)
	}
	return u, nil
}

// bucketConfig parses an s3:// URL (fromFile: the config file's [files] url, whose
// error names the file; else fs's --files, whose error names SHEETQ_FILES when that set
// it), with the keys of the file's [files] table (each may be env:NAME or file:PATH);
// without them objstore reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
func bucketConfig(raw string, fc app.FileConfig, fromFile bool, fs *flag.FlagSet) (objstore.Config, error) {
	cfg, err := objstore.ParseURL(raw)
	if err != nil && fromFile {
		return objstore.Config{}, fc.Errorf("[files] url: %w", err)
	} else if err != nil {
		return objstore.Config{}, blameEnv(fs, usageError{err}, "files")
	}
	if cfg.AccessKey, err = app.ResolveSecret(fc.Files.AccessKey); err != nil {
		return objstore.Config{}, fc.Errorf("[files] access_key: %w", err)
	}
	if cfg.SecretKey, err = app.ResolveSecret(fc.Files.SecretKey); err != nil {
		return objstore.Config{}, fc.Errorf("[files] secret_key: %w", err)
	}
	return cfg, nil
}
