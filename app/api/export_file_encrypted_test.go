package api_test

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"sheetq/internal/apptest"
	"sheetq/store"
)

// secretReport requires its files encrypted.
const secretReport = `-- title: Salaries
-- source: demo
-- encrypt: required
-- param: rows int "Rows" = 5
SELECT :rows;
`

// An encrypted download is the plain file, encrypted: excelize decrypts it with the
// password to the very bytes a GET sends; its size is the Content-Length announced;
// each answer is a new file; the password shows nowhere in the logs.
func TestEncryptedDownload(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	ts := newTestServer(t, testOpts{Log: &logs})
	j := ts.Create(`{"report":"demo","params":{"rows":20}}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	plain := ts.Get("/api/v1/exports/" + j.ID + "/file")
	if plain.StatusCode != http.StatusOK {
		t.Fatalf("GET file: %d", plain.StatusCode)
	}
	const password = "Tr0ub4dor&3 zürich"
	enc := ts.postFile(j.ID, `{"password":"Tr0ub4dor&3 zürich"}`)
	if enc.StatusCode != http.StatusOK {
		t.Fatalf("POST file: %d %s", enc.StatusCode, enc.Body)
	}
	if n, _ := strconv.Atoi(enc.Header.Get("Content-Length")); n != len(enc.Body) {
		t.Fatalf("Content-Length %s, body %d bytes", enc.Header.Get("Content-Length"), len(enc.Body))
	}
	if enc.Header.Get("Cache-Control") != "no-store" || enc.Header.Get("ETag") != "" {
		t.Errorf("Cache-Control %q, ETag %q: an encrypted answer is not to be cached", enc.Header.Get("Cache-Control"), enc.Header.Get("ETag"))
	}
	_, cd, _ := mime.ParseMediaType(enc.Header.Get("Content-Disposition"))
	_, pcd, _ := mime.ParseMediaType(plain.Header.Get("Content-Disposition"))
	if cd["filename"] == "" || cd["filename"] != pcd["filename"] {
		t.Errorf("encrypted file named %q, the plain one %q", cd["filename"], pcd["filename"])
	}
	if !bytes.HasPrefix(enc.Body, []byte{0xD0, 0xCF, 0x11, 0xE0}) {
		t.Fatal("the answer is not a compound file")
	}
	got, err := excelize.Decrypt(enc.Body, &excelize.Options{Password: password})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain.Body) {
		t.Fatal("decrypted, the file is not the plain download")
	}
	again := ts.postFile(j.ID, `{"password":"Tr0ub4dor&3 zürich"}`)
	if bytes.Equal(again.Body, enc.Body) {
		t.Error("two encrypted downloads are the same bytes: salts and keys are not new")
	}
	if strings.Contains(logs.String(), "Tr0ub4dor") {
		t.Error("the password is in the logs")
	}
}

// A bad request for an encrypted file is a 4xx problem that never quotes the password.
func TestEncryptedDownloadRefusals(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	x := ts.Create(`{"report":"demo","params":{"rows":3}}`)
	c := ts.Create(`{"report":"demo","params":{"rows":3},"format":"csv"}`)
	ts.WaitStatus(x.ID, store.StatusSucceeded)
	ts.WaitStatus(c.ID, store.StatusSucceeded)
	for _, tc := range []struct {
		id, body string
		status   int
		code     string
	}{
		{x.ID, `{"password":"hunter2"`, 400, "malformed_json"},
		{x.ID, `{"password":"hunter2","extra":1}`, 400, "malformed_json"},
		{x.ID, `{"password":"hunter2"} {}`, 400, "malformed_json"},
		{x.ID, `{}`, 422, "missing_password"},
		{x.ID, `{"password":""}`, 422, "invalid_password"},
		{x.ID, `{"password":"a\u0000b"}`, 422, "invalid_password"},
		{x.ID, `{"password":"` + strings.Repeat("p", 256) + `"}`, 422, "invalid_password"},
		{c.ID, `{"password":"hunter2"}`, 422, "not_encryptable"},
		{"nosuchjob", `{"password":"hunter2"}`, 404, "not_found"},
	} {
		res := ts.postFile(tc.id, tc.body)
		apptest.CheckProblem(t, res, tc.status, tc.code)
		if strings.Contains(string(res.Body), "hunter2") {
			t.Errorf("%s: the answer quotes the password: %s", tc.body, res.Body)
		}
	}
	res := ts.Request(http.MethodPost, "/api/v1/exports/"+x.ID+"/file", strings.NewReader("password=hunter2"),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if res.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form body: %d, want 415", res.StatusCode)
	}
}

// A report with "-- encrypt: required" hands out its files only encrypted: a GET (and a
// HEAD) is 403 encryption_required, a POST with a password serves it, and csv is refused
// when the export is requested.
func TestEncryptionRequired(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "salaries.sql", secretReport)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := ts.Get("/api/v1/reports")
		if strings.Contains(string(res.Body), `"salaries"`) {
			var page struct {
				Reports []struct {
					ID      string `json:"id"`
					Encrypt bool   `json:"encrypt"`
				} `json:"reports"`
			}
			if err := json.Unmarshal(res.Body, &page); err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Reports {
				if r.ID == "salaries" && !r.Encrypt {
					t.Error(`GET /api/v1/reports does not say "encrypt": true for the report`)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the catalog never served the report")
		}
		time.Sleep(20 * time.Millisecond)
	}
	apptest.CheckProblem(t, ts.Post(`{"report":"salaries","format":"csv"}`, ""), 422, "encryption_required")
	j := ts.Create(`{"report":"salaries"}`)
	ts.WaitStatus(j.ID, store.StatusSucceeded)
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		res := ts.Request(m, "/api/v1/exports/"+j.ID+"/file", nil, nil)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s file: %d, want 403", m, res.StatusCode)
		}
		if m == http.MethodGet {
			apptest.CheckProblem(t, res, http.StatusForbidden, "encryption_required")
		}
	}
	enc := ts.postFile(j.ID, `{"password":"pw"}`)
	if enc.StatusCode != http.StatusOK {
		t.Fatalf("POST file: %d %s", enc.StatusCode, enc.Body)
	}
	got, err := excelize.Decrypt(enc.Body, &excelize.Options{Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows(f.GetSheetList()[0])
	if err != nil || len(rows) != 6 {
		t.Fatalf("decrypted workbook: %d rows (%v), want a header and 5", len(rows), err)
	}
}

// A schedule of a report that requires encryption needs a password on every target that
// carries the file, and cannot be csv; a password on a csv schedule's target is refused.
func TestScheduleEncryption(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testOpts{})
	apptest.WriteReport(t, ts.dir, "salaries.sql", secretReport)
	apptest.WaitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(string(ts.Get("/api/v1/reports").Body), `"salaries"`), "the catalog never served the report"
	})
	const mail = `{"type":"email","to":["ann@example.com"]}`
	const withPW = `{"type":"email","to":["ann@example.com"],"password":"env:SHEETQ_PASSWORD_PAYROLL"}`
	for _, tc := range []struct{ body, want string }{
		{`{"report":"salaries","cron":"@daily","timezone":"UTC","deliver":[` + mail + `]}`, "give this target a"},
		{`{"report":"salaries","cron":"@daily","timezone":"UTC","format":"csv","deliver":[` + withPW + `]}`, "a csv file cannot be"},
		{`{"report":"demo","cron":"@daily","timezone":"UTC","format":"csv","deliver":[` + withPW + `]}`, "a csv file cannot be encrypted"},
		{`{"report":"demo","cron":"@daily","timezone":"UTC","deliver":[{"type":"email","to":["ann@example.com"],"password":"hunter2"}]}`, "never the password itself"},
	} {
		res := ts.Request(http.MethodPost, "/api/v1/schedules", strings.NewReader(tc.body), http.Header{"Content-Type": {"application/json"}})
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(res.Body), tc.want) {
			t.Errorf("%s: %d %s, want 422 saying %q", tc.body, res.StatusCode, res.Body, tc.want)
		}
		if strings.Contains(string(res.Body), "hunter2") {
			t.Errorf("the answer quotes the password: %s", res.Body)
		}
	}
	sc := ts.Schedule("POST", "/api/v1/schedules", `{"report":"salaries","cron":"@daily","timezone":"UTC","deliver":[`+withPW+`]}`, http.StatusCreated)
	// Shown as written, so that a client that writes the targets back keeps them
	// encrypted (it was once left out, and a round trip dropped the encryption).
	got := ts.Get("/api/v1/schedules/" + sc.ID)
	if !strings.Contains(string(got.Body), `"password": "env:SHEETQ_PASSWORD_PAYROLL"`) {
		t.Errorf("GET the schedule does not show the target's password reference: %s", got.Body)
	}
}

func (ts *testServer) postFile(id, body string) apptest.Response {
	return ts.Request(http.MethodPost, "/api/v1/exports/"+id+"/file", strings.NewReader(body),
		http.Header{"Content-Type": {"application/json"}})
}
