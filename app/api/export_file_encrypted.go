package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"sheetq/app/audit"
	"sheetq/app/problem"
	"sheetq/internal/officecrypt"
	"sheetq/jobs/export"
	"sheetq/store"
)

// encryptedFileRequest is the body of POST /api/v1/exports/{id}/file.
type encryptedFileRequest struct {
	Password *string `json:"password"`
}

// postExportFile downloads a finished xlsx export's file encrypted with the password in
// the body (internal/officecrypt): streamed from the file store through the encryption,
// never written anywhere. The password is not stored, logged or echoed; the audit entry
// says only that the file left encrypted. A report with "-- encrypt: required" hands its
// files out this way only (getExportFile refuses them).
func (a *API) postExportFile(w http.ResponseWriter, r *http.Request) error {
	job, err := a.loadJob(r)
	if err != nil {
		return err
	}
	if err := checkJSONType(r); err != nil {
		return err
	}
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	var req encryptedFileRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		// The decoder's message may quote the body, and so the password: not echoed.
		return problem.New(http.StatusBadRequest, "malformed_json", `the body must be {"password": "..."}`)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return problem.New(http.StatusBadRequest, "malformed_json", "the body has data after the JSON object")
	}
	if req.Password == nil {
		p := problem.New(http.StatusUnprocessableEntity, "missing_password", `the body needs "password": the password to encrypt the file with`)
		p.Param = "password"
		return p
	}
	if err := officecrypt.CheckPassword(*req.Password); err != nil {
		p := problem.New(http.StatusUnprocessableEntity, "invalid_password", err.Error())
		p.Param = "password"
		return p
	}
	return a.EncryptedFile(w, r, job, *req.Password)
}

// EncryptedFile answers r with job's file encrypted with password (checked by
// officecrypt.CheckPassword), for the API and the export page's form alike: a problem
// (returned, nothing written) when the job has no xlsx file to give, else the whole
// encrypted file, or a connection cut short if the file store fails mid-way.
func (a *API) EncryptedFile(w http.ResponseWriter, r *http.Request, job store.Job, password string) error {
	if err := fileReady(job); err != nil {
		return err
	}
	var args export.Args
	_ = json.Unmarshal(job.Args, &args) // the zero value is an xlsx file
	if args.Format == export.FormatCSV {
		p := problem.New(http.StatusUnprocessableEntity, "not_encryptable",
			"only an xlsx file can be encrypted, and this export is csv: GET its file, or request the export again as xlsx")
		p.Job = job.ID
		return p
	}
	f, fi, err := a.openFile(r, job)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := a.exports.Record(r.Context(), audit.FileDownloaded, job, "streamed, encrypted with a password"); err != nil {
		return err
	}
	name := export.DownloadName(args, job)
	h := w.Header()
	h.Set("Content-Type", args.ContentType())
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Content-Length", strconv.FormatInt(officecrypt.EncryptedSize(fi.Size), 10))
	// Every answer is another file (new salts and keys): nothing to cache or resume.
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := officecrypt.Encrypt(w, f, fi.Size, password); err != nil {
		// The status is sent: the short body (under its Content-Length) tells the client
		// the file is not whole, and the connection is closed.
		if r.Context().Err() == nil {
			a.cfg.Log.WarnContext(r.Context(), "encrypted download cut short", "job_id", job.ID, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}
