package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	"sheetq/internal/datadir"
	"sheetq/jobs/export"
	"sheetq/jobs/export/sample"
	"sheetq/store"
	"sheetq/store/sqlite"
)

// exportKind is the export job kind with the catalog it reads reports from.
type exportKind struct {
	*export.Kind
	catalog *export.Catalog
	// config is the config file as read at start, for the parts beyond exports.
	config FileConfig
}

// openExports prepares the export job kind: the first-run sample, the config file's
// sources and the watched reports folder. cleanup stops the watcher and closes sources.
func openExports(ctx context.Context, cfg Config, dir datadir.Dir) (exportKind, func(), error) {
	log := cfg.Logger
	configFile, reportsDir := cfg.ConfigFile, cfg.ReportsDir
	installed := false
	if configFile == "" && reportsDir == "" {
		// Only a data directory on its defaults gets the sample; a user who names their
		// own config or reports folder has set things up already.
		var err error
		installed, err = sample.Install(ctx, sample.Layout{DataDir: dir.Root})
		switch {
		case sqlite.IsDiskFull(err):
			// The sample's database is about 19 MB. Without room for it, a first start
			// used to exit, and so did every start after it; sheetq works without it.
			log.WarnContext(ctx, fmt.Sprintf("first run: no room on the disk for the sample shop database (about 19 MB), so sheetq starts without the sample; "+
				"to get it later, free some space, delete the empty folder %s and start again", dir.Reports()),
				"data", dir.Root, "err", err)
		case err != nil:
			return exportKind{}, nil, err
		case installed:
			log.InfoContext(ctx, "first run: installed the sample shop database, reports and config",
				"reports", dir.Reports(), "config", dir.Config())
		}
	}
	if configFile == "" {
		configFile = dir.Config()
	}
	if reportsDir == "" {
		reportsDir = dir.Reports()
	}
	// The config file read at start, unless the sample has just written one.
	var fc FileConfig
	if cfg.File != nil && !installed {
		fc = *cfg.File
	} else {
		var err error
		if fc, err = LoadFileConfig(configFile, cfg.ConfigFile == ""); err != nil {
			return exportKind{}, nil, err
		}
	}
	var closers []io.Closer
	cleanup := func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}
	sources := map[string]export.Source{}
	for name, sc := range fc.Sources {
		// Relative paths in the config file are relative to the file's folder.
		src, err := export.OpenSource(name, sc, filepath.Dir(configFile))
		if err != nil {
			cleanup()
			return exportKind{}, nil, fc.Errorf("%w", err)
		}
		if c, ok := src.(io.Closer); ok {
			closers = append(closers, c)
		}
		if l, ok := src.(export.Logged); ok {
			l.SetLogger(log)
		}
		sources[name] = src
	}
	cat := export.NewCatalog(reportsDir, export.Builtin(), log)
	// A report may name only a queue that has a lane (rule 27): Config.validate has
	// completed the engine's lanes from [queues].
	cat.SetQueues(append([]string{store.DefaultQueue}, slices.Sorted(maps.Keys(cfg.Engine.Queues))...))
	if err := cat.Start(ctx); err != nil {
		cleanup()
		return exportKind{}, nil, errors.Join(errors.New("watch reports"), err)
	}
	closers = append([]io.Closer{closerFunc(cat.Stop)}, closers...)
	kind := export.New(export.Config{TmpDir: dir.Tmp(), Library: cat, Sources: sources, Version: cfg.Version})
	// No export runs yet and this process owns the data directory: spill files in tmp/
	// are what a killed process left behind.
	if n, err := kind.RemoveScratch(); err != nil {
		log.WarnContext(ctx, "remove stale spill files", "err", err)
	} else if n > 0 {
		log.InfoContext(ctx, "removed spill files left by an earlier run", "files", n)
	}
	return exportKind{Kind: kind, catalog: cat, config: fc}, cleanup, nil
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }
