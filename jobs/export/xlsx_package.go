package export

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xuri/excelize/v2"
)

// The package file (writePackage) is the same for every export of a report but for
// each sheet's last row, in its autofilter's defined name, and the time in the document
// properties. Making it through excelize took two thirds of a 2,000-row export's
// remaining garbage (a new file parses its templates, the theme's above all), so it is
// made once per shape as a packageTemplate, with every sheet's filter over all of
// Excel's rows and a stand-in time, and each export writes the template's parts with
// those two put right. A template whose placeholders are not where the writer expects
// them is refused, as a frame template is (newFrameTemplate), rather than written.

// packageTemplate is a package file's parts in excelize's order: the sheets, to be
// replaced with the finished sheet parts, and the others' bytes.
type packageTemplate struct {
	parts   []templatePart
	lastCol string // the sheets' last column, as in the placeholders
}

type templatePart struct {
	name  string
	sheet int // the part of x.parts written here; -1: data
	data  []byte
}

// templateTime is the stand-in for the document properties' times; templateStamp is how
// they show it.
var templateTime = time.Date(1999, 12, 31, 23, 59, 58, 0, time.UTC)

const templateStamp = "1999-12-31T23:59:58Z"

const (
	workbookPart = "xl/workbook.xml"
	corePart     = "docProps/core.xml"
)

// packages keeps the package templates of recent exports, by packageKey.
var packages = templateCache[*packageTemplate]{max: 64}

// packageKey is what a package file is made of: the number formats (its styles), the
// title, the application's version, the number of columns and the sheets' names.
func (x *xlsxWriter) packageKey(title string) string {
	var b strings.Builder
	b.WriteString(title)
	b.WriteByte(0)
	b.WriteString(x.opt.version)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(len(x.cols)))
	for _, f := range x.formats {
		b.WriteByte(1)
		b.WriteString(f)
	}
	for _, p := range x.parts {
		b.WriteByte(2)
		b.WriteString(p.name)
	}
	return b.String()
}

// packageTemplate returns the template of the export's package file, from the cache or
// made now.
func (x *xlsxWriter) packageTemplate(title string) (*packageTemplate, error) {
	key := x.packageKey(title)
	if t, ok := packages.get(key); ok {
		return t, nil
	}
	t, err := x.makePackageTemplate(title)
	if err != nil {
		return nil, err
	}
	packages.put(key, t)
	return t, nil
}

// makePackageTemplate has excelize write the package file with every sheet's filter
// over all rows and the stand-in time, and keeps what it writes.
func (x *xlsxWriter) makePackageTemplate(title string) (*packageTemplate, error) {
	f, _, err := newFile(x.tmpDir, x.formats, &x.styles)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := x.setProperties(f, title, templateTime); err != nil {
		return nil, err
	}
	t := &packageTemplate{lastCol: colName(len(x.cols))}
	rec := &partRecorder{t: t, sheets: map[string]int{}}
	for i, p := range x.parts {
		if i == 0 {
			err = f.SetSheetName(f.GetSheetName(0), p.name) // reuse the new file's "Sheet1"
		} else {
			_, err = f.NewSheet(p.name)
		}
		if err != nil {
			return nil, fmt.Errorf("add sheet %q: %w", p.name, err)
		}
		if err := f.AutoFilter(p.name, "A1:"+t.lastCol+strconv.Itoa(excelize.TotalRows), nil); err != nil {
			return nil, fmt.Errorf("autofilter: %w", err)
		}
		// A new file's sheets are xl/worksheets/sheet1.xml, sheet2.xml, ... in order.
		rec.sheets["xl/worksheets/sheet"+strconv.Itoa(i+1)+".xml"] = i
	}
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return rec })
	buf, err := f.WriteToBuffer()
	if err != nil {
		return nil, fmt.Errorf("package file: %w", err)
	}
	if buf.Len() > 0 {
		return nil, fmt.Errorf("excelize put %d bytes in its own buffer instead of the zip writer", buf.Len())
	}
	if err := t.check(len(x.parts)); err != nil {
		return nil, err
	}
	return t, nil
}

var errPackageShape = errors.New("excelize wrote the package file in a shape the writer does not know")

