//go:build unix

package officecrypt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// LibreOffice is a third reader of the encrypted file, one that shares no code with
// excelize or msoffcrypto-tool: a headless soffice opens it with the password, through
// LibreOffice's UNO bridge from Python, and its cells are compared with the plain
// workbook's as LibreOffice reads them. CI installs libreoffice-calc-nogui and
// python3-uno; elsewhere the test skips without them.
//
// Only version 3 compound files (512-byte sectors) are tried. LibreOffice (7.4 and
// later) opens no version 4 file, encrypted or not: its compound file reader accepts a
// header only with major version 3 and a sector shift of 9 (StgHeader::Check), and it
// reads a stream's size as a signed 32-bit number. So the packages over 2 GiB, which
// this package writes in 4,096-byte sectors as MS-CFB requires, do not open in
// LibreOffice in any layout; Excel, excelize and msoffcrypto-tool read them.

// libreOffice returns soffice and a Python that can import uno (Debian's python3 with
// python3-uno), or skips the test without them (fails in CI).
func libreOffice(t *testing.T) (soffice, python string) {
	t.Helper()
	missing := func(msg string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		missing("no soffice (apt-get install libreoffice-calc-nogui): " + err.Error())
	}
	// uno is a Debian package for the system's python3, which a python3 earlier on the
	// PATH (a virtualenv, pyenv) does not see.
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(c)
		if err == nil && exec.Command(path, "-c", "import uno").Run() == nil {
			return soffice, path
		}
	}
	missing("no python3 that can import uno (apt-get install python3-uno)")
	return "", ""
}

// startSoffice starts a headless LibreOffice with a profile of its own in dir, listening
// for UNO on a named pipe (a Unix socket: no port to pick), and returns the pipe's name.
// Cleanup gives it a moment to exit after the script's terminate, then kills it.
func startSoffice(t *testing.T, soffice, dir string) string {
	t.Helper()
	pipe := fmt.Sprintf("sheetq_officecrypt_%d_%s", os.Getpid(), rand.Text()[:8])
	cmd := exec.Command(soffice, "--headless", "--invisible", "--norestore", "--nologo",
		"-env:UserInstallation=file://"+filepath.Join(dir, "profile"),
		"--accept=pipe,name="+pipe+";urp;")
	// soffice is a script that runs oosplash, which runs soffice.bin as its child: a
	// process group of their own lets cleanup kill all of them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("soffice: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return pipe
}

// LibreOffice opens the encrypted file with the password and shows the plain file's
// cells, for a small package and for one whose FAT needs a DIFAT sector; with a wrong
// password it opens nothing.
func TestLibreOfficeOpens(t *testing.T) {
	t.Parallel()
	soffice, python := libreOffice(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	small, large := workbook(t, 10), noisyWorkbook(t, 16000)
	const password = "correct horse ☃"
	largeEnc := encryptBytes(t, large, password, 0)
	if l, _ := newFile(int64(len(large)), nil).plan(0); l.nDIFAT == 0 {
		t.Fatalf("the large workbook (%d bytes) needs no DIFAT sector", len(large))
	}
	cases := []struct {
		name, enc, plain, password, want string
	}{
		{"small", write("small.xlsx", encryptBytes(t, small, password, 0)), write("small-plain.xlsx", small), password, "opened 10 rows equal"},
		{"with a DIFAT", write("large.xlsx", largeEnc), write("large-plain.xlsx", large), password, "opened 16000 rows equal"},
		{"wrong password", filepath.Join(dir, "small.xlsx"), filepath.Join(dir, "small-plain.xlsx"), "correct horse", "not opened"},
	}
	args := []string{"-c", unoScript, startSoffice(t, soffice, dir)}
	for _, c := range cases {
		args = append(args, c.enc, c.plain, c.password)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d files:\n%s%s", len(lines), len(cases), out, stderr.Bytes())
	}
	for i, c := range cases {
		t.Logf("%s: %s", c.name, lines[i])
		if !strings.HasPrefix(lines[i], c.want) {
			t.Errorf("%s: %q, want %q", c.name, lines[i], c.want)
		}
	}
}

// noisyWorkbook is an xlsx of rows rows of an id and 1,000 random hex digits, which
// deflate to about half: 16,000 rows make about 8 MB, more than the 7.1 MB a FAT of
// 109 sectors (all the header lists) covers.
func noisyWorkbook(t *testing.T, rows int) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 500)
	for i := 1; i <= rows; i++ {
		rand.Read(noise)
		cell, _ := excelize.CoordinatesToCellName(1, i)
		if err := sw.SetRow(cell, []any{i, hex.EncodeToString(noise)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// unoScript connects to soffice on the pipe argv[1], then for each triple of an
// encrypted file, its plain file and a password opens the encrypted file with the
// password and prints one line: "opened N rows equal" when every sheet's cells are the
// plain file's, "opened, cells differ", or "not opened: why".
const unoScript = `
import os, sys, time, uno
from com.sun.star.beans import PropertyValue
from com.sun.star.connection import NoConnectException
from com.sun.star.lang import IllegalArgumentException

def prop(name, value):
    p = PropertyValue()
    p.Name, p.Value = name, value
    return p

def load(desktop, path, password):
    props = (prop("Hidden", True),) + ((prop("Password", password),) if password else ())
    return desktop.loadComponentFromURL(uno.systemPathToFileUrl(path), "_blank", 0, props)

def cells(doc):
    out = []
    for i in range(doc.Sheets.getCount()):
        sheet = doc.Sheets.getByIndex(i)
        cur = sheet.createCursor()
        cur.gotoEndOfUsedArea(False)
        end = cur.getRangeAddress()
        out.append((sheet.getName(), sheet.getCellRangeByPosition(0, 0, end.EndColumn, end.EndRow).getDataArray()))
    doc.close(True)
    return out

local = uno.getComponentContext()
resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
deadline = time.monotonic() + 60
while True:
    try:
        ctx = resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % sys.argv[1])
        break
    except NoConnectException:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
try:
    args = sys.argv[2:]
    for i in range(0, len(args), 3):
        enc, plain, password = args[i:i + 3]
        try:
            doc = load(desktop, enc, password)
        except IllegalArgumentException as e:  # a wrong password: "type detection aborted"
            print("not opened:", e.Message.splitlines()[0])
            continue
        if doc is None:
            print("not opened: no document")
            continue
        got, want = cells(doc), cells(load(desktop, plain, ""))
        if got == want:
            print("opened", sum(len(rows) for _, rows in got), "rows equal")
        else:
            print("opened, cells differ")
finally:
    try:
        desktop.terminate()
    except Exception:
        pass  # the bridge goes as soffice exits
# Every answer is out. Python's own exit would now tear down the UNO bridge whose other
# end has just gone, which crashed it at times (a segmentation fault after the last line).
sys.stdout.flush()
os._exit(0)
`
