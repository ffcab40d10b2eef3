package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"strconv"
	"time"

	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/jobs"
	"sheetq/jobs/export"
	"sheetq/store"
)

// getExportFile downloads a finished job's file.
func (a *API) getExportFile(w http.ResponseWriter, r *http.Request) error {
	job, err := a.loadJob(r)
	if err != nil {
		return err
	}
	if err := fileReady(job); err != nil {
		return err
	}
	var args export.Args
	_ = json.Unmarshal(job.Args, &args) // the zero value is an xlsx file
	if args.EncryptRequired() {
		p := problem.New(http.StatusForbidden, "encryption_required",
			"report "+strconv.Quote(args.Report)+" hands out its files only encrypted with a password: POST /api/v1/exports/"+job.ID+`/file with {"password": "..."}`)
		p.Job = job.ID
		return p
	}
	f, fi, err := a.openFile(r, job)
	if err != nil {
		return err
	}
	defer f.Close()
	name, contentType := export.DownloadName(args, job), args.ContentType()
	if a.cfg.Download == DownloadRedirect && r.Method == http.MethodGet {
		// A presigned URL is signed for GET: a HEAD is answered here, from the object.
		link, err := a.cfg.Files.Presign(r.Context(), job.FileName, presignTTL, name, contentType)
		switch {
		case err == nil:
			if err := a.exports.Record(r.Context(), audit.FileDownloaded, job, "by a presigned redirect to the bucket"); err != nil {
				return err
			}
			// The link expires: a cached redirect would outlive it.
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, link, http.StatusFound)
			return nil
		case errors.Is(err, jobs.ErrUnavailable):
			return filesUnavailable(r, a, job.ID, err)
		case !errors.Is(err, jobs.ErrNoPresign):
			return err
		}
	}
	if r.Method == http.MethodGet {
		// Every GET is a download, a range request or a conditional one too: what was
		// sent is the client's, the entry says who asked for the file.
		if err := a.exports.Record(r.Context(), audit.FileDownloaded, job, "streamed"); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("ETag", `"`+job.FileSHA256+`"`)
	w.Header().Set("Cache-Control", "private, max-age=3600")
	http.ServeContent(&contentErrors{ResponseWriter: w}, r, name, fi.Modified, f)
	return nil
}

// fileReady says whether job has a file to download, or the problem to answer with.
func fileReady(job store.Job) error {
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
	return nil
}

// openFile opens job's file in the file store, checked against what the export
// recorded, or returns the problem to answer with.
func (a *API) openFile(r *http.Request, job store.Job) (io.ReadSeekCloser, jobs.FileInfo, error) {
	f, fi, err := a.cfg.Files.Open(r.Context(), job.FileName)
	if err == nil {
		switch {
		case fi.Size != job.FileSize:
			err = &jobs.RefusedFileError{Path: fi.Path, Reason: fmt.Sprintf("it has %d bytes, the export recorded %d", fi.Size, job.FileSize)}
		case fi.SHA256 != "" && fi.SHA256 != job.FileSHA256:
			err = &jobs.RefusedFileError{Path: fi.Path, Reason: "its sha256 is not the one the export recorded"}
		}
		if err != nil {
			f.Close()
		}
	}
	var refused *jobs.RefusedFileError
	switch {
	case err == nil:
		return f, fi, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fi, problem.New(http.StatusGone, "file_missing", "the file is no longer on the server; request the export again")
	case errors.As(err, &refused):
		// Not the client's mistake, yet no server fault a retry would cure: what sits at
		// the file's name is not the file this export published. For the client that is
		// the same as a missing file (410, request the export again); the operator learns
		// the cause from this log line and from sheetq doctor.
		a.cfg.Log.WarnContext(r.Context(), "refused to serve export file", "job_id", job.ID, "path", refused.Path, "reason", refused.Reason)
		return nil, fi, problem.New(http.StatusGone, "file_missing",
			"the file of this export is not available on the server; request the export again")
	case errors.Is(err, jobs.ErrUnavailable):
		return nil, fi, filesUnavailable(r, a, job.ID, err)
	}
	return nil, fi, err
}

// contentErrors turns the error answers http.ServeContent writes by itself (412 for a
// failed If-Match or If-Unmodified-Since, 416 for a Range it cannot satisfy) into
// problem+json like every other API error. Left alone, a 412 went out empty under the
// file's Content-Type and Content-Disposition, and a 416 as text/plain still named as
// the attachment, so that curl -OJ saved "invalid range" as the spreadsheet.
type contentErrors struct {
	http.ResponseWriter
	failed bool
}

func (w *contentErrors) WriteHeader(code int) {
	if code < 400 || w.failed {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.failed = true
	h := w.Header()
	h.Del("Content-Disposition")
	h.Del("Content-Length")
	var p *problem.Problem
	switch code {
	case http.StatusPreconditionFailed:
		p = problem.New(code, "precondition_failed",
			"the file does not match If-Match or has changed since If-Unmodified-Since; its ETag is "+h.Get("ETag"))
	case http.StatusRequestedRangeNotSatisfiable:
		// Content-Range (bytes */size), set by ServeContent when it knows the size, stays.
		p = problem.New(code, "range_not_satisfiable",
			"the Range cannot be satisfied: send one or more byte ranges (bytes=first-last) within the file's size")
	default:
		p = problem.New(code, "bad_request", http.StatusText(code))
	}
	p.Write(w.ResponseWriter)
}

// Write drops ServeContent's own text/plain error message after a problem was written.
func (w *contentErrors) Write(b []byte) (int, error) {
	if w.failed {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *contentErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// filesUnavailable answers a download whose file store did not answer (a bucket down or
// unreachable): the file is not lost, and a retry may work.
func filesUnavailable(r *http.Request, a *API, id string, err error) error {
	a.cfg.Log.WarnContext(r.Context(), "the file store does not answer", "job_id", id, "err", err)
	return problem.New(http.StatusServiceUnavailable, "files_unavailable",
		"the file store does not answer, so the file cannot be sent now; retry shortly").With("Retry-After", "5")
}

// Download is how a file in a bucket reaches the client (Config.Download).
type Download string

const (
	// DownloadStream sends the file's bytes through the node that answers the request.
	DownloadStream Download = "stream"
	// DownloadRedirect answers with a redirect to a presigned URL of the bucket, which
	// serves the bytes itself, with the download's name and type.
	DownloadRedirect Download = "redirect"
)

// ParseDownload reads a download mode: "stream" (or "") or "redirect".
func ParseDownload(s string) (Download, error) {
	switch Download(s) {
	case "", DownloadStream:
		return DownloadStream, nil
	case DownloadRedirect:
		return DownloadRedirect, nil
	}
	return "", fmt.Errorf("download %q: want stream or redirect", s)
}

// presignTTL is how long a redirect's presigned URL works: long enough for a browser
// to follow it and for a slow client to fetch a large file (S3 checks the expiry when
// the request starts), short enough that a leaked link soon stops working.
const presignTTL = 15 * time.Minute
