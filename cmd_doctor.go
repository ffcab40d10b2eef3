package main

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
	"sheetq/jobs"
	"sheetq/store"
	"sheetq/ui"
)

// doctorProblem is one finding of `sheetq doctor`.
type doctorProblem struct {
	// Check is the check that found it: database, part_file, orphan_file, missing_file
	// or disk_space.
	Check   string `json:"check"`
	Message string `json:"message"`
	Path    string `json:"path,omitempty"`
	Job     string `json:"job,omitempty"`
	// Fixed is set when --fix removed the cause.
	Fixed bool `json:"fixed,omitempty"`
}

// doctorReport is what `sheetq doctor --json` prints.
type doctorReport struct {
	Data      string          `json:"data"`
	Running   bool            `json:"server_running"`
	Jobs      int             `json:"jobs"`
	Files     int             `json:"files"`
	FreeBytes uint64          `json:"free_bytes"`
	Healthy   bool            `json:"healthy"`
	Problems  []doctorProblem `json:"problems"`
}

// doctorCmd runs `sheetq doctor [--data DIR] [--json] [--fix]`: checks a data directory,
// read-only unless --fix, and safe while a server runs.
func doctorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data `directory` to check (default: the user's data folder)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fix := fs.Bool("fix", false, "remove orphan part files (the only problem doctor repairs)")
	minFree := fs.Int64("min-free-mb", 512, "report a problem when less than this many `MiB` are free")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sheetq doctor [--data DIR] [--json] [--fix]

Check a data directory: the database's integrity, part files no running export owns,
published files no export owns, finished exports whose file is missing, and free disk
space. Safe while the server runs (the database is opened read-only).
Exit status: 0 healthy, 1 problems found (one line each), 2 bad command line.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("doctor takes no arguments, got %q (use --data DIR)", fs.Args())}
	}
	root, err := dataRoot(*data)
	if err != nil {
		return err
	}
	rep, err := diagnose(ctx, app.DataDir{Root: root}, *fix, uint64(max(*minFree, 0))<<20)
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
			fmt.Fprintf(stdout, "ok: %s (%d exports, %d files, %s free)\n", rep.Data, rep.Jobs, rep.Files, ui.Size(int64(rep.FreeBytes)))
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

// diagnose runs every check. Only an unreadable directory or database is an error;
// everything else is a problem in the report.
func diagnose(ctx context.Context, dir app.DataDir, fix bool, minFree uint64) (doctorReport, error) {
	rep := doctorReport{Data: dir.Root, Problems: []doctorProblem{}}
	running, err := dir.Running()
	if err != nil {
		return rep, fmt.Errorf("doctor: %w", err)
	}
	rep.Running = running
	add := func(p doctorProblem) { rep.Problems = append(rep.Problems, p) }

	byID := map[string]store.JobFile{}
	st, err := store.Open(ctx, dir.DB(), store.Options{ReadOnly: true})
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
	jobFiles, err := st.JobFiles(ctx)
	if err != nil {
		add(doctorProblem{Check: "database", Path: dir.DB(), Message: fmt.Sprintf("%s: cannot list jobs: %v", dir.DB(), err)})
	}
	for _, j := range jobFiles {
		byID[j.ID] = j
	}
	rep.Jobs = len(jobFiles)

	// Part files: tmp/<id>.<attempt>.part belongs to the running attempt of a job, and
	// only while a server runs (it removes them all at start).
	parts, _ := filepath.Glob(filepath.Join(dir.Tmp(), "*.part"))
	for _, path := range parts {
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

	// Published files: exports/<id>.xlsx must belong to an export that has (or, while
	// it is being published or recovered, is about to have) a file.
	files, _ := filepath.Glob(filepath.Join(dir.Exports(), "*.xlsx"))
	rep.Files = len(files)
	onDisk := map[string]bool{}
	for _, path := range files {
		id := strings.TrimSuffix(filepath.Base(path), ".xlsx")
		onDisk[id] = true
		j, known := byID[id]
		switch {
		case !known:
			add(doctorProblem{Check: "orphan_file", Path: path, Job: id, Message: path + ": published file of no known export"})
		case j.Status == store.StatusExpired || j.Status == store.StatusFailed || j.Status == store.StatusCanceled:
			add(doctorProblem{Check: "orphan_file", Path: path, Job: id,
				Message: fmt.Sprintf("%s: published file of export %s, which is %s", path, id, j.Status)})
		}
	}
	for _, j := range jobFiles {
		if j.Status == store.StatusSucceeded && j.FileName != "" && !onDisk[strings.TrimSuffix(j.FileName, ".xlsx")] {
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
