package export

import (
	"archive/zip"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"sheetq/jobs"
)

// writeXLSX streams q's rows from src into an .xlsx workbook and writes it to w, as
// opt says (progress, warnings, yields, limits, checkpoints). Memory stays flat however
// many rows there are: each sheet's rows are compressed into a file in opt.tmpDir (or
// the job's resume folder) as they come, and the package is zipped straight into w.
// With opt.resume it first continues from that checkpoint, if its files are whole.
// Errors are *jobs.Error: the source's own, "upstream" for the source's unmarked ones,
// "io" for writing, "canceled" when ctx ends while the writer works.
func writeXLSX(ctx context.Context, w io.Writer, src Source, q Query, opt xlsxOptions) (err error) {
	opt = opt.withDefaults()
	x := newXLSXWriter(opt, q.Report.Sheet, ctx.Err)
	x.ctx = ctx
	defer func() { x.close(ctx, err) }()
	if opt.checkpoints() {
		if from := x.restore(opt.resume); from != nil {
			q.From = from
			if opt.resumed != nil {
				opt.resumed(from.Rows)
			}
		}
		q.Place = func(p Placer) { x.placer = p }
	}
	if x.cur == nil {
		if err := x.prepare(); err != nil {
			return err
		}
	}
	if err := src.Stream(ctx, q, x); err != nil {
		var je *jobs.Error
		if errors.As(err, &je) {
			return err
		}
		return jobs.Retryable("upstream", fmt.Errorf("source %s: %w", q.Report.Source, err))
	}
	if err := x.finish(); err != nil {
		return err
	}
	// The zip entries carry the export's time; without one archive/zip writes the
	// DOS date 0, which reads as the invalid 1980-00-00.
	at := q.Time
	if at.IsZero() {
		at = time.Now()
	}
	if err := x.writePackage(ctx, w, cmp.Or(q.Report.Title, q.Report.ID), at); err != nil {
		return err
	}
	if opt.warn != nil {
		for _, msg := range x.warnings() {
			opt.warn(msg)
		}
	}
	return nil
}

// prepare creates the first sheet's rows file before the source runs, which also makes
// sure the writer can write there, so that an unusable directory fails the export
// before the source is read. The file is the check: a probe of its own cost one more
// create and unlink per export, and creating a file is dear on some file systems
// (BENCHMARKS.md, "The burst on a fresh machine").
func (x *xlsxWriter) prepare() error {
	if err := os.MkdirAll(x.tmpDir, 0o700); err != nil {
		return jobs.Retryable("io", fmt.Errorf("spill directory: %w", err))
	}
	f, err := x.createRows(1)
	if err != nil {
		return jobs.Retryable("io", fmt.Errorf("spill directory: %w", err))
	}
	x.spare = f
	return nil
}

