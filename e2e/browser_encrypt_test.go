//go:build !windows

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"
)

// The export page's "Download with a password" (issue 41), in the browser.

// strengthIs is a JavaScript expression: the password form's strength word is word.
func strengthIs(word string) string {
	return `(() => { const e = document.querySelector(` + js(tid("encrypt-strength-word")) + `); return !!e && e.textContent.trim() === ` + js(word) + `; })()`
}

// mismatchShown is a JavaScript expression: the form says the confirmation differs.
const mismatchShown = `(() => { const e = document.querySelector('[data-testid="encrypt-mismatch"]'); return !!e && e.textContent.trim() !== "" && e.getClientRects().length > 0; })()`

// typeInto types text into the field sel, key by key, as a person would.
func (b *tab) typeInto(sel, text string) {
	b.t.Helper()
	b.do("type into "+sel, stepTimeout, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SendKeys(chromedp.CSS(sel), text))
}

// plainFile is export id's file as GET /api/v1/exports/{id}/file sends it.
func (p *proc) plainFile(t *testing.T, id string) []byte {
	t.Helper()
	res, err := http.Get(p.url + "/api/v1/exports/" + id + "/file")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET the plain file: %d %v", res.StatusCode, err)
	}
	return body
}

// The form rates the password as it is typed, says when the confirmation differs and
// then keeps the form from being sent, and once both agree, sends it: the browser saves
// the answer, which decrypts with the password to the plain file, and the page stays,
// with the fields emptied.
func TestBrowserEncryptedDownload(t *testing.T) {
	p := startBinary(t, t.TempDir(), nil)
	j := p.submit(t, `{"report":"demo","params":{"rows":20}}`)
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))
	plain := p.plainFile(t, j.ID)

	b := newTab(t, p.url)
	b.open("/exports/" + j.ID)
	b.waitVisible(tid("download-button"), stepTimeout)
	if b.count(tid("encrypt")+"[open]") != 0 {
		t.Error("the password form is open on a fresh page")
	}
	b.setMarker()
	b.click(tid("encrypt-summary"))
	b.waitVisible(tid("encrypt-meter"), stepTimeout)

	const password = "password zebra lantern 42!"
	b.typeInto(tid("encrypt-password"), "password")
	b.waitFor("the strength word to say too weak", stepTimeout, strengthIs("too weak"), nil)
	if v := mustEval[float64](b, `document.querySelector(`+js(tid("encrypt-meter"))+`).value`); v != 1 {
		t.Errorf("meter at %v for a common password, want 1", v)
	}
	b.typeInto(tid("encrypt-password"), strings.TrimPrefix(password, "password"))
	b.waitFor("the strength word to say strong", stepTimeout, strengthIs("strong"), nil)

	b.typeInto(tid("encrypt-confirm"), "password zebra lantern 43")
	b.waitFor("the mismatch", stepTimeout, mismatchShown, nil)
	if got := b.attr(tid("encrypt-confirm"), "aria-invalid"); got != "true" {
		t.Errorf("the confirmation's aria-invalid is %q", got)
	}
	// Sent anyway, the form stays: no page comes, and the confirmation has the focus.
	b.click(tid("encrypt-submit"))
	b.waitFor("the focus on the confirmation", stepTimeout, `document.activeElement === document.querySelector(`+js(tid("encrypt-confirm"))+`)`, nil)
	b.checkMarker("after sending a mismatch")

	b.setField(tid("encrypt-confirm"), "")
	b.typeInto(tid("encrypt-confirm"), password)
	b.waitFor("the mismatch to go", stepTimeout, "!"+mismatchShown, nil)

	file, name := b.download(tid("encrypt-submit"))
	if shown := b.text(tid("file-name")); name != shown {
		t.Errorf("the browser saved the download as %q, the page names the file %q", name, shown)
	}
	if !bytes.HasPrefix(file, []byte{0xD0, 0xCF, 0x11, 0xE0}) {
		t.Fatalf("the download is not an encrypted workbook (a compound file): %q…", file[:min(len(file), 16)])
	}
	got, err := excelize.Decrypt(file, &excelize.Options{Password: password})
	if err != nil {
		t.Fatalf("decrypt the download: %v", err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatalf("decrypted, the download is %d bytes that are not the plain file's %d", len(got), len(plain))
	}
	b.checkMarker("after the download")
	b.waitFor("the fields emptied", stepTimeout, `[...document.querySelectorAll('[data-encrypt-form] input[type="password"]')].every(e => e.value === "")`, nil)
	if strings.Contains(p.log(), "zebra lantern") {
		t.Error("the password is in the server log")
	}
}

// axe-core on the password form: open, with a mismatch, with the server's error (sent
// without the script's check), and on the page of an export whose report requires a
// password, at both widths.
func TestBrowserEncryptedDownloadAxe(t *testing.T) {
	src := axeSource(t)
	data := t.TempDir()
	p := startBinary(t, data, nil)
	report := "-- title: Salaries\n-- source: demo\n-- encrypt: required\n-- param: rows int \"Rows\" = 5\nSELECT :rows;\n"
	if err := os.WriteFile(filepath.Join(data, "reports", "salaries.sql"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	j := p.submit(t, `{"report":"demo","params":{"rows":20}}`)
	p.waitJob(t, j.ID, "SUCCEEDED", status("SUCCEEDED"))

	b := newTab(t, p.url)
	b.open("/exports/" + j.ID)
	b.click(tid("encrypt-summary"))
	b.waitVisible(tid("encrypt-meter"), stepTimeout)
	b.axeCheck(src, "export page, password form open")
	b.typeInto(tid("encrypt-password"), "lantern")
	b.typeInto(tid("encrypt-confirm"), "zebra")
	b.waitFor("the mismatch", stepTimeout, mismatchShown, nil)
	b.axeCheck(src, "export page, passwords that differ")
	mustEval[bool](b, `(() => { const f = document.querySelector(`+js(tid("encrypt-form"))+`); f.removeAttribute("data-encrypt-form"); return true; })()`)
	b.click(tid("encrypt-submit"))
	b.waitVisible(tid("encrypt-error"), stepTimeout)
	b.axeCheck(src, "export page, the server's error")

	p.waitReport(t, "salaries")
	sj := p.submit(t, `{"report":"salaries"}`)
	p.waitJob(t, sj.ID, "SUCCEEDED", status("SUCCEEDED"))
	b.open("/exports/" + sj.ID)
	b.waitVisible(tid("encrypt-only"), stepTimeout)
	if b.count(tid("download-button")) != 0 || b.count(tid("encrypt")+"[open]") != 1 {
		b.fatalf("an export of a report that requires a password: a plain download, or the form folded")
	}
	b.waitVisible(tid("encrypt-meter"), stepTimeout)
	b.axeCheck(src, "export page of a report that requires a password")
}

// waitReport polls GET /api/v1/reports until the catalog serves report id (a file just
// written to the reports folder).
func (p *proc) waitReport(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := http.Get(p.url + "/api/v1/reports")
		if err != nil {
			t.Fatal(err)
		}
		type report struct {
			ID string `json:"id"`
		}
		var page struct{ Reports []report }
		err = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		if err == nil && slices.ContainsFunc(page.Reports, func(r report) bool { return r.ID == id }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catalog did not serve report %s within %s (last error: %v)\n%s", id, stepTimeout, err, p.log())
		}
		<-tick.C
	}
}
