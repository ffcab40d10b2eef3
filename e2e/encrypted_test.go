//go:build !windows

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sheetq/internal/client"
)

// encryptedRows is past Excel's 1,048,576 rows of a sheet, so the workbook has a
// second sheet.
const encryptedRows = 1_100_000

// TestEncryptedDownloadOfAMillionRows: the built binary's encrypted download of an
// export of 1.1 million rows (two sheets) is, decrypted by msoffcrypto-tool (an
// independent implementation) with its data integrity checked, the very bytes of the
// plain download, which openpyxl reads as the same workbook: both sheets, their sizes,
// and their cells at both ends. A wrong password decrypts nothing.
func TestEncryptedDownloadOfAMillionRows(t *testing.T) {
	py := pythonWith(t, "msoffcrypto", "openpyxl")
	data := t.TempDir()
	p := startBinary(t, data, nil)
	j := p.submit(t, fmt.Sprintf(`{"report":"demo","params":{"rows":%d}}`, encryptedRows))
	done := p.waitJob(t, j.ID, "SUCCEEDED", func(j client.Job) bool { return j.Status == "SUCCEEDED" || j.Status == "FAILED" })
	if done.Status != "SUCCEEDED" {
		t.Fatalf("export: %+v", done)
	}
	dir := t.TempDir()
	plain, encrypted := filepath.Join(dir, "plain.xlsx"), filepath.Join(dir, "encrypted.xlsx")
	save(t, plain, http.MethodGet, p.url+"/api/v1/exports/"+j.ID+"/file", "")
	start := time.Now()
	n := save(t, encrypted, http.MethodPost, p.url+"/api/v1/exports/"+j.ID+"/file", `{"password":"Ünïcode pass phrase"}`)
	t.Logf("encrypted download of %d bytes in %v", n, time.Since(start))
	out, err := exec.Command(py, "-c", decryptScript, encrypted, plain, "Ünïcode pass phrase", strconv.Itoa(encryptedRows)).CombinedOutput()
	if err != nil {
		t.Fatalf("msoffcrypto/openpyxl: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
	out, err = exec.Command(py, "-c", decryptScript, encrypted, plain, "wrong", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "InvalidKeyError") {
		t.Fatalf("a wrong password: %v\n%s", err, out)
	}
}

// save writes the answer to method url (with a JSON body, if any) to path.
func save(t *testing.T, path, method, url, body string) int64 {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s %s: %s %s", method, url, res.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := io.Copy(f, res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// decryptScript decrypts argv[1] with argv[3] (checking its HMAC), requires the bytes of
// argv[2], and reads both with openpyxl: the same sheets, of the same size, adding up to
// argv[4] rows and a header per sheet, with the same cells in the first and last rows.
const decryptScript = `
import io, sys, msoffcrypto, openpyxl
enc, plain, password, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(enc, "rb") as f:
    of = msoffcrypto.OfficeFile(f)
    of.load_key(password=password, verify_password=True)
    out = io.BytesIO()
    of.decrypt(out, verify_integrity=True)
with open(plain, "rb") as f:
    assert out.getvalue() == f.read(), "decrypted, the file is not the plain download"
a = openpyxl.load_workbook(out, read_only=True)
b = openpyxl.load_workbook(plain, read_only=True)
assert a.sheetnames == b.sheetnames and len(a.sheetnames) == 2, (a.sheetnames, b.sheetnames)
total = 0
for name in a.sheetnames:
    sa, sb = a[name], b[name]
    assert sa.max_row == sb.max_row and sa.max_column == sb.max_column, name
    total += sa.max_row - 1
    head = list(sa.iter_rows(min_row=1, max_row=50, values_only=True))
    assert head == list(sb.iter_rows(min_row=1, max_row=50, values_only=True)), name
    if name == a.sheetnames[-1]:
        tail = list(sa.iter_rows(min_row=sa.max_row - 50, values_only=True))
        assert tail == list(sb.iter_rows(min_row=sb.max_row - 50, values_only=True)), name
        assert len(tail) == 51 and tail[-1][0] is not None, tail[-1]
assert total == rows, (total, rows)
print("decrypted %d bytes: %d sheets, %d rows, cells equal" % (len(out.getvalue()), len(a.sheetnames), total))
`

// pythonWith returns a Python interpreter that imports every module: $SHEETQ_PYTHON,
// python3 on the PATH, or /usr/bin/python3 (where apt puts Debian's packages). Without
// one the test skips, except in CI, where .ci/run installs them.
func pythonWith(t *testing.T, modules ...string) string {
	t.Helper()
	imp := "import " + strings.Join(modules, ", ")
	for _, c := range []string{os.Getenv("SHEETQ_PYTHON"), "python3", "/usr/bin/python3"} {
		if c == "" {
			continue
		}
		if path, err := exec.LookPath(c); err == nil && exec.Command(path, "-c", imp).Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no python3 that can %q: .ci/run installs them", imp)
	}
	t.Skipf("no python3 that can %q", imp)
	return ""
}
