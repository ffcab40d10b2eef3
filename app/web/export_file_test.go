package web_test

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/xuri/excelize/v2"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// The password the tests type, and a part of it that must show nowhere.
const (
	testPassword = "Tr0ub4dor&3 zürich"
	secretPart   = "Tr0ub4dor"
)

// encryptedPost sends the export page's "Download with a password" form.
func (ts *testServer) encryptedPost(id, password, confirm string) apptest.Response {
	ts.t.Helper()
	return ts.PostForm("/exports/"+id+"/file", url.Values{"password": {password}, "confirm": {confirm}}, nil)
}

// checkDecrypts requires res to be a whole file encrypted with password: excelize
// decrypts it to the very bytes of plain.
func (ts *testServer) checkDecrypts(res apptest.Response, plain []byte, password string) {
	ts.t.Helper()
	if res.StatusCode != http.StatusOK {
		ts.t.Fatalf("POST the form: %d\n%.2000s", res.StatusCode, res.Body)
	}
	if disp, params, _ := mime.ParseMediaType(res.Header.Get("Content-Disposition")); disp != "attachment" || !strings.HasSuffix(params["filename"], ".xlsx") {
		ts.t.Errorf("Content-Disposition %q: want an attachment named *.xlsx", res.Header.Get("Content-Disposition"))
	}
	got, err := excelize.Decrypt(res.Body, &excelize.Options{Password: password})
	if err != nil {
		ts.t.Fatalf("decrypt the answer: %v", err)
	}
	if !bytes.Equal(got, plain) {
		ts.t.Fatalf("decrypted, the answer is %d bytes that are not the plain file's %d", len(got), len(plain))
	}
}

// plainDownload is export id's file as GET /api/v1/exports/{id}/file sends it.
func (ts *testServer) plainDownload(id string) []byte {
	ts.t.Helper()
	res := ts.Get("/api/v1/exports/" + id + "/file")
	if res.StatusCode != http.StatusOK {
		ts.t.Fatalf("GET the plain file: %d", res.StatusCode)
	}
	return res.Body
}

// plainFile is export id's file as the exports folder holds it, for an export whose GET
// is refused (its report requires encryption).
func (ts *testServer) plainFile(id string) []byte {
	ts.t.Helper()
	j, err := ts.svc.Load(ts.t.Context(), id)
	if err != nil {
		ts.t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ts.dir.Exports(), j.FileName))
	if err != nil {
		ts.t.Fatal(err)
	}
	return b
}

// The export page of a succeeded xlsx export offers "Download with a password" beside
// the plain download, folded: two password fields with labels, for a new password, and a
// strength meter that the script shows. Sent, the form answers with the file encrypted
// with the password, which the logs never name.
func TestEncryptedDownloadForm(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{API: true, Log: &logs})
	j := ts.create(`{"report":"demo","params":{"rows":20}}`)
	ts.waitStatus(j.ID, store.StatusSucceeded)

	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if apptest.TID(doc, "download-button").Length() != 1 {
		t.Error("no plain Download button beside the form")
	}
	details := apptest.TID(doc, "encrypt")
	if details.Length() != 1 || !details.Is("details") {
		t.Fatalf("no <details> Download with a password")
	}
	if _, open := details.Attr("open"); open {
		t.Error("the form is open on a fresh page of a report that does not require it")
	}
	if got := strings.TrimSpace(apptest.TID(details, "encrypt-summary").Text()); got != "Download with a password" {
		t.Errorf("summary %q", got)
	}
	form := apptest.TID(details, "encrypt-form")
	if m, _ := form.Attr("method"); m != "post" {
		t.Errorf("method %q", m)
	}
	if a, _ := form.Attr("action"); a != "/exports/"+j.ID+"/file" {
		t.Errorf("action %q", a)
	}
	for _, name := range []string{"password", "confirm"} {
		in := form.Find(`input[name="` + name + `"]`)
		if in.AttrOr("type", "") != "password" || in.AttrOr("autocomplete", "") != "new-password" || in.AttrOr("value", "") != "" {
			t.Errorf("%s: type %q, autocomplete %q, value %q", name, in.AttrOr("type", ""), in.AttrOr("autocomplete", ""), in.AttrOr("value", ""))
		}
		if id := in.AttrOr("id", ""); id == "" || doc.Find(`label[for="`+id+`"]`).Length() != 1 {
			t.Errorf("%s has no label", name)
		}
	}
	if _, hidden := apptest.TID(form, "encrypt-strength").Attr("hidden"); !hidden || apptest.TID(form, "encrypt-meter").Length() != 1 {
		t.Error("the strength meter is missing, or shown without the script that fills it in")
	}

	ts.checkDecrypts(ts.encryptedPost(j.ID, testPassword, testPassword), ts.plainDownload(j.ID), testPassword)
	if strings.Contains(logs.String(), secretPart) {
		t.Error("the password is in the logs")
	}
}

