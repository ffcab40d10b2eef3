package export

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// The sheet's data rows are written here, as XML, straight into a pooled byte buffer
// (ARCHITECTURE.md, "Checkpoints and resume"): no excelize stream writer, no value boxed or
// string made per cell. The XML is byte for byte what excelize's StreamWriter.SetRow
// wrote for the same values when the pipeline used it (FuzzSheetWriter compares the
// two), so readers see exactly the cells they saw before:
//
//   - a number is <c r="B2" s="3"><v>12.5</v></c>, s only for a styled cell;
//   - a bool is t="b" with <v>1</v> or <v>0</v>;
//   - text is an inline string, t="inlineStr" with <is><t>...</t></is>, never a
//     formula; xml:space="preserve" on <t> when it starts or ends with a space, tab,
//     CR or LF;
//   - nil (NULL) writes no cell at all;
//   - a time is its Excel serial number (1900 date system, the source's wall clock)
//     styled with the column's format or the default date or datetime one; a year
//     outside 1900-9999 is text, as Excel would show ####.
//
// Text is escaped as encoding/xml's EscapeText does (& < > " ' as entities, tab and CR
// as character references, LF kept), with every character XML 1.0 cannot hold (control
// characters, U+FFFE, U+FFFF, and each byte of invalid UTF-8, which is where a lone
// surrogate ends up) replaced by U+FFFD; and text that looks like Office's _xHHHH_
// escape has its underscore escaped as _x005F_, so that Excel shows it as written.

// rowBufSize is how much row XML a sheet gathers before it hands it to the compressor:
// large enough that the per-write costs (checksum call, yield) vanish, small enough to
// stay in cache.
const rowBufSize = 64 << 10

// maxPooledRowBuf is the largest row buffer that goes back to the pool: a row of long
// text cells can grow one to megabytes, which should not stay pinned.
const maxPooledRowBuf = 1 << 20

var rowBufs = sync.Pool{New: func() any { b := make([]byte, 0, rowBufSize+rowBufSize/2); return &b }}

func getRowBuf() []byte { return (*rowBufs.Get().(*[]byte))[:0] }

func putRowBuf(b []byte) {
	if b != nil && cap(b) <= maxPooledRowBuf {
		rowBufs.Put(&b)
	}
}

// cellCol is what the cell XML of each column needs, made once per export
// (setColumns): the column's letters, its style attribute, and its times' one.
type cellCol struct {
	ref       []byte // "A", "B", ... "XFD"
	style     []byte // ` s="N"` for the column's number format; empty without one
	timeStyle []byte // ` s="N"` for its times: the column's format, or the default date or datetime one
	date      bool   // a TypeDate column: a time out of Excel's years shows as a date
}

// styleAttr is the attribute ` s="id"`, or nothing for style 0.
func styleAttr(id int) []byte {
	if id == 0 {
		return nil
	}
	return append(strconv.AppendInt([]byte(` s="`), int64(id), 10), '"')
}

// makeCellCols fills x.cellCols from the columns and styles.
func (x *xlsxWriter) makeCellCols() {
	x.cellCols = make([]cellCol, len(x.cols))
	for i, c := range x.cols {
		date := c.Type == TypeDate
		ts := x.styles.datetime
		if date {
			ts = x.styles.date
		}
		x.cellCols[i] = cellCol{
			ref:       []byte(colName(i + 1)),
			style:     styleAttr(x.colStyle[i]),
			timeStyle: styleAttr(cmp.Or(x.colStyle[i], ts)),
			date:      date,
		}
	}
}

// appendRow appends row r's XML, its cells from values, to b. It counts the text it
// cuts at the cell limit in x.cut.
func (x *xlsxWriter) appendRow(b []byte, r int, values []any) []byte {
	b = append(b, `<row r="`...)
	b = strconv.AppendInt(b, int64(r), 10)
	b = append(b, `">`...)
	x.rowNum = strconv.AppendInt(x.rowNum[:0], int64(r), 10)
	for i, v := range values {
		if v != nil {
			b = x.appendCell(b, i, v)
		}
	}
	return append(b, `</row>`...)
}

