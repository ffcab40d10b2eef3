package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sheetq/internal/durable"
)

// openReadOnly opens the one pool of a read-only Store: mode=ro and no migrations. The
// writer field points at the same pool, so a write fails with SQLite's "readonly
// database" error. (Not query_only: that pragma also refuses VACUUM INTO.)
func openReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	pragmas := []string{writerPragmas(opts.BusyTimeout)[0], "foreign_keys(1)"}
	r, err := sql.Open("sqlite", dsn(path, pragmas, "mode=ro"))
	if err != nil {
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	s := &Store{w: r, r: r, now: opts.Now}
	if err := s.prepare(ctx); err != nil {
		r.Close()
		return nil, err
	}
	if err := s.reads.prepare(ctx, r); err != nil {
		r.Close()
		return nil, err
	}
	return s, nil
}

// Backup writes a consistent copy of the database to path with VACUUM INTO, which reads
// one snapshot and so may run while the server writes. It refuses to overwrite an existing
// file. The copy is written to path+".tmp" (a stale one from an interrupted backup is
// replaced), synced, then moved into place, so path is either absent or complete.
func (s *Store) Backup(ctx context.Context, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("backup: %s already exists", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := s.r.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backup: vacuum into %s: %w", tmp, err)
	}
	if err := durable.SyncFile(tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	// A hard link fails if path appeared meanwhile, where a rename would replace it.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			_ = os.Remove(tmp)
			return fmt.Errorf("backup: %s already exists", path)
		}
		// No hard links on this file system: fall back to a rename.
		if err := os.Rename(tmp, path); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("backup: %w", err)
		}
	} else {
		_ = os.Remove(tmp)
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