// A password that cannot be used gives the export page again, 422, with the form open
// and the reason beside it, the field to fix marked, and the password written nowhere;
// an export with no xlsx file says why there is no file, with the problem's status.
func TestEncryptedDownloadFormRefusals(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{API: true, Log: &logs})
	x := ts.create(`{"report":"demo","params":{"rows":20}}`)
	c := ts.create(`{"report":"demo","params":{"rows":3},"format":"csv"}`)
	ts.waitStatus(x.ID, store.StatusSucceeded)
	ts.waitStatus(c.ID, store.StatusSucceeded)

	for _, tc := range []struct {
		name, password, confirm string
		field, says             string
	}{
		{"mismatch", testPassword, testPassword + "!", "confirm", "The two passwords are not the same."},
		{"empty", "", "", "password", "Type a password"},
		{"empty confirmation", testPassword, "", "confirm", "The two passwords are not the same."},
		{"too long", strings.Repeat(secretPart, 30), strings.Repeat(secretPart, 30), "password", "Excel takes at most 255"},
		{"NUL", secretPart + "\x00", secretPart + "\x00", "password", "NUL"},
	} {
		res := ts.encryptedPost(x.ID, tc.password, tc.confirm)
		doc := apptest.Page(t, res, http.StatusUnprocessableEntity)
		if strings.Contains(string(res.Body), secretPart) {
			t.Errorf("%s: the page holds the password", tc.name)
		}
		details := apptest.TID(doc, "encrypt")
		if _, open := details.Attr("open"); !open {
			t.Errorf("%s: the form is not open", tc.name)
		}
		if got := apptest.TID(details, "encrypt-error").Text(); !strings.Contains(got, tc.says) {
			t.Errorf("%s: error %q, want it to say %q", tc.name, got, tc.says)
		}
		in := details.Find(`input[name="` + tc.field + `"]`)
		if in.AttrOr("aria-invalid", "") != "true" || !strings.Contains(in.AttrOr("aria-describedby", ""), "encrypt-error") {
			t.Errorf("%s: %s is not marked: aria-invalid %q, aria-describedby %q", tc.name, tc.field,
				in.AttrOr("aria-invalid", ""), in.AttrOr("aria-describedby", ""))
		}
		details.Find(`input[type="password"]`).Each(func(_ int, s *goquery.Selection) {
			if v := s.AttrOr("value", ""); v != "" {
				t.Errorf("%s: a password field is filled in: %q", tc.name, v)
			}
		})
		if apptest.TID(doc, "job-title").Length() != 1 {
			t.Errorf("%s: not the export page", tc.name)
		}
	}

	// A csv export has no form, and its file cannot be encrypted: the page says so.
	doc := apptest.Page(t, ts.Get("/exports/"+c.ID), http.StatusOK)
	if apptest.TID(doc, "encrypt").Length() != 0 {
		t.Error("a csv export offers Download with a password")
	}
	res := ts.encryptedPost(c.ID, testPassword, testPassword)
	doc = apptest.Page(t, res, http.StatusUnprocessableEntity)
	if got := apptest.TID(doc, "encrypt-file-error").Text(); !strings.Contains(got, "only an Excel workbook can be encrypted") {
		t.Errorf("csv: the page says %q", got)
	}
	if strings.Contains(string(res.Body), secretPart) {
		t.Error("csv: the page holds the password")
	}
	cross := ts.PostForm("/exports/"+x.ID+"/file", url.Values{"password": {testPassword}, "confirm": {testPassword}},
		http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://elsewhere.example"}})
	if cross.StatusCode != http.StatusForbidden || bytes.HasPrefix(cross.Body, []byte{0xD0, 0xCF, 0x11, 0xE0}) {
		t.Errorf("a form from another site: %d, want 403 and no file", cross.StatusCode)
	}
	if res := ts.encryptedPost("nosuchexport", testPassword, testPassword); res.StatusCode != http.StatusNotFound {
		t.Errorf("no such export: %d", res.StatusCode)
	}
	// A reload of a refused form's page (its address is the form's) lands on the page.
	if res := ts.Get("/exports/" + x.ID + "/file"); res.StatusCode != http.StatusOK || res.Request.URL.Path != "/exports/"+x.ID {
		t.Errorf("GET the form's address: %d at %s, want the export's page", res.StatusCode, res.Request.URL.Path)
	}
	if strings.Contains(logs.String(), secretPart) {
		t.Error("the password is in the logs")
	}
}

// An export of a report with "-- encrypt: required": its page and its row in the list
// offer no plain download, the page says why and has the password form open, which
// gives the file.
func TestEncryptOnlyExportPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{API: true})
	apptest.WriteReport(t, ts.dir, "salaries.sql", secretReport)
	ts.WaitReport("salaries")
	j := ts.create(`{"report":"salaries"}`)
	ts.waitStatus(j.ID, store.StatusSucceeded)
	doc := apptest.Page(t, ts.Get("/exports/"+j.ID), http.StatusOK)
	if n := apptest.TID(doc, "download-button").Length() + doc.Find(`a[href*="/api/v1/exports/`+j.ID+`/file"]`).Length(); n != 0 {
		t.Error("the page offers the plain file")
	}
	if got := apptest.TID(doc, "encrypt-only").Text(); !strings.Contains(got, "This report's files are handed out only encrypted with a password") {
		t.Errorf("the page says %q", got)
	}
	if _, open := apptest.TID(doc, "encrypt").Attr("open"); !open || apptest.TID(doc, "encrypt-form").Length() != 1 {
		t.Error("the password form is not there, open")
	}

	row := apptest.Page(t, ts.Get("/"), http.StatusOK).Find(`[data-testid="export-row"][data-id="` + j.ID + `"]`)
	if apptest.TID(row, "download").Length() != 0 {
		t.Error("the list offers the plain file")
	}
	if href, _ := apptest.TID(row, "download-encrypted").Attr("href"); href != "/exports/"+j.ID+"#encrypt" {
		t.Errorf("the list's download link %q, want the export page's form", href)
	}

	ts.checkDecrypts(ts.encryptedPost(j.ID, testPassword, testPassword), ts.plainFile(j.ID), testPassword)
}
