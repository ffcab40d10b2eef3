package officecrypt

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/richardlehane/mscfb"
	"github.com/xuri/excelize/v2"
)

// workbook is a small real xlsx with rows rows.
func workbook(t *testing.T, rows int) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= rows; i++ {
		cell, _ := excelize.CoordinatesToCellName(1, i)
		if err := sw.SetRow(cell, []any{i, fmt.Sprintf("row %d", i), float64(i) / 3}); err != nil {
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

func encryptBytes(t *testing.T, plain []byte, password string, sectorSize int64) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := encrypt(&out, bytes.NewReader(plain), int64(len(plain)), password, sectorSize); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// excelize's reader (its own agile decryption, over mscfb) gives back the same bytes,
// for a package in a sector chain of its own and for one small enough for the mini
// stream, in 512- and 4,096-byte sector files; the size Encrypt wrote is the one
// EncryptedSize promised.
func TestExcelizeDecrypts(t *testing.T) {
	t.Parallel()
	small := make([]byte, 1000)
	rand.Read(small)
	big := make([]byte, 1<<20+12345)
	rand.Read(big)
	for _, c := range []struct {
		name   string
		plain  []byte
		sector int64
	}{
		{"10 rows", workbook(t, 10), 0},
		{"2000 rows in 4096-byte sectors", workbook(t, 2000), 4096},
		{"a package in the mini stream", small, 0},
		{"one byte", []byte{7}, 0},
		{"a whole segment", bytes.Repeat([]byte{1}, segmentSize), 0},
		{"many chunks, not whole blocks", big, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc := encryptBytes(t, c.plain, "s3cret pässwörd", c.sector)
			if c.sector == 0 && int64(len(enc)) != EncryptedSize(int64(len(c.plain))) {
				t.Fatalf("wrote %d bytes, EncryptedSize says %d", len(enc), EncryptedSize(int64(len(c.plain))))
			}
			got, err := excelize.Decrypt(enc, &excelize.Options{Password: "s3cret pässwörd"})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.plain) {
				t.Fatalf("decrypted %d bytes, not the %d encrypted", len(got), len(c.plain))
			}
			// excelize does not check the password's verifier: a wrong one gives other bytes.
			if got, err := excelize.Decrypt(enc, &excelize.Options{Password: "s3cret passwort"}); err == nil && bytes.Equal(got, c.plain) {
				t.Fatal("a wrong password decrypted the file")
			}
		})
	}
}

