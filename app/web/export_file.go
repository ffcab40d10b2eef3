package web

import (
	"net/http"
	"strings"

	"sheetq/app/problem"
	"sheetq/internal/officecrypt"
	"sheetq/ui"
)

// encryptedFileForm is POST /exports/{id}/file from the export page's "Download with a
// password" (issue 41). The two fields must be one password that can protect a file
// (officecrypt.CheckPassword); then the answer is the file encrypted with it
// (Config.EncryptedFile, the API's), which the browser saves as any download, and the
// page stays as it is. Otherwise the export page again, 422 (or the status of the
// problem the file had), with what to fix beside the form. The password is neither
// logged nor written into a page.
func (p *Pages) encryptedFileForm(w http.ResponseWriter, r *http.Request) error {
	if err := readForm(w, r); err != nil {
		return err
	}
	m := p.meta(r.Context(), "", r.PathValue("id")) // before reading: the stream replays what follows it
	j, err := p.loadPageJob(r)
	if err != nil {
		return err
	}
	again := func(status int, field, message string) error {
		return p.renderExport(w, r, m, j, status, ui.EncryptForm{Field: field, Error: message})
	}
	password, confirm := r.PostForm.Get("password"), r.PostForm.Get("confirm")
	switch {
	case password == "":
		return again(http.StatusUnprocessableEntity, "password", "Type a password to encrypt the file with, twice.")
	case confirm != password:
		return again(http.StatusUnprocessableEntity, "confirm", "The two passwords are not the same. Type the password twice, the same both times.")
	}
	if err := officecrypt.CheckPassword(password); err != nil {
		// The error says what is wrong (too long, a NUL), never the password itself.
		why := strings.TrimPrefix(err.Error(), officecrypt.ErrPassword.Error()+": ")
		return again(http.StatusUnprocessableEntity, "password", "This password cannot protect a file: "+why+".")
	}
	err = p.cfg.EncryptedFile(w, r, j, password)
	if prob, ok := problem.As(err); ok {
		// Nothing was written: the job has no xlsx file to give (it expired, say).
		for k, vs := range prob.Header {
			w.Header()[k] = vs
		}
		return again(prob.Status, "", "No file was made: "+noFileWords(prob))
	}
	return err
}

// noFileWords says for people why EncryptedFile gave no file: its problem's detail
// speaks to API clients ("GET its file").
func noFileWords(prob *problem.Problem) string {
	switch prob.Code {
	case "not_encryptable":
		return "only an Excel workbook can be encrypted, and this export is CSV. Download it as it is, or run it again as an Excel workbook."
	case "not_finished":
		return "the export has not finished. Wait until it is ready, then try again."
	case "no_file":
		return "the export ended without a file."
	case "expired", "file_missing":
		return "the file is no longer on the server. Run the export again."
	}
	return sentence(prob.Detail)
}
