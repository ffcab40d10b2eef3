package export

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/klauspost/compress/flate"
	"github.com/xuri/excelize/v2"
)

// How a sheet is written, so that it can be checkpointed (ARCHITECTURE.md, "Checkpoints
// and resume"):
//
// A sheet's XML is its frame's head (the XML declaration, the worksheet's properties,
// its columns, panes and the header row), its data rows, and its frame's tail (the end
// of the sheet data and the autofilter). The frame is excelize's: a template cut once
// per export from a sheet excelize writes with the header row (frameOf). The data rows
// are the writer's own XML (xlsx_cells.go), gathered in a pooled buffer of about
// rowBufSize and handed, a buffer at a time, to a parallelDeflate into the sheet's rows
// file. At a checkpoint the buffer is handed over, the deflate stream is synced (a
// byte-aligned, non-final end of block) and the file fsynced, so that the file's first
// comp bytes are a stream another attempt can continue, with the dictionary and
// checksum it reads back from them (resumeRows). The frame is made when the sheet is
// done, once its range is known, and compressed on its own: the zip entry is the
// head's compressed bytes, then the rows file's, then the tail's, one deflate stream,
// whose CRC-32 is combined from the three (crc32Combine).

// sheetMark is where a sheet's rows file stands at a checkpoint: its first Comp bytes
// are a synced deflate stream of Raw bytes of row XML with checksum CRC, and the
// sheet's last row is Rows (1: the header alone).
type sheetMark struct {
	File string `json:"file"`
	Comp int64  `json:"comp"`
	Raw  int64  `json:"raw"`
	CRC  uint32 `json:"crc"`
	Rows int    `json:"rows"`
	// Pieces are the file's first bytes in the bucket, in order, for an attempt on
	// another node (xlsx_remote.go); they may end before Comp when an upload failed.
	Pieces []piece `json:"pieces,omitempty"`
}

// sheetRows is one sheet's data rows on their way into its compressed rows file.
type sheetRows struct {
	x    *xlsxWriter
	file *os.File
	cw   *countWriter
	bw   *bufio.Writer
	fw   *parallelDeflate
	crc  uint32 // of the raw row XML so far
	raw  int64
	rows int // the sheet's last row number; 1 is the header

	buf []byte // row XML not yet compressed, from rowBufs; nil when none is held

	pieces []piece // what of the file is in the bucket (xlsx_remote.go)
}

// newSheetRows starts a sheet's rows in file, empty, or continuing a stream that
// resumeRows read back (dict, crc and raw from it; rows the sheet's last row).
func (x *xlsxWriter) newSheetRows(file *os.File, comp int64, dict []byte, crc uint32, raw int64, rows int) *sheetRows {
	s := &sheetRows{x: x, file: file, crc: crc, raw: raw, rows: rows}
	s.cw = &countWriter{w: file, n: comp}
	s.bw = getBufWriter(ctxWriter{stop: x.stop, w: s.cw})
	if dict == nil {
		s.fw = newParallelDeflate(s.bw, deflateLevel, x.opt.yield, x.opt.spawn)
	} else {
		s.fw = resumeParallelDeflate(s.bw, deflateLevel, dict, x.opt.yield, x.opt.spawn)
	}
	return s
}

// row writes one data row as the sheet's next.
func (s *sheetRows) row(values []any) error {
	if s.buf == nil {
		s.buf = getRowBuf()
	}
	s.rows++
	s.buf = s.x.appendRow(s.buf, s.rows, values)
	if len(s.buf) >= rowBufSize {
		return s.flush()
	}
	return nil
}

// flush compresses the row XML gathered so far into the file.
func (s *sheetRows) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	err := s.write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		return s.x.ioErr("compress rows", err)
	}
	return nil
}

// release gives the row buffer back to the pool.
func (s *sheetRows) release() {
	putRowBuf(s.buf)
	s.buf = nil
}

// sync makes everything written so far durable in the rows file, ending the deflate
// block, and returns the mark that continues from there.
func (s *sheetRows) sync() (sheetMark, error) {
	if err := s.flush(); err != nil {
		return sheetMark{}, err
	}
	if err := s.fw.Sync(); err != nil {
		return sheetMark{}, s.x.ioErr("compress rows", err)
	}
	if err := s.bw.Flush(); err != nil {
		return sheetMark{}, s.x.ioErr("write rows", err)
	}
	if err := s.file.Sync(); err != nil {
		return sheetMark{}, s.x.ioErr("sync rows", err)
	}
	return sheetMark{File: baseName(s.file), Comp: s.cw.n, Raw: s.raw, CRC: s.crc, Rows: s.rows, Pieces: s.pieces}, nil
}

// end finishes the rows: the last of them compressed, and the deflate stream ended but
// not final (the frame's tail ends it).
func (s *sheetRows) end() error {
	err := s.flush()
	s.release()
	if ferr := s.fw.End(); err == nil && ferr != nil {
		err = s.x.ioErr("compress rows", ferr)
	}
	s.fw = nil
	if err == nil {
		if err = s.bw.Flush(); err != nil {
			err = s.x.ioErr("write rows", err)
		}
	}
	putBufWriter(s.bw)
	s.bw = nil
	return err
}