// check makes sure every sheet was written once and the placeholders are where write
// replaces them: one filter range a sheet in the workbook, two times in the core
// properties.
func (t *packageTemplate) check(sheets int) error {
	seen := make([]bool, sheets)
	var workbook, core []byte
	for _, p := range t.parts {
		switch {
		case p.sheet >= 0:
			if seen[p.sheet] {
				return errPackageShape
			}
			seen[p.sheet] = true
		case p.name == workbookPart:
			workbook = p.data
		case p.name == corePart:
			core = p.data
		}
	}
	for _, s := range seen {
		if !s {
			return errPackageShape
		}
	}
	if bytes.Count(workbook, t.allRows()) != sheets || bytes.Count(core, []byte(">"+templateStamp+"<")) != 2 {
		return errPackageShape
	}
	return nil
}

// allRows is a placeholder filter range as the workbook states it.
func (t *packageTemplate) allRows() []byte {
	return []byte("!$A$1:$" + t.lastCol + "$" + strconv.Itoa(excelize.TotalRows) + "<")
}

// write writes the package to zw: parts (in the order their sheets were made) in place
// of the template's sheets, each sheet's last row in its filter's range, and stamp as
// the document's times; every entry is stamped with modified. Not covered: an archive
// whose compressed size passes 4 GiB (tens of GiB of sheet XML) gets archive/zip's
// ZIP64 offsets with version 2.0 in both headers; Go and Python read it, Excel is
// untested.
func (t *packageTemplate) write(zw *zip.Writer, parts []*sheetPart, modified time.Time, stamp string, zip64Threshold int64) error {
	for _, p := range t.parts {
		if p.sheet >= 0 {
			if err := parts[p.sheet].writeEntry(zw, p.name, modified, zip64Threshold); err != nil {
				return err
			}
			continue
		}
		data := p.data
		switch p.name {
		case workbookPart:
			data = t.workbookFor(data, parts)
		case corePart:
			data = bytes.ReplaceAll(data, []byte(">"+templateStamp+"<"), []byte(">"+stamp+"<"))
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate, Modified: modified})
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}

// workbookFor is the workbook with each sheet's filter over its rows: the placeholders
// are the sheets' defined names, in the sheets' order.
func (t *packageTemplate) workbookFor(data []byte, parts []*sheetPart) []byte {
	ph := t.allRows()
	out := make([]byte, 0, len(data)+8*len(parts))
	for _, p := range parts {
		i := bytes.Index(data, ph)
		out = append(out, data[:i]...)
		out = append(out, "!$A$1:$"+t.lastCol+"$"...)
		out = strconv.AppendInt(out, int64(p.rows), 10)
		out = append(out, '<')
		data = data[i+len(ph):]
	}
	return append(out, data...)
}

// partRecorder is the excelize.ZipWriter a package template is made through.
type partRecorder struct {
	t      *packageTemplate
	sheets map[string]int  // the part name of each sheet -> its index in x.parts
	bufs   []*bytes.Buffer // each part's bytes, parallel to t.parts
}

// Create implements excelize.ZipWriter.
func (r *partRecorder) Create(name string) (io.Writer, error) {
	sheet, ok := r.sheets[name]
	if !ok {
		sheet = -1
	}
	r.t.parts = append(r.t.parts, templatePart{name: name, sheet: sheet})
	if ok {
		r.bufs = append(r.bufs, nil)
		return io.Discard, nil
	}
	b := new(bytes.Buffer)
	r.bufs = append(r.bufs, b)
	return b, nil
}

// AddFS implements excelize.ZipWriter; a package file has nothing to add from one.
func (r *partRecorder) AddFS(fs.FS) error { return errPackageShape }

// Close implements excelize.ZipWriter: the parts' bytes go into the template.
func (r *partRecorder) Close() error {
	for i, b := range r.bufs {
		if b != nil {
			r.t.parts[i].data = b.Bytes()
		}
	}
	return nil
}

// templateCache is a small cache of what an export makes once per shape (style ids,
// frames, package templates), by key, shared by every export; an entry is never changed
// once made. A full cache starts again empty: simple, and with more shapes in use than
// it holds it costs what no cache costs.
type templateCache[T any] struct {
	mu  sync.Mutex
	max int
	m   map[string]T
}

func (c *templateCache[T]) get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[key]
	return t, ok
}

func (c *templateCache[T]) put(key string, t T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]T, c.max)
	}
	c.m[key] = t
}

func (c *templateCache[T]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *templateCache[T]) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