// The compound file holds what Excel's encrypted files hold, where Excel puts it.
func TestCompoundFileEntries(t *testing.T) {
	t.Parallel()
	enc := encryptBytes(t, workbook(t, 10), "pw", 0)
	doc, err := mscfb.New(bytes.NewReader(enc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for e, err := doc.Next(); err == nil; e, err = doc.Next() {
		// mscfb drops the names' leading control character (\x06DataSpaces).
		got = append(got, strings.Join(append(e.Path, e.Name), "/")+fmt.Sprintf(" %d", e.Size))
	}
	want := []string{
		"EncryptionInfo", "EncryptedPackage", "DataSpaces", "DataSpaces/Version 76",
		"DataSpaces/DataSpaceMap 112", "DataSpaces/DataSpaceInfo",
		"DataSpaces/DataSpaceInfo/StrongEncryptionDataSpace 64", "DataSpaces/TransformInfo",
		"DataSpaces/TransformInfo/StrongEncryptionTransform",
		"DataSpaces/TransformInfo/StrongEncryptionTransform/Primary 200",
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g == w || strings.HasPrefix(g, w+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no entry %q in %q", w, got)
		}
	}
}

func TestBadPasswordsAndShortReaders(t *testing.T) {
	t.Parallel()
	for _, pw := range []string{"", strings.Repeat("x", MaxPassword+1), "a\x00b"} {
		if err := Encrypt(io.Discard, bytes.NewReader([]byte("x")), 1, pw); !errors.Is(err, ErrPassword) {
			t.Errorf("password %q: %v, want ErrPassword", pw, err)
		}
	}
	if err := CheckPassword(strings.Repeat("é", MaxPassword)); err != nil {
		t.Errorf("255 characters: %v", err)
	}
	plain := workbook(t, 10)
	if err := Encrypt(io.Discard, bytes.NewReader(plain[:len(plain)-1]), int64(len(plain)), "pw"); err == nil || !strings.Contains(err.Error(), "ended early") {
		t.Errorf("a short reader: %v", err)
	}
	if err := Encrypt(io.Discard, bytes.NewReader(plain), int64(len(plain)-1), "pw"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a long reader: %v", err)
	}
}

// A writer that fails mid-way (a client gone) ends Encrypt with its error, and the
// goroutine that reads and encrypts stops: nothing is left reading r.
func TestWriterFailsMidway(t *testing.T) {
	t.Parallel()
	plain := make([]byte, 4<<20)
	r := &countingReader{r: bytes.NewReader(plain)}
	err := Encrypt(&failingWriter{after: 300 << 10}, r, int64(len(plain)), "pw")
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("Encrypt = %v, want the writer's error", err)
	}
	n := r.n.Load()
	if n == int64(len(plain)) {
		t.Errorf("the whole package was read after the writer failed")
	}
	if r.n.Load() != n {
		t.Error("the package was still being read after Encrypt returned")
	}
}

type failingWriter struct{ after, n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.after {
		return 0, errors.New("client gone")
	}
	w.n += len(p)
	return len(p), nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// A file of more FAT sectors than the header lists (a DIFAT sector), laid out without
// writing its gigabytes: the FAT chains every run and marks its own sectors.
func TestLayoutWithDIFAT(t *testing.T) {
	t.Parallel()
	f := newFile(200<<20, nil) // 200 MiB: 409,600 sectors, 3,200+ FAT sectors
	l, err := f.plan(512)
	if err != nil {
		t.Fatal(err)
	}
	if l.nDIFAT == 0 {
		t.Fatalf("no DIFAT sectors for %d FAT sectors", l.nFAT)
	}
	total := l.sectors()
	if l.nFAT*l.perSector() < total || (l.nFAT-1)*l.perSector() >= total {
		t.Fatalf("%d FAT sectors for %d sectors", l.nFAT, total)
	}
	if l.next(0, total) != fatSect || l.next(l.firstDIFAT, total) != difSect {
		t.Fatal("FAT and DIFAT sectors are not marked")
	}
	if l.next(l.firstBig, total) != uint32(l.firstBig+1) || l.next(l.firstBig+l.nBig-1, total) != endOfChain {
		t.Fatal("the package is not one chain")
	}
	if l.next(total, total) != freeSect {
		t.Fatal("a sector past the end is not free")
	}
}

// msoffcrypto-tool (an independent Python implementation) decrypts the file, and
// openpyxl reads from it the cells of the plain file; a wrong password fails.
func TestMsoffcryptoDecrypts(t *testing.T) {
	t.Parallel()
	py := Python(t)
	dir := t.TempDir()
	plain := workbook(t, 10)
	for _, c := range []struct {
		name   string
		sector int64
	}{{"v3", 0}, {"v4", 4096}} {
		enc := encryptBytes(t, plain, "correct horse", c.sector)
		encPath, plainPath := filepath.Join(dir, c.name+".xlsx"), filepath.Join(dir, "plain.xlsx")
		if err := os.WriteFile(encPath, enc, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(plainPath, plain, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(py, "-c", compareScript, encPath, plainPath, "correct horse").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		if !strings.Contains(string(out), "10 rows equal") {
			t.Fatalf("%s: %s", c.name, out)
		}
		out, err = exec.Command(py, "-c", compareScript, encPath, plainPath, "wrong horse").CombinedOutput()
		if err == nil {
			t.Fatalf("%s: a wrong password decrypted: %s", c.name, out)
		}
	}
}

// compareScript decrypts argv[1] with argv[3] and compares every cell with argv[2]'s.
const compareScript = `
import io, sys, msoffcrypto, openpyxl
enc, plain, password = sys.argv[1:4]
with open(enc, "rb") as f:
    of = msoffcrypto.OfficeFile(f)
    of.load_key(password=password, verify_password=True)
    out = io.BytesIO()
    of.decrypt(out, verify_integrity=True)
a = openpyxl.load_workbook(out, read_only=True)
b = openpyxl.load_workbook(plain, read_only=True)
assert a.sheetnames == b.sheetnames, (a.sheetnames, b.sheetnames)
n = 0
for name in a.sheetnames:
    a[name].reset_dimensions()  # excelize's stream writer leaves the dimension at A1
    b[name].reset_dimensions()
    ra = list(a[name].iter_rows(values_only=True))
    rb = list(b[name].iter_rows(values_only=True))
    assert ra == rb, name
    n += len(ra)
print(n, "rows equal")
`