// abandon stops the rows after an error: the compressing goroutines end, nothing more
// is written.
func (s *sheetRows) abandon() {
	s.release()
	if s.fw != nil {
		s.fw.End()
		s.fw = nil
	}
	if s.bw != nil {
		putBufWriter(s.bw)
		s.bw = nil
	}
}

// write takes row XML: compressed into the file, counted and checksummed.
func (s *sheetRows) write(p []byte) error {
	for len(p) > 0 {
		chunk := p[:min(len(p), 32<<10)]
		n, err := s.fw.Write(chunk)
		s.crc = crc32.Update(s.crc, crc32.IEEETable, chunk[:n])
		s.raw += int64(n)
		if err != nil {
			return err
		}
		p = p[n:]
		s.x.opt.yield()
	}
	return nil
}

var (
	sheetDataOpen = []byte("<sheetData>")
	rowClose      = []byte("</row>")
)

// frameTemplate is a sheet's frame with a placeholder range: head holds the stream
// writer's dimension (streamDimension) and tail the autofilter over every row
// (allRows), both replaced with the sheet's range when it ends (frameFor).
type frameTemplate struct {
	head, tail []byte
	allRows    []byte // the autofilter's range in tail, as excelize writes it
	lastCol    string
}

// newFrameTemplate checks a frame's head and tail (a sheet written with the header row
// and an autofilter over all rows, cut at the end of the header row and at the end of
// the sheet data) and keeps them.
func newFrameTemplate(head, tail []byte, cols int) (*frameTemplate, error) {
	t := &frameTemplate{head: append([]byte(nil), head...), tail: append([]byte(nil), tail...), lastCol: colName(cols)}
	t.allRows = []byte("$A$1:$" + t.lastCol + "$" + strconv.Itoa(excelize.TotalRows))
	if !bytes.Contains(t.head, []byte(streamDimension)) || !bytes.Contains(t.tail, t.allRows) {
		return nil, fmt.Errorf("excelize wrote a sheet's frame in a shape the writer does not know")
	}
	return t, nil
}

// frameFor is the frame of a sheet whose last row is rows.
func (t *frameTemplate) frameFor(rows int) (head, tail []byte) {
	ref := "A1:" + t.lastCol + strconv.Itoa(rows)
	// A stream writer writes the sheet's head, dimension included, before the first
	// row, so excelize states "A1" whatever follows; streaming readers (openpyxl's
	// read-only mode) believe it and see one cell.
	head = bytes.Replace(t.head, []byte(streamDimension), []byte(`<dimension ref="`+ref+`"/>`), 1)
	tail = bytes.Replace(t.tail, t.allRows, []byte("$A$1:$"+t.lastCol+"$"+strconv.Itoa(rows)), 1)
	return head, tail
}

// frameSheet gives the sheet that sw streams into f the workbook's columns' widths, the
// frozen header row and its autofilter over every row, and writes the header row: what
// a frame template is cut from.
func (x *xlsxWriter) frameSheet(f *excelize.File, sw *excelize.StreamWriter, sheet string) error {
	// Backwards, because excelize puts each new <col> first and Excel wants them in order.
	for i := len(x.widths) - 1; i >= 0; i-- {
		if err := sw.SetColWidth(i+1, i+1, min(max(x.widths[i], minColWidth), maxColWidth)); err != nil {
			return fmt.Errorf("column width: %w", err)
		}
	}
	if err := sw.SetPanes(&excelize.Panes{
		Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft",
	}); err != nil {
		return fmt.Errorf("freeze header: %w", err)
	}
	header := make([]any, len(x.cols))
	for i, c := range x.cols {
		name, _ := cutText(headerText(c))
		header[i] = excelize.Cell{StyleID: x.styles.header, Value: name}
	}
	if err := sw.SetRow("A1", header); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	// AutoFilter may come before Flush only: it edits the worksheet the stream writer
	// serialises after the rows.
	if err := f.AutoFilter(sheet, "A1:"+colName(len(x.cols))+strconv.Itoa(excelize.TotalRows), nil); err != nil {
		return fmt.Errorf("autofilter: %w", err)
	}
	return nil
}