// cellStart appends a cell's start tag up to its type: <c r="B2" s="3".
func (x *xlsxWriter) cellStart(b []byte, i int, style []byte) []byte {
	b = append(b, `<c r="`...)
	b = append(b, x.cellCols[i].ref...)
	b = append(b, x.rowNum...)
	b = append(b, '"')
	return append(b, style...)
}

// appendCell appends column i's cell with the source's value v, not nil.
func (x *xlsxWriter) appendCell(b []byte, i int, v any) []byte {
	col := &x.cellCols[i]
	switch t := v.(type) {
	case string:
		return x.appendText(b, i, t)
	case float64:
		return x.appendFloat(b, i, t, 64)
	case int64:
		return x.appendInt(b, i, t)
	case time.Time:
		// Excel shows the years 1900 to 9999 of the source's wall clock; outside them a
		// number would show as ####.
		if y := t.Year(); y < 1900 || y > 9999 {
			layout := "2006-01-02 15:04:05"
			if col.date {
				layout = dateLayout
			}
			return x.appendDigits(b, i, t.AppendFormat(x.scratch[:0], layout))
		}
		b = x.cellStart(b, i, col.timeStyle)
		b = append(b, `><v>`...)
		b = strconv.AppendFloat(b, excelTime(t), 'f', -1, 64)
		return append(b, `</v></c>`...)
	case bool:
		b = x.cellStart(b, i, col.style)
		if t {
			return append(b, ` t="b"><v>1</v></c>`...)
		}
		return append(b, ` t="b"><v>0</v></c>`...)
	case int:
		return x.appendInt(b, i, int64(t))
	case int32:
		return x.appendNumber(b, i, strconv.AppendInt(x.scratch[:0], int64(t), 10))
	case int16:
		return x.appendNumber(b, i, strconv.AppendInt(x.scratch[:0], int64(t), 10))
	case int8:
		return x.appendNumber(b, i, strconv.AppendInt(x.scratch[:0], int64(t), 10))
	case uint64:
		return x.appendUint(b, i, t)
	case uint:
		return x.appendUint(b, i, uint64(t))
	case uint32:
		return x.appendNumber(b, i, strconv.AppendUint(x.scratch[:0], uint64(t), 10))
	case uint16:
		return x.appendNumber(b, i, strconv.AppendUint(x.scratch[:0], uint64(t), 10))
	case uint8:
		return x.appendNumber(b, i, strconv.AppendUint(x.scratch[:0], uint64(t), 10))
	case float32:
		return x.appendFloat(b, i, float64(t), 32)
	case []byte:
		// Sources send text as strings (the SQL source converts its driver's bytes);
		// this copy is the rare case's.
		return x.appendText(b, i, string(t))
	default:
		// Not a type sources send; as text, it can never become a formula or a rich cell.
		return x.appendText(b, i, fmt.Sprint(v))
	}
}

// appendInt appends an integer cell: a number, or text beyond 2^53, where Excel's
// doubles would lose digits of a large id.
func (x *xlsxWriter) appendInt(b []byte, i int, n int64) []byte {
	if n > maxExactInt || n < -maxExactInt {
		return x.appendDigits(b, i, strconv.AppendInt(x.scratch[:0], n, 10))
	}
	return x.appendNumber(b, i, strconv.AppendInt(x.scratch[:0], n, 10))
}

// appendUint is appendInt for an unsigned integer.
func (x *xlsxWriter) appendUint(b []byte, i int, n uint64) []byte {
	if n > maxExactInt {
		return x.appendDigits(b, i, strconv.AppendUint(x.scratch[:0], n, 10))
	}
	return x.appendNumber(b, i, strconv.AppendUint(x.scratch[:0], n, 10))
}

