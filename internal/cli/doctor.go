package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sheetq/app"
	"sheetq/internal/datadir"
	"sheetq/internal/filekind"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
	"sheetq/store/sqlite"
	"sheetq/ui"
)

// doctorProblem is one finding of `sheetq doctor`.
type doctorProblem struct {
	// Check is the check that found it: database, bucket, link, not_regular, part_file,
	// orphan_file, missing_file, file_size, file_sha256 or disk_space.
	Check   string `json:"check"`
	Message string `json:"message"`
	Path    string `json:"path,omitempty"`
	Job     string `json:"job,omitempty"`
	// Fixed is set when --fix removed the cause.
	Fixed bool `json:"fixed,omitempty"`
}

// doctorReport is what `sheetq doctor --json` prints.
type doctorReport struct {
	Data string `json:"data"`
	// Store and Files name the PostgreSQL store and the bucket checked (passwords
	// left out); empty for the data directory's own.
	Store     string          `json:"store,omitempty"`
	Files     string          `json:"files_store,omitempty"`
	Running   bool            `json:"server_running"`
	Jobs      int             `json:"jobs"`
	Published int             `json:"files"`
	FreeBytes uint64          `json:"free_bytes"`
	Healthy   bool            `json:"healthy"`
	Problems  []doctorProblem `json:"problems"`
}

// doctorCmd runs `sheetq doctor [--data DIR] [--json] [--fix] [--deep]`: checks a data
// directory, read-only unless --fix, and safe while a server runs.
func doctorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` to check (default: the user's data folder)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fix := fs.Bool("fix", false, "remove orphan part files (the only problem doctor repairs)")
	deep := fs.Bool("deep", false, "also compare each published file's sha256 with the record (reads every file)")
	minFree := fs.Int64("min-free-mb", 512, "report a problem when less than this many `MiB` are free")
	sf := addStoreFlags(fs, true, true)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sheetq doctor [--data DIR] [--json] [--fix] [--deep]

Check a data directory: the database's integrity, links and other non-regular files
in exports/ and tmp/, part files no running export owns, published files no export
owns, finished exports whose file is missing or not of the recorded size (and, with
--deep, sha256), and free disk space. Safe while the server runs (the database is
opened read-only).
With a PostgreSQL store (--store, SHEETQ_STORE or the config file's [store] url) it
checks that database instead of the SQLite file: the connection, the schema version and
a write that is rolled back. With a bucket (--files, SHEETQ_FILES or [files] url) it
checks the bucket instead of the exports folder: a write and delete of a probe object,
and each finished export's object.
Exit status: 0 healthy, 1 problems found (one line each), 2 bad command line.

Flags:
`)
		printFlags(stderr, fs)
	}
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("doctor takes no arguments, got %q (use --data DIR)", fs.Args())}
	}
	if *minFree < 0 || *minFree > 1<<40 {
		// Not taken as 0: a typo'd sign would silently turn the disk space check off.
		// Nor over 1 EiB, whose bytes would overflow.
		return blameEnv(fs, usageError{fmt.Errorf("--min-free-mb %d: want 0 to %d MiB", *minFree, int64(1)<<40)}, "min-free-mb")
	}
	root, err := dataRoot(*data)
	if err != nil {
		return err
	}
	st, err := sf.resolve(root)
	if err != nil {
		return err
	}
	opts := doctorOptions{Fix: *fix, Deep: *deep, MinFree: uint64(*minFree) << 20, Stores: st}
	rep, err := diagnose(ctx, datadir.Dir{Root: root}, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			line := p.Check + ": " + p.Message
			if p.Fixed {
				line += " (fixed)"
			}
			fmt.Fprintln(stdout, line)
		}
		if rep.Healthy {
			where := rep.Data
			for _, s := range []string{rep.Store, rep.Files} {
				if s != "" {
					where += ", " + s
				}
			}
			fmt.Fprintf(stdout, "ok: %s (%d exports, %d files, %s free)\n", where, rep.Jobs, rep.Published, ui.Size(int64(rep.FreeBytes)))
		}
	}
	if !rep.Healthy {
		open := 0
		for _, p := range rep.Problems {
			if !p.Fixed {
				open++
			}
		}
		return fmt.Errorf("doctor: %d problems in %s", open, rep.Data)
	}
	return nil
}

// doctorOptions are the flags of sheetq doctor that change what diagnose does.
type doctorOptions struct {
	// Fix removes orphan part files.
	Fix bool
	// Deep hashes every published file to compare it with the recorded sha256.
	Deep bool
	// MinFree is the free space in bytes under which disk_space is reported.
	MinFree uint64
	// Stores are the job store and file store to check in place of the data
	// directory's SQLite file and exports folder.
	Stores app.Stores
}

