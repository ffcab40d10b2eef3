package export

import (
	"archive/zip"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
)

// xlsxOptions is what writeXLSX needs besides the rows. Zero fields take the defaults.
type xlsxOptions struct {
	// tmpDir is where sheets spill and finished sheets wait, compressed, for the
	// package; empty means the system's temporary directory.
	tmpDir string
	// progress gets the running row count and the total (-1 while unknown); nil: none.
	progress func(rows, total int64)
	// warn gets one message per thing the user should know about the file, such as
	// text cut at the cell limit, once the file is written; nil: none.
	warn func(string)
	// yield is called between units of work so that accepting requests goes first
	// (jobs.Run.Yield); nil: runtime.Gosched.
	yield func()
	// spawn starts the goroutines that compress a sheet (jobs.Run.Go, which keeps
	// them at the job's priority); nil: the go statement.
	spawn func(func())
	// maxSheetRows is how many rows, header included, a sheet takes before the writer
	// starts the next one (default Excel's limit, excelize.TotalRows; at least 2).
	// Tests lower it to see the split.
	maxSheetRows int
	// zip64Threshold is the size from which a sheet part is written as a ZIP64 entry
	// (default math.MaxUint32). Tests lower it.
	zip64Threshold int64
	// version is sheetq's version, which the file names as its application
	// (docProps/app.xml); empty: the application alone.
	version string

	// Checkpoints (xlsx_resume.go), for a source that can resume the report: resumeDir
	// is the job's folder for the rows files that outlive an attempt (empty: no
	// checkpoints), attempt names this attempt's files there, resume is the checkpoint
	// to continue from (jobs.Run.Resume), wantCheckpoint says when the engine wants one
	// (jobs.Run.WantsCheckpoint), checkpoint takes it (jobs.Run.Checkpoint) and resumed
	// is told the rows a resumed attempt kept (jobs.Run.Resumed).
	resumeDir      string
	attempt        int
	resume         []byte
	remote         RemoteFiles // a bucket other nodes read the rows files from; nil: none
	remotePrefix   string      // the job's keys in remote: "<job id>/"
	keeping        func()      // told when the export first keeps files for a next attempt
	wantCheckpoint func() bool
	checkpoint     func([]byte)
	resumed        func(rows int64)
}

func (o xlsxOptions) withDefaults() xlsxOptions {
	o.tmpDir = cmp.Or(o.tmpDir, os.TempDir())
	if o.progress == nil {
		o.progress = func(int64, int64) {}
	}
	if o.yield == nil {
		o.yield = runtime.Gosched
	}
	o.maxSheetRows = max(cmp.Or(o.maxSheetRows, excelize.TotalRows), 2)
	o.zip64Threshold = cmp.Or(o.zip64Threshold, math.MaxUint32)
	if o.wantCheckpoint == nil || o.checkpoint == nil {
		o.wantCheckpoint = func() bool { return false }
	}
	if o.checkpoint == nil {
		o.checkpoint = func([]byte) {}
	}
	return o
}

// widthSample is how many rows are held back to size the columns: a stream writer
// accepts column widths only before its first row.
const widthSample = 100

// Column widths, in Excel's units (about one digit of the default font each).
const (
	minColWidth = 6
	maxColWidth = 60
)

// maxCellChars is Excel's limit on the text in one cell, counted in UTF-16 code units
// (one per character, two for an emoji or another character beyond the BMP).
const maxCellChars = excelize.TotalCellChars

// scratchPrefixes name the files the xlsx writer and excelize create in the spill
// directory while an export runs; sheetq-probe- files came from versions that probed
// the directory with a file of their own.
var scratchPrefixes = []string{"sheetq-sheet-", "sheetq-probe-", "excelize-"}