// appendNumber appends a number cell whose value is digits.
func (x *xlsxWriter) appendNumber(b []byte, i int, digits []byte) []byte {
	b = x.cellStart(b, i, x.cellCols[i].style)
	b = append(b, `><v>`...)
	b = append(b, digits...)
	return append(b, `</v></c>`...)
}

// appendDigits appends a text cell of ASCII that needs no escaping (digits, a date).
func (x *xlsxWriter) appendDigits(b []byte, i int, text []byte) []byte {
	b = x.cellStart(b, i, x.cellCols[i].style)
	b = append(b, ` t="inlineStr"><is><t>`...)
	b = append(b, text...)
	return append(b, `</t></is></c>`...)
}

// appendFloat appends a number cell, or for NaN and the infinities (which a cell cannot
// hold) their names as text. bits is 32 for a float32's value.
func (x *xlsxWriter) appendFloat(b []byte, i int, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return x.appendDigits(b, i, append(x.scratch[:0], "NaN"...))
	case math.IsInf(f, 1):
		return x.appendDigits(b, i, append(x.scratch[:0], "+Inf"...))
	case math.IsInf(f, -1):
		return x.appendDigits(b, i, append(x.scratch[:0], "-Inf"...))
	}
	b = x.cellStart(b, i, x.cellCols[i].style)
	b = append(b, `><v>`...)
	b = appendCellFloat(b, f, bits)
	return append(b, `</v></c>`...)
}

// appendCellFloat appends f in the shortest decimal that reads back as f, without an
// exponent, cut (not rounded) after its 15th significant digit, Excel's precision: the
// digits after it are dropped behind the point and zeroed before it.
func appendCellFloat(b []byte, f float64, bits int) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, bits)
	if math.Abs(f) == math.MaxFloat64 {
		return b
	}
	s := b[start:]
	point := -1
	significant := 0
	for k, c := range s {
		if c == '.' {
			point = k
			continue
		}
		if c < '0' || c > '9' || significant == 0 && c == '0' {
			continue
		}
		if significant++; significant <= 15 {
			continue
		}
		if point >= 0 {
			// The 16th digit is behind the point, which cannot then be the last.
			if k == point+1 {
				return b[:start+point]
			}
			return b[:start+k]
		}
		end := k
		for end < len(s) && s[end] != '.' {
			s[end] = '0'
			end++
		}
		return b[:start+end]
	}
	return b
}

// excelTime is t's Excel serial number in the 1900 date system: days since 1899-12-30
// of t's wall clock, the fraction the time of day, one day added from 1900-03-01 on for
// the 29 February 1900 that Excel counts. Its float64 arithmetic is the same, step for
// step, as what excelize stored, so the cells keep the same digits.
func excelTime(t time.Time) float64 {
	_, offset := t.Zone()
	t = t.Add(time.Duration(offset) * time.Second) // the wall clock, read as UTC
	const day = 24 * time.Hour
	// A time.Duration spans about 292 years, fewer than from 1899 to 9999: the days are
	// counted in steps of 290*364 days, of which a duration holds one.
	const step = 290 * 364 * day
	var serial float64
	at := t
	diff := at.Sub(excelDay0)
	for diff >= step {
		serial += float64(step / day)
		at = at.Add(-step)
		diff = at.Sub(excelDay0)
	}
	rem := diff % day
	serial += float64(diff-rem)/float64(day) + float64(rem)/float64(day)
	if t.After(excelLeapDay) {
		serial++
	}
	return serial
}

var (
	// excelDay0 is day 0 of the count, whose day 1 is 1900-01-01.
	excelDay0 = time.Date(1899, time.December, 31, 0, 0, 0, 0, time.UTC)
	// excelLeapDay is the last instant before 1900-03-01, after which Excel's serials
	// count the 29 February 1900 it believes in.
	excelLeapDay = time.Date(1900, time.March, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond)
)