// diagnose runs every check. Only an unreadable directory or database is an error;
// everything else is a problem in the report.
func diagnose(ctx context.Context, dir datadir.Dir, opts doctorOptions) (doctorReport, error) {
	fix, minFree := opts.Fix, opts.MinFree
	rep := doctorReport{Data: dir.Root, Problems: []doctorProblem{}}
	running, err := dir.Running()
	if err != nil {
		return rep, fmt.Errorf("doctor: %w", err)
	}
	rep.Running = running
	add := func(p doctorProblem) { rep.Problems = append(rep.Problems, p) }

	byID := map[string]store.JobFile{}
	var jobFiles []store.JobFile
	jobsRead := true
	if dsn := opts.Stores.DSN; dsn != "" {
		rep.Store = app.RedactURL(dsn)
		jobFiles, jobsRead = diagnoseServer(ctx, dsn, add)
	} else {
		st, err := sqlite.OpenDriver(ctx, dir.DB(), sqlite.Options{ReadOnly: true})
		if err != nil {
			return rep, fmt.Errorf("doctor: %w", err)
		}
		defer st.Close()
		findings, err := st.IntegrityCheck(ctx)
		if err != nil {
			add(doctorProblem{Check: "database", Path: dir.DB(), Message: fmt.Sprintf("%s: %v", dir.DB(), err)})
		}
		for _, f := range findings {
			add(doctorProblem{Check: "database", Path: dir.DB(), Message: dir.DB() + ": " + f})
		}
		jobFiles, err = st.JobFiles(ctx)
		if err != nil {
			add(doctorProblem{Check: "database", Path: dir.DB(), Message: fmt.Sprintf("%s: cannot list jobs: %v", dir.DB(), err)})
		}
	}
	for _, j := range jobFiles {
		byID[j.ID] = j
	}
	rep.Jobs = len(jobFiles)

	// Links and special files: the server serves and publishes only regular files that
	// live in the data directory (app/api/export_file.go refuses anything else), so a link
	// or a FIFO in exports/ or tmp/, or either directory being a link, is a problem
	// whatever it points at. Such entries are left out of the checks below.
	odd := oddEntries(dir, add)

	// Part files: tmp/<id>.<attempt>.part belongs to the running attempt of a job, and
	// only while a server runs (it removes them all at start). Without the jobs every
	// file would look like an orphan: the database's problem is the one to report.
	parts, _ := filepath.Glob(filepath.Join(dir.Tmp(), jobs.PartGlob))
	if !jobsRead {
		parts = nil
	}
	for _, path := range parts {
		if odd[path] {
			continue
		}
		id, attempt := jobs.ParsePartName(filepath.Base(path))
		j, known := byID[id]
		if running && known && j.Status == store.StatusProcessing && j.Attempt == attempt {
			continue
		}
		p := doctorProblem{Check: "part_file", Path: path, Job: id}
		switch {
		case !running:
			p.Message = path + ": part file left by a server that is not running"
		case !known:
			p.Message = path + ": part file of no known export"
		default:
			p.Message = fmt.Sprintf("%s: part file of export %s, which is %s (attempt %d)", path, id, j.Status, j.Attempt)
		}
		if fix {
			if err := os.Remove(path); err == nil || errors.Is(err, fs.ErrNotExist) {
				p.Fixed = true
			} else {
				p.Message += fmt.Sprintf(" (could not remove: %v)", err)
			}
		}
		add(p)
	}

	// Published files: exports/<id>.xlsx or <id>.csv (the export kind's name, export.Kind.FileName)
	// must belong to an export that has (or, while it is being published or recovered,
	// is about to have) a file.
	var files []string
	switch {
	case opts.Stores.Bucket != nil:
		rep.Files = app.RedactURL(opts.Stores.FilesURL)
		if jobsRead {
			rep.Published = checkBucket(ctx, *opts.Stores.Bucket, opts.Stores.FilesURL, jobFiles, opts.Deep, add)
		}
		jobFiles = nil // their files are in the bucket, not in exports/
	case jobsRead:
		for _, ext := range []string{export.FileExt, export.CSVExt} {
			found, _ := filepath.Glob(filepath.Join(dir.Exports(), "*"+ext))
			files = append(files, found...)
		}
		rep.Published = len(files)
	}
	onDisk := map[string]bool{}
	for _, path := range files {
		id, _ := publishedID(filepath.Base(path))
		onDisk[id] = true
		if odd[path] {
			continue
		}
		j, known := byID[id]
		switch {
		case !known:
			add(doctorProblem{Check: "orphan_file", Path: path, Job: id, Message: path + ": published file of no known export"})
		case j.Status == store.StatusExpired || j.Status == store.StatusFailed || j.Status == store.StatusCanceled:
			add(doctorProblem{Check: "orphan_file", Path: path, Job: id,
				Message: fmt.Sprintf("%s: published file of export %s, which is %s", path, id, j.Status)})
		case j.Status == store.StatusSucceeded:
			checkPublished(path, j, opts.Deep, add)
		}
	}
	for _, j := range jobFiles {
		if id, _ := publishedID(j.FileName); j.Status == store.StatusSucceeded && j.FileName != "" && !onDisk[id] {
			path := filepath.Join(dir.Exports(), j.FileName)
			if _, err := os.Stat(path); err != nil {
				add(doctorProblem{Check: "missing_file", Path: path, Job: j.ID,
					Message: fmt.Sprintf("export %s is SUCCEEDED but its file %s is missing", j.ID, path)})
			}
		}
	}

	free, err := diskFree(dir.Root)
	switch {
	case err != nil:
		add(doctorProblem{Check: "disk_space", Path: dir.Root, Message: fmt.Sprintf("%s: cannot read free space: %v", dir.Root, err)})
	case free < minFree:
		add(doctorProblem{Check: "disk_space", Path: dir.Root,
			Message: fmt.Sprintf("%s: only %s free (want at least %s)", dir.Root, ui.Size(int64(free)), ui.Size(int64(minFree)))})
	}
	rep.FreeBytes = free
	rep.Healthy = !slices.ContainsFunc(rep.Problems, func(p doctorProblem) bool { return !p.Fixed })
	return rep, nil
}