// frameOf returns the frame template of the first sheet (first) or of a later one, made
// once per export from an excelize file of its own.
func (x *xlsxWriter) frameOf(first bool) (*frameTemplate, error) {
	i := 1
	if first {
		i = 0
	}
	if x.frames[i] != nil {
		return x.frames[i], nil
	}
	key := x.frameKey(first)
	if t, ok := frames.get(key); ok {
		x.frames[i] = t
		return t, nil
	}
	f, _, err := newFile(x.tmpDir, x.formats, &x.styles)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sheet, path := f.GetSheetName(0), "xl/worksheets/sheet1.xml"
	if !first {
		// A new file's first sheet is its selected one, and only the workbook's first
		// sheet may be, or Excel opens the sheets grouped and edits them all at once.
		// Later sheets are a second sheet's frame, which is not selected.
		sheet, path = "Sheet2", "xl/worksheets/sheet2.xml"
		if _, err := f.NewSheet(sheet); err != nil {
			return nil, fmt.Errorf("add sheet: %w", err)
		}
	}
	sw, err := f.NewStreamWriter(sheet)
	if err != nil {
		return nil, fmt.Errorf("stream sheet: %w", err)
	}
	if err := x.frameSheet(f, sw, sheet); err != nil {
		return nil, err
	}
	if err := sw.Flush(); err != nil {
		return nil, fmt.Errorf("flush sheet: %w", err)
	}
	c := &wholeCapture{name: path}
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return c })
	if _, err := f.WriteToBuffer(); err != nil {
		return nil, fmt.Errorf("sheet frame: %w", err)
	}
	xml := c.buf.Bytes()
	h := bytes.Index(xml, sheetDataOpen)
	j := -1
	if h >= 0 {
		j = bytes.Index(xml[h:], rowClose)
	}
	k := bytes.LastIndex(xml, []byte("</sheetData>"))
	if h < 0 || j < 0 || k < 0 {
		return nil, fmt.Errorf("excelize wrote a sheet's frame in a shape the writer does not know")
	}
	t, err := newFrameTemplate(xml[:h+j+len(rowClose)], xml[k:], len(x.cols))
	if err != nil {
		return nil, err
	}
	x.frames[i] = t
	frames.put(key, t)
	return t, nil
}

// frames keeps the frame templates of recent exports: a report exported again has the
// same header and, its first rows being alike, mostly the same widths, and making a
// frame takes an excelize file of its own (about a third of a 2,000-row export's
// garbage). A template is never changed once made (frameFor copies), so exports share
// them.
var frames = templateCache[*frameTemplate]{max: 64}

// frameKey is everything a frame is made of (frameSheet): which sheet, the number
// formats (and so the style ids), the columns' widths and their header texts.
func (x *xlsxWriter) frameKey(first bool) string {
	b := make([]byte, 0, 256)
	b = strconv.AppendBool(b, first)
	for _, f := range x.formats {
		b = append(b, 0)
		b = append(b, f...)
	}
	b = append(b, 1)
	for _, w := range x.widths {
		b = strconv.AppendFloat(b, min(max(w, minColWidth), maxColWidth), 'g', -1, 64)
		b = append(b, 0)
	}
	for _, c := range x.cols {
		b = append(b, 1)
		b = append(b, headerText(c)...)
	}
	return string(b)
}

// wholeCapture keeps one part of a file written through it.
type wholeCapture struct {
	name string
	buf  bytes.Buffer
}

func (c *wholeCapture) Create(name string) (io.Writer, error) {
	if name != c.name {
		return io.Discard, nil
	}
	return &c.buf, nil
}
func (c *wholeCapture) AddFS(fs.FS) error { return nil }
func (c *wholeCapture) Close() error      { return nil }

// deflateFrame compresses p on its own: a sync-flushed, non-final stream for a head,
// which the rows continue, or a final one for a tail.
func deflateFrame(p []byte, final bool) ([]byte, error) {
	var b bytes.Buffer
	fw, _ := deflateWriters.Get().(*flate.Writer)
	if fw == nil {
		var err error
		if fw, err = flate.NewWriter(&b, deflateLevel); err != nil {
			return nil, err
		}
	} else {
		fw.ResetDict(&b, nil) // not Reset, which keeps the dictionary of its last use
	}
	defer deflateWriters.Put(fw)
	if _, err := fw.Write(p); err != nil {
		return nil, err
	}
	var err error
	if final {
		err = fw.Close()
	} else {
		err = fw.Flush()
	}
	return b.Bytes(), err
}

// crc32Combine is the CRC-32 (IEEE) of a run of bytes A followed by a run B, from A's
// CRC crc1, B's crc2 and B's length len2: appending len2 zero bytes to A is a linear
// map of its CRC, applied by squaring a matrix over GF(2) once per bit of len2, as
// zlib's crc32_combine does.
func crc32Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1
	}
	var even, odd [32]uint32
	odd[0] = 0xedb88320 // the operator for one zero bit: the reversed polynomial
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	for {
		gf2Square(&even, &odd) // one zero byte, then two, four, ...
		if len2&1 != 0 {
			crc1 = gf2Times(&even, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
		gf2Square(&odd, &even)
		if len2&1 != 0 {
			crc1 = gf2Times(&odd, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range 32 {
		square[n] = gf2Times(mat, mat[n])
	}
}

func baseName(f *os.File) string {
	name := f.Name()
	for i := len(name) - 1; i >= 0; i-- {
		if os.IsPathSeparator(name[i]) {
			return name[i+1:]
		}
	}
	return name
}
