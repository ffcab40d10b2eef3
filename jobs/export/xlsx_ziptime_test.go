package export

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// checkZipTimes checks that every entry of the xlsx in data carries at: its Modified
// time (to the 2 seconds of a DOS time), and valid DOS date and time fields in the
// central directory and in the local header. archive/zip left them zero: 1980-00-00.
func checkZipTimes(t *testing.T, data []byte, at time.Time) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) < 5 {
		t.Fatalf("%d entries: not a workbook", len(zr.File))
	}
	wantDate, wantTime := dosDateTime(at)
	for _, f := range zr.File {
		if d := f.Modified.Sub(at); d <= -2*time.Second || d >= 2*time.Second {
			t.Errorf("%s: modified %v, want %v", f.Name, f.Modified, at)
		}
		local, err := localDOSTime(data, f)
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		for where, dt := range map[string][2]uint16{
			"central directory": {f.ModifiedDate, f.ModifiedTime},
			"local header":      local,
		} {
			date, tm := dt[0], dt[1]
			month, day := date>>5&0xf, date&0x1f
			if month < 1 || month > 12 || day < 1 || day > 31 || tm>>11 > 23 || tm>>5&0x3f > 59 || tm&0x1f > 29 {
				t.Errorf("%s: invalid DOS date %#04x time %#04x in the %s", f.Name, date, tm, where)
			}
			if date != wantDate || tm != wantTime {
				t.Errorf("%s: DOS date %#04x time %#04x in the %s, want %#04x %#04x", f.Name, date, tm, where, wantDate, wantTime)
			}
		}
	}
}

// dosDateTime is t's wall clock as MS-DOS date and time fields.
func dosDateTime(t time.Time) (date, tm uint16) {
	return uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9),
		uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
}

// localDOSTime reads the DOS date and time of f's local file header.
func localDOSTime(data []byte, f *zip.File) ([2]uint16, error) {
	h, err := localHeader(data, f)
	if err != nil {
		return [2]uint16{}, err
	}
	return [2]uint16{binary.LittleEndian.Uint16(h[12:]), binary.LittleEndian.Uint16(h[10:])}, nil
}

// localHeader returns f's local file header (up to its data), found by walking back
// from the data to a header that names f and whose extra field ends there.
func localHeader(data []byte, f *zip.File) ([]byte, error) {
	end, err := f.DataOffset()
	if err != nil {
		return nil, err
	}
	for extra := 0; extra <= 0xffff; extra++ {
		start := end - 30 - int64(len(f.Name)) - int64(extra)
		if start < 0 {
			break
		}
		h := data[start:end]
		if binary.LittleEndian.Uint32(h) == 0x04034b50 &&
			int(binary.LittleEndian.Uint16(h[26:])) == len(f.Name) &&
			int(binary.LittleEndian.Uint16(h[28:])) == extra &&
			string(h[30:30+len(f.Name)]) == f.Name {
			return h, nil
		}
	}
	return nil, errors.New("no local header before its data")
}

// TestZipEntriesCarryExportTime: every entry of the file, sheets and the rest, carries
// the export's time, at an odd second (DOS times have two-second steps) in a zone that
// is not UTC (DOS times are wall clock).
func TestZipEntriesCarryExportTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 2, 29, 23, 59, 59, 0, time.FixedZone("UTC+5", 5*3600))
	q := demoQuery(300)
	q.Time = at
	var buf bytes.Buffer
	if err := writeXLSX(t.Context(), &buf, demoSource{}, q, xlsxOptions{tmpDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	checkZipTimes(t, buf.Bytes(), at)
}