// createRows creates sheet n's rows file: in the job's resume folder once the export
// has made a checkpoint there (moveToResume) or continues one; else a temporary file.
// An export that ends before its first checkpoint (most do: the first comes after a
// heartbeat) never makes a folder for it.
func (x *xlsxWriter) createRows(n int) (*os.File, error) {
	if !x.inResume {
		return os.CreateTemp(x.tmpDir, "sheetq-sheet-")
	}
	return os.OpenFile(x.opt.resumePath(n), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
}

// streamDimension is the dimension a stream writer's sheet starts with.
const streamDimension = `<dimension ref="A1"></dimension>`

// sheetPart is a finished sheet: its name, range (its dimension and its filter's) and
// compressed XML: the frame's head, the rows file's first rowsComp bytes, the frame's
// tail (xlsx_sheet.go).
type sheetPart struct {
	name, ref   string
	file        *os.File // the rows, deflated: rowsComp bytes
	rowsComp    int64
	rowsRaw     int64
	rowsCRC     uint32
	rows        int    // the sheet's last row number
	head, tail  []byte // the frame, compressed; nil until framed
	crc         uint32 // of the whole sheet, once framed
	size, comp  int64  // uncompressed and compressed sizes, once framed
	first, done bool
	pieces      []piece // what of the rows file is in the bucket (xlsx_remote.go)
}

// frame makes the part's head and tail and its sizes and checksum.
func (x *xlsxWriter) frame(p *sheetPart) error {
	t, err := x.frameOf(p.first)
	if err != nil {
		return err
	}
	head, tail := t.frameFor(p.rows)
	if p.head, err = deflateFrame(head, false); err != nil {
		return err
	}
	if p.tail, err = deflateFrame(tail, true); err != nil {
		return err
	}
	p.crc = crc32Combine(crc32Combine(crc32.ChecksumIEEE(head), p.rowsCRC, p.rowsRaw), crc32.ChecksumIEEE(tail), int64(len(tail)))
	p.size = int64(len(head)) + p.rowsRaw + int64(len(tail))
	p.comp = int64(len(p.head)) + p.rowsComp + int64(len(p.tail))
	return nil
}

// writeEntry adds the part to zw as name, copying its compressed bytes. A part of
// zip64Threshold (xlsxOptions) or more keeps its sizes in a ZIP64 data descriptor and says version
// 4.5 in its local header as well as in the central directory: archive/zip alone would
// leave 2.0 in the local header, which Excel reports as a corrupt file (excelize
// patches that in its in-memory zip; see writeZip64LFH).
func (p *sheetPart) writeEntry(zw *zip.Writer, name string, modified time.Time, zip64Threshold int64) error {
	fh := &zip.FileHeader{
		Name:               name,
		Method:             zip.Deflate,
		Modified:           modified,
		CreatorVersion:     20,
		ReaderVersion:      20,
		CRC32:              p.crc,
		CompressedSize64:   uint64(p.comp),
		UncompressedSize64: uint64(p.size),
	}
	stampRaw(fh, modified)
	if p.size >= zip64Threshold || p.comp >= zip64Threshold {
		fh.Flags |= 0x8 // sizes follow the data, in a ZIP64 data descriptor
		fh.ReaderVersion = 45
	}
	ew, err := zw.CreateRaw(fh)
	if err != nil {
		return err
	}
	if _, err := ew.Write(p.head); err != nil {
		return err
	}
	buf := copyBufs.Get().(*[]byte)
	_, err = io.CopyBuffer(ew, io.NewSectionReader(p.file, 0, p.rowsComp), *buf)
	copyBufs.Put(buf)
	if err != nil {
		return err
	}
	_, err = ew.Write(p.tail)
	return err
}

// xlsxWriter is the RowWriter behind writeXLSX. It holds back the first rows to size
// the columns, then streams, starting a new sheet (with the header again) at
// opt.maxSheetRows, and makes a checkpoint when the engine wants one.
type xlsxWriter struct {
	opt      xlsxOptions // with defaults
	tmpDir   string      // opt.tmpDir
	base     string
	progress func(rows, total int64) // opt.progress
	stop     func() error            // the export's ctx.Err: RowWriter's methods take no context

	cols   []Column
	total  int64
	rows   int64   // data rows received
	sample [][]any // rows held back until the widths are known
	// sampleVals holds the values of sample's rows.
	sampleVals []any
	widths     []float64
	cut        []int64 // per column: values cut at maxCellChars

	styles   styles
	formats  []string     // the columns' distinct number formats, for addStyles
	colStyle []int        // per column: the style of its Format; 0: none
	parts    []*sheetPart // finished sheets
	spare    *os.File     // the first sheet's rows file, made by prepare; nil once taken
	cur      *sheetRows   // the current sheet's rows; nil before the first and after the last
	started  bool         // the first sheet has started: the widths are fixed

	cellCols []cellCol // per column: what its cells' XML needs (xlsx_cells.go)
	rowNum   []byte    // the row number being written, as digits
	scratch  []byte    // a cell's value as text, reused

	// Checkpoints (opt.checkpoints()).
	placer   Placer            // the source's, given through Query.Place
	last     []any             // the last row's values, for placer
	restored *xlsxCheckpoint   // what restore continued from; nil: the first row
	ctx      context.Context   // the export's, for the bucket's requests
	inResume bool              // the rows files are in the job's resume folder
	frames   [2]*frameTemplate // the first sheet's and later sheets' (frameOf)
}

// newXLSXWriter returns a writer as opt says, which must have its defaults applied.
func newXLSXWriter(opt xlsxOptions, sheet string, stop func() error) *xlsxWriter {
	return &xlsxWriter{opt: opt, tmpDir: opt.tmpDir, base: sheet, progress: opt.progress, stop: stop}
}

// ioErr is a retryable "io" error, or "canceled" when the export was stopped.
func (x *xlsxWriter) ioErr(doing string, err error) error {
	if e := x.stop(); e != nil {
		return jobs.Retryable("canceled", fmt.Errorf("%s: %w", doing, e))
	}
	return jobs.Retryable("io", fmt.Errorf("%s: %w", doing, err))
}

// close releases what the writer holds. Its files are removed, unless the export keeps
// checkpoints and ended in a way that a later attempt may continue from: a stop from
// outside (a shutdown, a lost lease, a cancel, a stall; ctx is done) or a retryable
// error. Then the files stay for the next attempt, and if there is none the engine
// tells the kind (Kind.Ended), which removes them. When the export keeps checkpoints
// and succeeded or failed for good, its whole resume folder goes.
func (x *xlsxWriter) close(ctx context.Context, err error) {
	if x.cur != nil {
		x.cur.abandon()
		x.parts = append(x.parts, &sheetPart{file: x.cur.file})
		x.cur = nil
	}
	keep := x.inResume && err != nil && (ctx.Err() != nil || !permanent(err))
	for _, p := range x.parts {
		p.file.Close()
		if !keep {
			os.Remove(p.file.Name())
		}
	}
	x.parts = nil
	if x.spare != nil {
		x.spare.Close()
		if !keep {
			os.Remove(x.spare.Name())
		}
		x.spare = nil
	}
	if !keep && (x.inResume || len(x.opt.resume) > 0) {
		removeResumeDir(x.opt.resumeDir)
	}
}

// Begin implements RowWriter.
func (x *xlsxWriter) Begin(cols []Column, total int64) error {
	switch {
	case x.cols != nil && x.restored == nil:
		return jobs.Permanentf("bad_source", "source began twice")
	case len(cols) == 0:
		return jobs.Permanentf("no_columns", "the query returns no columns")
	case len(cols) > excelize.MaxColumns:
		return jobs.Permanentf("too_many_columns", "the query returns %d columns; a sheet holds %d", len(cols), excelize.MaxColumns)
	}
	if r := x.restored; r != nil {
		x.restored = nil
		if !slices.Equal(cols, r.Cols) {
			// The file so far has other columns: the next attempt starts again.
			if x.opt.checkpoint != nil {
				x.opt.checkpoint(nil)
			}
			return jobs.Retryable("resume", fmt.Errorf("the source's columns changed since the checkpoint at row %d; the export starts again", x.rows))
		}
		x.total = total
		x.progress(x.rows, total)
		return nil
	}
	x.cols, x.total = cols, total
	x.widths = make([]float64, len(cols))
	for i, c := range cols {
		// Room for the bold header and the filter button.
		x.widths[i] = float64(utf8.RuneCountInString(headerText(c)) + 4)
	}
	if err := x.setColumns(cols); err != nil {
		return err
	}
	x.cut = make([]int64, len(cols))
	x.progress(0, total)
	return nil
}

// setColumns takes the columns' number formats and their styles, and sizes the buffers
// of a row.
func (x *xlsxWriter) setColumns(cols []Column) error {
	x.cols = cols
	x.formats = nil
	for _, c := range cols {
		if c.Format != "" && !slices.Contains(x.formats, c.Format) {
			x.formats = append(x.formats, c.Format)
		}
	}
	st, err := stylesOf(x.tmpDir, x.formats)
	if err != nil {
		return err
	}
	x.styles = st
	x.colStyle = make([]int, len(cols))
	for i, c := range cols {
		if c.Format != "" {
			x.colStyle[i] = st.custom[slices.Index(x.formats, c.Format)]
		}
	}
	x.makeCellCols()
	x.rowNum, x.scratch = make([]byte, 0, 8), make([]byte, 0, 64)
	return nil
}

// styleIDs caches, by the columns' number formats, the style ids a new file gives the
// workbook's styles (addStyles): the same every time, and making a file to learn them
// cost a small export a tenth of its time.
var styleIDs = templateCache[styles]{max: 64} // by the formats joined by NUL

// stylesOf returns the style ids of a workbook with formats.
func stylesOf(tmpDir string, formats []string) (styles, error) {
	key := strings.Join(formats, "\x00")
	if st, ok := styleIDs.get(key); ok {
		return st, nil
	}
	f, st, err := newFile(tmpDir, formats, nil)
	if err != nil {
		return st, err
	}
	f.Close()
	styleIDs.put(key, st)
	return st, nil
}

// Row implements RowWriter.
func (x *xlsxWriter) Row(values []any) error {
	if len(values) != len(x.cols) {
		return jobs.Permanentf("bad_source", "row %d has %d values for %d columns", x.rows+1, len(values), len(x.cols))
	}
	x.rows++
	if !x.started && len(x.sample) < widthSample {
		if x.sample == nil {
			// One array for all the held-back rows' values, not one a row.
			x.sampleVals = make([]any, 0, widthSample*len(values))
			x.sample = make([][]any, 0, widthSample)
		}
		n := len(x.sampleVals)
		x.sampleVals = x.sampleVals[:n+len(values)]
		row := x.sampleVals[n : n+len(values) : n+len(values)]
		for i, v := range values {
			x.widths[i] = max(x.widths[i], float64(cellWidth(v, x.cols[i])+2))
			if b, ok := v.([]byte); ok {
				v = string(b) // the source may reuse its bytes once Row returns
			}
			row[i] = v
		}
		x.sample = append(x.sample, row)
		x.progress(x.rows, x.total)
		return nil
	}
	if err := x.flushSample(); err != nil {
		return err
	}
	if err := x.writeRow(values); err != nil {
		return err
	}
	x.progress(x.rows, x.total)
	if x.placer != nil {
		x.last = append(x.last[:0], values...)
		if x.opt.wantCheckpoint() {
			if err := x.checkpoint(); err != nil {
				return err
			}
		}
	}
	if x.rows%yieldEvery == 0 {
		x.opt.yield()
	}
	return nil
}

// idleCheckpoint makes a checkpoint while the writer waits for rows (the pipe's
// writer goroutine asks when the engine wants one).
func (x *xlsxWriter) idleCheckpoint() error {
	if x.placer == nil {
		return nil
	}
	return x.checkpoint()
}

// finish writes what is held back and closes the last sheet.
func (x *xlsxWriter) finish() error {
	if x.cols == nil {
		return jobs.Permanentf("no_columns", "the source sent no columns")
	}
	if err := x.flushSample(); err != nil {
		return err
	}
	if err := x.closeSheet(); err != nil {
		return err
	}
	for _, p := range x.parts {
		if p.head == nil {
			if err := x.frame(p); err != nil {
				return err
			}
		}
	}
	x.progress(x.rows, x.rows)
	return nil
}

// flushSample starts the first sheet, now that the widths are known, and writes the
// rows held back for them.
func (x *xlsxWriter) flushSample() error {
	if x.started {
		return nil
	}
	x.started = true
	if err := x.nextSheet(); err != nil {
		return err
	}
	for _, values := range x.sample {
		if err := x.writeRow(values); err != nil {
			return err
		}
	}
	x.sample, x.sampleVals = nil, nil
	return nil
}

// writeRow writes a data row, in the next sheet when the current one is full.
func (x *xlsxWriter) writeRow(values []any) error {
	if x.cur.rows >= x.opt.maxSheetRows {
		if err := x.nextSheet(); err != nil {
			return err
		}
	}
	return x.cur.row(values)
}

// nextSheet closes the current sheet and starts the next, in a rows file of its own.
func (x *xlsxWriter) nextSheet() error {
	if err := x.closeSheet(); err != nil {
		return err
	}
	f := x.spare
	x.spare = nil
	if f == nil {
		var err error
		if f, err = x.createRows(len(x.parts) + 1); err != nil {
			return x.ioErr("sheet "+strconv.Itoa(len(x.parts)+1), err)
		}
	}
	x.cur = x.newSheetRows(f, 0, nil, 0, 0, 1)
	return nil
}

// closeSheet ends the current sheet's rows and makes its frame.
func (x *xlsxWriter) closeSheet() error {
	s := x.cur
	if s == nil {
		return nil
	}
	x.cur = nil
	part := &sheetPart{
		name: sheetName(x.base, len(x.parts)+1),
		ref:  "A1:" + colName(len(x.cols)) + strconv.Itoa(s.rows),
		file: s.file, rows: s.rows, first: len(x.parts) == 0, done: true,
	}
	x.parts = append(x.parts, part) // from here on, close removes the file
	if err := s.end(); err != nil {
		return err
	}
	part.rowsComp, part.rowsRaw, part.rowsCRC, part.pieces = s.cw.n, s.raw, s.crc, s.pieces
	return x.frame(part)
}