// appendText appends column i's text cell, cut at Excel's cell limit (counted in
// x.cut), escaped.
func (x *xlsxWriter) appendText(b []byte, i int, s string) []byte {
	if c, cut := cutText(s); cut {
		x.cut[i]++
		s = c
	}
	b = x.cellStart(b, i, x.cellCols[i].style)
	if s != "" && (spaceByte(s[0]) || spaceByte(s[len(s)-1])) {
		b = append(b, ` t="inlineStr"><is><t xml:space="preserve">`...)
	} else {
		b = append(b, ` t="inlineStr"><is><t>`...)
	}
	b = appendEscaped(b, s)
	return append(b, `</t></is></c>`...)
}

// spaceByte reports whether c is white space that XML would not keep at a text's ends
// without xml:space="preserve".
func spaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// asciiPlain marks the ASCII bytes that text copies as they are.
var asciiPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `&<>"'_` {
		t[c] = false
	}
	t['\n'] = true
	return t
}()

// appendEscaped appends s as the text of an XML element, as described above.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		// A run of plain ASCII goes in one append.
		j := i
		for j < len(s) && s[j] < utf8.RuneSelf && asciiPlain[s[j]] {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch c {
			case '&':
				b = append(b, "&amp;"...)
			case '<':
				b = append(b, "&lt;"...)
			case '>':
				b = append(b, "&gt;"...)
			case '"':
				b = append(b, "&#34;"...)
			case '\'':
				b = append(b, "&#39;"...)
			case '\t':
				b = append(b, "&#x9;"...)
			case '\r':
				b = append(b, "&#xD;"...)
			case '_':
				var n int
				b, n = appendUnderscore(b, s[i-1:])
				i += n - 1
			default: // a control character XML 1.0 cannot hold
				b = append(b, "\uFFFD"...)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !xmlChar(r) {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// xmlChar reports whether XML 1.0 can hold r, a rune at or above U+0080.
func xmlChar(r rune) bool {
	return r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// appendUnderscore appends the text at the start of s, which is an underscore, and
// returns how many bytes of s it took. Office reads _xHHHH_ in text as the character
// U+HHHH, so text that holds one literally has its underscore written as _x005F_:
//
//   - _x005F_ followed by xHHHH_ (HHHH a character) is _x005F_x005F_x005F_, the xHHHH_
//     left to what follows;
//   - _x005F_ otherwise is _x005F_x005F_;
//   - _xHHHH_ (a character) is _x005F_xHHHH_;
//   - _xHHHH_ naming a surrogate (D800 to DFFF) is dropped, text lost: excelize's stream
//     writer did so, and the writer keeps every byte it wrote (a fix would write
//     _x005F_xHHHH_, as for any other);
//   - an underscore not starting _xHHHH_ is itself.
func appendUnderscore(b []byte, s string) ([]byte, int) {
	h, ok := escapeAt(s)
	if !ok {
		return append(b, '_'), 1
	}
	if h == 0x5F {
		if len(s) >= 13 && s[7] == 'x' && s[12] == '_' {
			if h2, ok := hex4(s[8:12]); ok && !surrogate(h2) {
				return append(b, "_x005F_x005F_x005F_"...), 7
			}
		}
		return append(b, "_x005F_x005F_"...), 7
	}
	if surrogate(h) {
		return b, 7
	}
	b = append(b, "_x005F"...)
	return append(b, s[:7]...), 7
}

// escapeAt reads _xHHHH_ at the start of s.
func escapeAt(s string) (rune, bool) {
	if len(s) < 7 || s[0] != '_' || s[1] != 'x' || s[6] != '_' {
		return 0, false
	}
	return hex4(s[2:6])
}

func hex4(s string) (rune, bool) {
	var r rune
	for k := range 4 {
		c := s[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func surrogate(r rune) bool { return 0xD800 <= r && r <= 0xDFFF }