// RemoveScratch deletes spill files that a killed process left in the kind's TmpDir and
// returns how many it removed. Call it only before any export runs, from the process
// that owns the data directory: it cannot tell a dead run's files from a live one's.
// With no TmpDir (the system's temporary directory, shared with others) it does nothing.
func (k *Kind) RemoveScratch() (int, error) {
	if k.cfg.TmpDir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(k.cfg.TmpDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remove spill files: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !slices.ContainsFunc(scratchPrefixes, func(p string) bool { return strings.HasPrefix(e.Name(), p) }) {
			continue
		}
		if err := os.Remove(filepath.Join(k.cfg.TmpDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("remove spill files: %w", errors.Join(errs...))
	}
	return n, nil
}

// Why the workbook is assembled the way it is:
//
// excelize's File.WriteTo builds the whole zip in a bytes.Buffer before writing it
// (excelize issue #2357), and its StreamWriter cost 40% of an export's CPU and an
// allocation or more per cell (BENCHMARKS.md, "The sheet writer without excelize's
// stream writer"). So the writer makes each sheet's data rows itself (xlsx_cells.go),
// compressed into a temporary file (a sheetPart) as they come, and excelize only the
// small parts: the sheet's frame (frameOf) and, at the end, a "package file" with the
// same styles, one empty sheet per part and their autofilters (a packageTemplate,
// xlsx_package.go), whose parts are zipped into w with each sheetPart's compressed
// bytes where excelize wrote the empty sheet. Memory stays flat however
// many rows and sheets there are, and excelize's own buffer stays empty (so its
// writeZip64LFH, which patches that buffer, has nothing to do; writeEntry does its job
// for the sheet parts, the only ones that can be that large).

// stampRaw stamps fh with t as zip.Writer.CreateHeader does for Modified, which
// CreateRaw does not: the DOS date and time fields (t's wall clock, two-second steps)
// and an extended timestamp field (the instant, which readers prefer).
func stampRaw(fh *zip.FileHeader, t time.Time) {
	if t.Year() < 1980 { // the first DOS date; only a clock that is far off gets here
		t = time.Date(1980, 1, 1, 0, 0, 0, 0, t.Location())
	}
	fh.Modified = t
	// The deprecated fields are the only way to set the DOS date and time of an entry
	// written with CreateRaw, which does not derive them from Modified.
	//lint:ignore SA1019 see above
	fh.ModifiedDate = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	//lint:ignore SA1019 see above
	fh.ModifiedTime = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	var ext [9]byte
	binary.LittleEndian.PutUint16(ext[0:], 0x5455) // extended timestamp
	binary.LittleEndian.PutUint16(ext[2:], 5)      // its size: the flags and one time
	ext[4] = 1                                     // the modification time follows
	binary.LittleEndian.PutUint32(ext[5:], uint32(t.Unix()))
	fh.Extra = append(fh.Extra, ext[:]...)
}

// ctxWriter fails its writes once stop returns an error, so that a cancel also stops
// the compressing of a large sheet.
type ctxWriter struct {
	stop func() error
	w    io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.stop(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// styles are the cell styles every file of a workbook creates, in the same order, so
// that their ids agree between the sheet files and the package file.
type styles struct {
	header, date, datetime int
	// custom has one style per distinct Column.Format, in the order given to addStyles.
	custom []int
}

func (s styles) equal(o styles) bool {
	return s.header == o.header && s.date == o.date && s.datetime == o.datetime && slices.Equal(s.custom, o.custom)
}

// addStyles adds the workbook's styles to f: the header's, the default date and
// datetime formats, and one per format in formats (distinct number format codes).
func addStyles(f *excelize.File, formats []string) (styles, error) {
	var (
		s   styles
		err error
	)
	if s.header, err = f.NewStyle(&excelize.Style{
		Font:   &excelize.Font{Bold: true},
		Fill:   excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"E8EEF5"}},
		Border: []excelize.Border{{Type: "bottom", Color: "8A99AD", Style: 1}},
	}); err != nil {
		return s, fmt.Errorf("header style: %w", err)
	}
	if s.date, err = f.NewStyle(&excelize.Style{CustomNumFmt: ptr("yyyy-mm-dd")}); err != nil {
		return s, fmt.Errorf("date style: %w", err)
	}
	if s.datetime, err = f.NewStyle(&excelize.Style{CustomNumFmt: ptr("yyyy-mm-dd hh:mm:ss")}); err != nil {
		return s, fmt.Errorf("datetime style: %w", err)
	}
	for _, code := range formats {
		id, err := f.NewStyle(&excelize.Style{CustomNumFmt: ptr(code)})
		if err != nil {
			return s, jobs.Permanentf("bad_format", "number format %q: %v", code, err)
		}
		s.custom = append(s.custom, id)
	}
	return s, nil
}

// newFile returns a file with the workbook's styles (formats as addStyles takes them),
// checked against want when set.
func newFile(tmpDir string, formats []string, want *styles) (*excelize.File, styles, error) {
	f := excelize.NewFile(excelize.Options{TmpDir: tmpDir})
	s, err := addStyles(f, formats)
	if err == nil && want != nil && !s.equal(*want) {
		err = fmt.Errorf("style ids %v differ from the first sheet's %v", s, *want)
	}
	if err != nil {
		f.Close()
		return nil, s, err
	}
	return f, s, nil
}

// yieldEvery is how many rows a worker writes between yields of its thread. Writing a
// sheet is pure CPU, and with as many workers as cores Go preempts a running goroutine
// only every 10 ms: an HTTP handler woken meanwhile (a 202 waiting to be written) would
// wait for it. Yielding every few hundred microseconds keeps accepting fast while every
// core writes sheets, for a negligible cost; while a request is being accepted the yield
// waits for it (jobs.Run.Yield).
const yieldEvery = 32

// warnings says, per column, how many values were cut at the cell limit.
func (x *xlsxWriter) warnings() []string {
	var out []string
	for i, n := range x.cut {
		switch {
		case n == 1:
			out = append(out, fmt.Sprintf("column %q: 1 value longer than 32,767 characters was cut", headerText(x.cols[i])))
		case n > 1:
			out = append(out, fmt.Sprintf("column %q: %d values longer than 32,767 characters were cut", headerText(x.cols[i]), n))
		}
	}
	return out
}

// writePackage writes the workbook to w: the package file's parts (packageTemplate)
// with the finished sheet parts in place of its empty sheets, each entry stamped with
// modified. w's writes fail once ctx is done. The document properties name title,
// sheetq as creator and application, and modified as the creation time.
func (x *xlsxWriter) writePackage(ctx context.Context, w io.Writer, title string, modified time.Time) error {
	t, err := x.packageTemplate(title)
	if err != nil {
		return err
	}
	// zip.NewWriter reuses a *bufio.Writer this large instead of adding its own 4 KiB one.
	bw := getBufWriter(ctxWriter{stop: ctx.Err, w: w})
	defer putBufWriter(bw)
	err = t.write(zip.NewWriter(bw), x.parts, modified, propertiesStamp(modified), x.opt.zip64Threshold)
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return jobs.Retryable("canceled", fmt.Errorf("write xlsx: %w", context.Cause(ctx)))
	default:
		return jobs.Retryable("io", fmt.Errorf("write xlsx: %w", err))
	}
}

// propertiesStamp is how the document properties state t: W3CDTF, which core.xml's
// dates are.
func propertiesStamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// setProperties replaces excelize's document properties (creator "xuri", created
// 2006-09-16, application "Go Excelize") with the export's.
func (x *xlsxWriter) setProperties(f *excelize.File, title string, at time.Time) error {
	stamp := propertiesStamp(at)
	if err := f.SetDocProps(&excelize.DocProperties{
		Title: title, Creator: "sheetq", LastModifiedBy: "sheetq", Created: stamp, Modified: stamp,
	}); err != nil {
		return fmt.Errorf("document properties: %w", err)
	}
	// The version goes with the application's name, as LibreOffice writes it, not in
	// AppVersion: Office refuses (as a corrupt file) an AppVersion that is not one of
	// its own "XX.YYYY" versions.
	app := "sheetq"
	if x.opt.version != "" {
		app += " " + x.opt.version
	}
	if err := f.SetAppProps(&excelize.AppProperties{Application: app}); err != nil {
		return fmt.Errorf("application properties: %w", err)
	}
	return nil
}

// cutText cuts s to Excel's cell limit, ending it with a marker that says how many
// characters were cut, and reports whether it did. Excel would refuse the file, and
// excelize would cut silently.
func cutText(s string) (string, bool) {
	// A UTF-16 unit takes at least one byte of UTF-8, so this is the common exit.
	if len(s) <= maxCellChars {
		return s, false
	}
	units, runes := 0, 0
	for _, r := range s {
		units += utf16.RuneLen(r) // ranging over a string never yields a rune it cannot encode
		runes++
	}
	if units <= maxCellChars {
		return s, false
	}
	// Room for the marker with the most digits it can need: fewer characters than
	// the whole are cut.
	budget := maxCellChars - utf16Len(cutMarker(runes))
	kept, keptRunes := 0, 0
	for i, r := range s {
		n := utf16.RuneLen(r)
		if kept+n > budget {
			return s[:i] + cutMarker(runes-keptRunes), true
		}
		kept += n
		keptRunes++
	}
	return s, false // not reached: units > maxCellChars > budget
}

func cutMarker(cut int) string { return "… [cut: " + strconv.Itoa(cut) + " characters]" }

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// headerText is column c's header: its label, or its name.
func headerText(c Column) string { return cmp.Or(c.Label, c.Name) }

// cellWidth estimates how many characters v takes when shown in column c, in c's
// number format if it has one.
func cellWidth(v any, c Column) int {
	if c.Format == "" {
		return textWidth(v, c.Type)
	}
	var f float64
	switch v := v.(type) {
	case time.Time:
		// A date or time format shows about as many characters as its code has.
		return utf8.RuneCountInString(formatLiteral(firstSection(c.Format)))
	case int64:
		f = float64(v)
	case int:
		f = float64(v)
	case int32:
		f = float64(v)
	case float64:
		f = v
	default:
		return textWidth(v, c.Type)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return textWidth(v, c.Type)
	}
	return numberWidth(f, firstSection(c.Format))
}

// numberWidth estimates the characters f takes in the number format section code:
// its sign, integer digits (at least the code's zeros), thousands separators if the
// code has a comma, a point and the code's decimals, a percent sign, and the code's
// other characters, such as a currency symbol.
func numberWidth(f float64, code string) int {
	intPart, frac, hasPoint := strings.Cut(code, ".")
	decimals := 0
	if hasPoint {
		decimals = strings.Count(frac, "0") + strings.Count(frac, "#") + strings.Count(frac, "?")
	}
	if strings.Contains(code, "%") {
		f *= 100
	}
	digits := len(strconv.FormatFloat(math.Abs(math.Round(f)), 'f', 0, 64))
	digits = max(digits, strings.Count(intPart, "0"))
	w := digits
	if strings.Contains(intPart, ",") {
		w += (digits - 1) / 3
	}
	if decimals > 0 {
		w += 1 + decimals
	}
	if f < 0 {
		w++
	}
	for _, r := range formatLiteral(code) {
		if !strings.ContainsRune("0#?.,", r) {
			w++
		}
	}
	return w
}

// firstSection is a number format's first section, the one for positive numbers.
func firstSection(code string) string {
	inQuote := false
	for i, r := range code {
		switch {
		case r == '"':
			inQuote = !inQuote
		case r == ';' && !inQuote:
			return code[:i]
		}
	}
	return code
}

// formatLiteral is a number format code as it shows: without quotes, escapes and
// bracketed parts (colours, conditions, locales).
func formatLiteral(code string) string {
	var b strings.Builder
	inQuote, inBracket, escaped := false, false, false
	for _, r := range code {
		switch {
		case escaped:
			b.WriteRune(r)
			escaped = false
		case r == '"':
			inQuote = !inQuote
		case inQuote:
			b.WriteRune(r)
		case r == '\\':
			escaped = true
		case r == '[':
			inBracket = true
		case r == ']':
			inBracket = false
		case inBracket, r == '_', r == '*':
			// _x leaves room as wide as x and *x repeats x: about nothing.
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// textWidth estimates how many characters v takes when shown.
func textWidth(v any, t Type) int {
	switch v := v.(type) {
	case nil:
		return 0
	case string:
		w := 0
		for line := range strings.Lines(v) {
			w = max(w, utf8.RuneCountInString(line))
		}
		return w
	case []byte:
		return utf8.RuneCount(v)
	case time.Time:
		if t == TypeDate {
			return len("2006-01-02")
		}
		return len("2006-01-02 15:04:05")
	case bool:
		return len("FALSE")
	case float64:
		// Excel's General format shows at most 11 characters.
		return min(len(strconv.FormatFloat(v, 'f', -1, 64)), 11)
	default:
		return len(fmt.Sprint(v))
	}
}

// sheetName makes a valid, unique sheet name from base: "Demo", "Demo (2)", ...
func sheetName(base string, n int) string {
	base = strings.Map(func(r rune) rune {
		if strings.ContainsRune(`:\/?*[]`, r) {
			return '_'
		}
		return r
	}, base)
	base = strings.Trim(base, "' ")
	// Excel allows an apostrophe inside a name, but excelize does not double it where
	// it quotes the name in a formula (the autofilter's defined name), which Excel then
	// reports as a problem; a typographic one looks the same.
	base = strings.ReplaceAll(base, "'", "’")
	if base == "" {
		base = "Sheet"
	}
	suffix := ""
	if n > 1 {
		suffix = fmt.Sprintf(" (%d)", n)
	}
	// Excel counts the 31-character limit in UTF-16 units.
	for len(utf16.Encode([]rune(base)))+len(suffix) > excelize.MaxSheetNameLength {
		_, size := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-size]
	}
	return strings.TrimRight(base, "' ") + suffix
}

func colName(n int) string {
	name, _ := excelize.ColumnNumberToName(n) // n is within 1..MaxColumns, checked in Begin
	return name
}

func ptr[T any](v T) *T { return &v }