// oddEntries reports exports/ or tmp/ being a link, and every link or other non-regular
// entry in them, and returns the paths of those entries.
func oddEntries(dir datadir.Dir, add func(doctorProblem)) map[string]bool {
	odd := map[string]bool{}
	for _, d := range []string{dir.Exports(), dir.Tmp()} {
		why := "the server writes only regular part files here"
		if d == dir.Exports() {
			why = "the server refuses to serve it"
		}
		fi, err := os.Lstat(d)
		if err != nil {
			continue // a directory not yet created holds nothing
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			add(doctorProblem{Check: "link", Path: d, Message: d + ": a link" + linkTarget(d) +
				"; the data directory must hold this directory itself (the server refuses to serve through it)"})
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			path := filepath.Join(d, e.Name())
			switch t := e.Type(); {
			case t&fs.ModeSymlink != 0:
				odd[path] = true
				add(doctorProblem{Check: "link", Path: path, Job: jobOfEntry(e.Name()),
					Message: path + ": a link" + linkTarget(path) + "; only regular files belong here (" + why + ")"})
			case !t.IsRegular():
				odd[path] = true
				add(doctorProblem{Check: "not_regular", Path: path, Job: jobOfEntry(e.Name()),
					Message: fmt.Sprintf("%s: not a regular file (%s); only regular files belong here (%s)", path, filekind.Of(t), why)})
			}
		}
	}
	return odd
}

// checkPublished compares a SUCCEEDED export's file with its record: the size always,
// the sha256 when deep.
func checkPublished(path string, j store.JobFile, deep bool, add func(doctorProblem)) {
	fi, err := os.Lstat(path)
	if err != nil {
		return // removed meanwhile; a running server may expire or delete it
	}
	if fi.Size() != j.FileSize {
		add(doctorProblem{Check: "file_size", Path: path, Job: j.ID,
			Message: fmt.Sprintf("%s: %d bytes, but export %s recorded %d (the server refuses to serve it)", path, fi.Size(), j.ID, j.FileSize)})
		return
	}
	if !deep {
		return
	}
	_, sum, err := jobs.HashFile(path)
	switch {
	case err != nil:
		add(doctorProblem{Check: "file_sha256", Path: path, Job: j.ID, Message: fmt.Sprintf("%s: cannot read: %v", path, err)})
	case !strings.EqualFold(sum, j.FileSHA256):
		add(doctorProblem{Check: "file_sha256", Path: path, Job: j.ID,
			Message: fmt.Sprintf("%s: sha256 %s, but export %s recorded %s (the file was changed or damaged)", path, sum, j.ID, j.FileSHA256)})
	}
}

// linkTarget is " to TARGET" for a link that can be read.
func linkTarget(path string) string {
	if t, err := os.Readlink(path); err == nil {
		return " to " + t
	}
	return ""
}

// jobOfEntry is the export id in a file name of exports/ or tmp/.
func jobOfEntry(name string) string {
	if id, ok := publishedID(name); ok {
		return id
	}
	if ok, _ := filepath.Match(jobs.PartGlob, name); ok {
		id, _ := jobs.ParsePartName(name)
		return id
	}
	return ""
}

// publishedID is the export id in a published file's name: <id>.xlsx or <id>.csv, by
// the export's format (export.Kind.FileName).
func publishedID(name string) (string, bool) {
	for _, ext := range []string{export.FileExt, export.CSVExt} {
		if id, ok := strings.CutSuffix(name, ext); ok {
			return id, true
		}
	}
	return "", false
}
