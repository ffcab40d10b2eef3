package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"

	"sheetq/app/problem"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// getExportFile downloads a finished job's file.
func (a *API) getExportFile(w http.ResponseWriter, r *http.Request) error {
	job, err := a.loadJob(r)
	if err != nil {
		return err
	}
	switch job.Status {
	case store.StatusSucceeded:
	case store.StatusExpired:
		return problem.New(http.StatusGone, "expired", "the file was removed by retention; request the export again")
	case store.StatusFailed, store.StatusCanceled:
		p := problem.New(http.StatusConflict, "no_file", "the export ended "+string(job.Status)+" and has no file")
		p.Job = job.ID
		return p
	default:
		p := problem.New(http.StatusConflict, "not_finished",
			"the export is "+string(job.Status)+"; poll GET /api/v1/exports/"+job.ID).With("Retry-After", "2")
		p.Job = job.ID
		return p
	}
	if job.FileName == "" {
		return problem.New(http.StatusConflict, "no_file", "the export finished without a file")
	}
	f, fi, err := openPublished(a.cfg.DataDir, a.cfg.ExportsDir, job)
	var unsafe *unsafeFileError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return problem.New(http.StatusGone, "file_missing", "the file is no longer on the server; request the export again")
	case errors.As(err, &unsafe):
		// Not the client's mistake, yet no server fault a retry would cure: what sits at
		// the file's name is not the file this export published. For the client that is
		// the same as a missing file (410, request the export again); the operator learns
		// the cause from this log line and from sheetq doctor.
		a.cfg.Log.WarnContext(r.Context(), "refused to serve export file", "job_id", job.ID, "path", unsafe.path, "reason", unsafe.reason)
		return problem.New(http.StatusGone, "file_missing",
			"the file of this export is not available on the server; request the export again")
	case err != nil:
		return err
	}
	defer f.Close()
	var args struct{ Report string }
	_ = json.Unmarshal(job.Args, &args)
	name := export.DownloadName(args.Report, job)
	w.Header().Set("Content-Type", xlsxType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("ETag", `"`+job.FileSHA256+`"`)
	w.Header().Set("Cache-Control", "private, max-age=3600")
	http.ServeContent(w, r, name, fi.ModTime(), f)
	return nil
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
func openPublished(root, exportsDir string, job store.Job) (*os.File, fs.FileInfo, error) {
	path := jobs.FilePath(exportsDir, job.FileName)
	if path == "" {
		return nil, nil, fmt.Errorf("job %s published no file: %w", job.ID, fs.ErrNotExist)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return nil, nil, err
	}
	dirRoot, err := os.OpenRoot(root)
	if err != nil {
		return nil, nil, err
	}
	defer dirRoot.Close() // an open file outlives its Root
	refuse := func(reason string) (*os.File, fs.FileInfo, error) {
		return nil, nil, &unsafeFileError{path: path, reason: reason}
	}
	// The Root refuses a path that a linked directory leads out of, with an error that
	// is not exported; naming the likely cause is clearer.
	if di, err := dirRoot.Lstat(filepath.Dir(rel)); err == nil && !di.IsDir() {
		return refuse("its directory " + filepath.Dir(path) + " is a link or not a directory")
	}
	before, err := dirRoot.Lstat(rel)
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
	f, err := dirRoot.OpenFile(rel, openPublishedFlags, 0)
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
