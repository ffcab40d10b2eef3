package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"

	"sheetq/jobs"
	"sheetq/store"
)

const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// getExportFile downloads a finished job's file.
func (s *server) getExportFile(w http.ResponseWriter, r *http.Request) {
	job, ok := s.loadJob(w, r)
	if !ok {
		return
	}
	switch job.Status {
	case store.StatusSucceeded:
	case store.StatusExpired:
		writeProblem(w, http.StatusGone, "expired", "the file was removed by retention; request the export again")
		return
	case store.StatusFailed, store.StatusCanceled:
		writeProblemValue(w, problem{Status: http.StatusConflict, Code: "no_file", Job: job.ID,
			Detail: "the export ended " + string(job.Status) + " and has no file"})
		return
	default:
		w.Header().Set("Retry-After", "2")
		writeProblemValue(w, problem{Status: http.StatusConflict, Code: "not_finished", Job: job.ID,
			Detail: "the export is " + string(job.Status) + "; poll GET /api/v1/exports/" + job.ID})
		return
	}
	if job.FileName == "" {
		writeProblem(w, http.StatusConflict, "no_file", "the export finished without a file")
		return
	}
	f, fi, err := openPublished(s.dir, job)
	var unsafe *unsafeFileError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeProblem(w, http.StatusGone, "file_missing", "the file is no longer on the server; request the export again")
		return
	case errors.As(err, &unsafe):
		// Not the client's mistake, yet no server fault a retry would cure: what sits at
		// the file's name is not the file this export published. For the client that is
		// the same as a missing file (410, request the export again); the operator learns
		// the cause from this log line and from sheetq doctor.
		s.log.WarnContext(r.Context(), "refused to serve export file", "job_id", job.ID, "path", unsafe.path, "reason", unsafe.reason)
		writeProblem(w, http.StatusGone, "file_missing",
			"the file of this export is not available on the server; request the export again")
		return
	case err != nil:
		s.serverError(w, r, err)
		return
	}
	defer f.Close()
	var args struct{ Report string }
	_ = json.Unmarshal(job.Args, &args)
	name := downloadName(args.Report, job)
	w.Header().Set("Content-Type", xlsxType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("ETag", `"`+job.FileSHA256+`"`)
	w.Header().Set("Cache-Control", "private, max-age=3600")
	http.ServeContent(w, r, name, fi.ModTime(), f)
}

// unsafeFileError says why a job's published file is refused: a link, not a regular
// file, outside the data directory, or not the size the job recorded.
type unsafeFileError struct {
	path   string
	reason string
}

func (e *unsafeFileError) Error() string { return e.path + ": " + e.reason }

// openPublished opens job's published file for serving. It serves only a regular file
// reached inside the data directory without following a link, of the recorded size:
// the os.Root refuses paths that leave the directory, Lstat refuses a link or a special
// file, and comparing Lstat with the open file's Stat (os.SameFile) defeats a swap
// between the two. A missing file gives an error wrapping fs.ErrNotExist, a refused
// one an *unsafeFileError.
func openPublished(dir DataDir, job store.Job) (*os.File, fs.FileInfo, error) {
	path := jobs.FilePath(dir.Exports(), job.FileName)
	if path == "" {
		return nil, nil, fmt.Errorf("job %s published no file: %w", job.ID, fs.ErrNotExist)
	}
	rel, err := filepath.Rel(dir.Root, path)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir.Root)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close() // an open file outlives its Root
	refuse := func(reason string) (*os.File, fs.FileInfo, error) {
		return nil, nil, &unsafeFileError{path: path, reason: reason}
	}
	// The Root refuses a path that a linked directory leads out of, with an error that
	// is not exported; naming the likely cause is clearer.
	if di, err := root.Lstat(filepath.Dir(rel)); err == nil && !di.IsDir() {
		return refuse("its directory " + filepath.Dir(path) + " is a link or not a directory")
	}
	before, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, err
	case err != nil:
		return nil, nil, err
	case before.Mode()&fs.ModeSymlink != 0:
		return refuse("it is a symbolic link")
	case !before.Mode().IsRegular():
		return refuse("it is not a regular file (" + before.Mode().Type().String() + ")")
	}
	f, err := root.OpenFile(rel, openPublishedFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !after.Mode().IsRegular() || !os.SameFile(before, after) {
		f.Close()
		return refuse("it was replaced while being opened")
	}
	if after.Size() != job.FileSize {
		f.Close()
		return refuse(fmt.Sprintf("it has %d bytes, the export recorded %d", after.Size(), job.FileSize))
	}
	return f, after, nil
}
