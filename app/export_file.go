package app

import (
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"os"

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
	f, err := os.Open(jobs.FilePath(s.dir.Exports(), job.ID))
	if errors.Is(err, fs.ErrNotExist) {
		writeProblem(w, http.StatusGone, "file_missing", "the file is no longer on the server; request the export again")
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var args struct{ Report string }
	_ = json.Unmarshal(job.Args, &args)
	name := downloadName(args.Report, job)
	w.Header().Set("Content-Type", xlsxType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("ETag", `"`+job.FileSHA256+`"`)
	w.Header().Set("Cache-Control", "private, max-age=3600")
	http.ServeContent(w, r, name, fi.ModTime(), f)
}
