package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sheetq/jobs"
)

// csvOptions is what writeCSV needs besides the rows. Zero fields take the defaults.
type csvOptions struct {
	// bom starts the file with a UTF-8 byte order mark (Args.BOM).
	bom bool
	// keepFormulas writes text fields as they are, even those a spreadsheet takes for a
	// formula (Args.CSVFormulas "keep"); false neutralises them (neutralise).
	keepFormulas bool
	// progress, warn and yield are as in xlsxOptions.
	progress func(rows, total int64)
	warn     func(string)
	yield    func()
}

// utf8BOM is the byte order mark that tells Excel a csv file is UTF-8.
const utf8BOM = "\uFEFF"

// writeCSV streams q's rows from src into w as RFC 4180 csv, UTF-8, as opt says: a
// header row of the columns' labels (Column.Label, else Name), then one record per row,
// with CRLF line ends, and fields that hold a comma, a quote, CR or LF quoted (quotes
// doubled; appendField). Values are written so that they read back exactly: integers in full, floats
// in their shortest round-trip form, bools as true/false, date columns' times as
// 2006-01-02, other times as RFC 3339 in UTC, nil as an empty field. A []byte that is
// UTF-8 is its text, other bytes are base64; text that is not UTF-8 has its bad bytes
// replaced by U+FFFD; both are counted in the job's warnings. Unless opt.keepFormulas,
// a text field (a label, a string, bytes) that starts as a formula does is written with
// a leading ' (neutralise); a typed value (a number, a bool, a time) never is. There is
// no row limit.
// Rows go straight to w through a buffer, so memory stays flat. Errors are *jobs.Error,
// as writeXLSX's.
func writeCSV(ctx context.Context, w io.Writer, src Source, q Query, opt csvOptions) error {
	if opt.progress == nil {
		opt.progress = func(int64, int64) {}
	}
	if opt.yield == nil {
		opt.yield = runtime.Gosched
	}
	bw := bufio.NewWriterSize(ctxWriter{stop: ctx.Err, w: w}, 64<<10)
	c := &csvWriter{opt: opt, bw: bw}
	err := src.Stream(ctx, q, c)
	if err == nil {
		err = c.finish()
	}
	var je *jobs.Error
	switch {
	case err == nil:
	case errors.As(err, &je):
		return err
	case ctx.Err() != nil:
		return jobs.Retryable("canceled", fmt.Errorf("write csv: %w", context.Cause(ctx)))
	case c.writeErr != nil:
		return jobs.Retryable("io", fmt.Errorf("write csv: %w", err))
	default:
		return jobs.Retryable("upstream", fmt.Errorf("source %s: %w", q.Report.Source, err))
	}
	if opt.warn != nil {
		for _, msg := range c.warnings() {
			opt.warn(msg)
		}
	}
	return nil
}

// csvWriter is the RowWriter behind writeCSV.
type csvWriter struct {
	opt csvOptions // with defaults
	bw  *bufio.Writer
	// writeErr is the first error of writing the file, so that writeCSV tells it (io)
	// from the source's own errors when the source passes it back unmarked.
	writeErr error

	cols  []Column
	total int64
	rows  int64

	line   []byte  // reused: the record being written
	field  []byte  // reused: a field that needs quotes, before it is quoted
	binary []int64 // per column: []byte values written as base64
	fixed  []int64 // per column: text values whose bytes were not UTF-8
}

// Begin implements RowWriter: it writes the BOM, if asked for, and the header row.
func (c *csvWriter) Begin(cols []Column, total int64) error {
	switch {
	case c.cols != nil:
		return jobs.Permanentf("bad_source", "source began twice")
	case len(cols) == 0:
		return jobs.Permanentf("no_columns", "the query returns no columns")
	}
	c.cols, c.total = cols, total
	c.binary = make([]int64, len(cols))
	c.fixed = make([]int64, len(cols))
	if c.opt.bom {
		if _, err := c.bw.WriteString(utf8BOM); err != nil {
			return c.failed(err)
		}
	}
	c.line = c.line[:0]
	for i, col := range cols {
		if i > 0 {
			c.line = append(c.line, ',')
		}
		start := len(c.line)
		c.line = append(c.line, headerText(col)...)
		if !c.opt.keepFormulas {
			// A csv source's header or an HTTP source's keys are data too.
			c.line = neutralise(c.line, start)
		}
		c.line = c.quote(c.line, start)
	}
	if err := c.endLine(); err != nil {
		return err
	}
	c.opt.progress(0, total)
	return nil
}

// Row implements RowWriter.
func (c *csvWriter) Row(values []any) error {
	if len(values) != len(c.cols) {
		return jobs.Permanentf("bad_source", "row %d has %d values for %d columns", c.rows+1, len(values), len(c.cols))
	}
	c.line = c.line[:0]
	for i, v := range values {
		if i > 0 {
			c.line = append(c.line, ',')
		}
		start := len(c.line)
		c.line = c.appendValue(c.line, i, v)
		if !c.opt.keepFormulas && isText(v) {
			c.line = neutralise(c.line, start)
		}
		c.line = c.quote(c.line, start)
	}
	if err := c.endLine(); err != nil {
		return err
	}
	c.rows++
	c.opt.progress(c.rows, c.total)
	if c.rows%yieldEvery == 0 {
		c.opt.yield()
	}
	return nil
}

// finish writes out what is buffered.
func (c *csvWriter) finish() error {
	if c.cols == nil {
		return jobs.Permanentf("no_columns", "the source sent no columns")
	}
	if err := c.bw.Flush(); err != nil {
		return c.failed(err)
	}
	c.opt.progress(c.rows, c.rows)
	return nil
}

// quote quotes the field that starts at line[start:], if it needs quotes: when it holds
// a comma, a quote, CR or LF (RFC 4180), or starts or ends with a space or a tab, which
// some readers trim. Quotes inside are doubled; CR and LF stay as they are, so that the
// field reads back exactly (encoding/csv's UseCRLF would turn a lone LF into CRLF and
// drop a lone CR). A record of one empty field is written "", since an empty line
// reads as no field at all.
func (c *csvWriter) quote(line []byte, start int) []byte {
	f := line[start:]
	switch {
	case len(f) == 0:
		if len(c.cols) == 1 {
			return append(line, '"', '"')
		}
		return line
	case bytes.ContainsAny(f, ",\"\r\n"), f[0] == ' ', f[0] == '\t', f[len(f)-1] == ' ', f[len(f)-1] == '\t':
	default:
		return line
	}
	c.field = append(c.field[:0], f...)
	rest := c.field
	line = append(line[:start], '"')
	for {
		i := bytes.IndexByte(rest, '"')
		if i < 0 {
			break
		}
		line = append(line, rest[:i+1]...)
		line = append(line, '"')
		rest = rest[i+1:]
	}
	line = append(line, rest...)
	return append(line, '"')
}

// endLine ends the record with CRLF and writes it.
func (c *csvWriter) endLine() error {
	c.line = append(c.line, '\r', '\n')
	if _, err := c.bw.Write(c.line); err != nil {
		return c.failed(err)
	}
	return nil
}

// failed records err as a write error and returns it.
func (c *csvWriter) failed(err error) error {
	if c.writeErr == nil {
		c.writeErr = err
	}
	return err
}

// appendValue appends column i's value v to b as its field's text (writeCSV says how).
func (c *csvWriter) appendValue(b []byte, i int, v any) []byte {
	switch t := v.(type) {
	case nil:
		return b
	case string:
		if !utf8.ValidString(t) {
			c.fixed[i]++
			t = strings.ToValidUTF8(t, string(utf8.RuneError)) // a run of bad bytes becomes one U+FFFD
		}
		return append(b, t...)
	case []byte:
		if !utf8.Valid(t) {
			c.binary[i]++
			return base64.StdEncoding.AppendEncode(b, t)
		}
		return append(b, t...)
	case int64: // what every source sends for integers; the others in full, too
		return strconv.AppendInt(b, t, 10)
	case int, int8, int16, int32, uint, uint8, uint16, uint32, uint64:
		return fmt.Append(b, t)
	case float64:
		return appendFloat(b, t, 64)
	case float32:
		return appendFloat(b, float64(t), 32)
	case bool:
		return strconv.AppendBool(b, t)
	case time.Time:
		if c.cols[i].Type == TypeDate {
			// The source's calendar day: in UTC a date at local midnight could be the day before.
			return t.AppendFormat(b, time.DateOnly)
		}
		return t.UTC().AppendFormat(b, time.RFC3339Nano)
	default:
		// Not a type sources send.
		return c.appendValue(b, i, fmt.Sprint(v))
	}
}

// formulaStarts are the first characters of a csv field that OWASP ("CSV Injection")
// lists as making a spreadsheet (Excel, LibreOffice, Google Sheets) read it as a
// formula: = + - @, and a tab or a CR, which a spreadsheet may skip to find one of the
// others behind it.
const formulaStarts = "=+-@\t\r"

// neutralise prepends a single quote to the field at line[start:] when it starts with
// one of formulaStarts, so that a spreadsheet opening the file takes it for text and
// runs nothing (Args.CSVFormulas). Other fields, the empty one included, are left as
// they are; a field that already starts with ' gets no second one.
func neutralise(line []byte, start int) []byte {
	if start >= len(line) || strings.IndexByte(formulaStarts, line[start]) < 0 {
		return line
	}
	line = append(line, 0)
	copy(line[start+1:], line[start:])
	line[start] = '\''
	return line
}

// isText reports whether v is written as text, which neutralise may change: a string,
// bytes, or a value of a type no source sends. Numbers, booleans and times are the
// source's typed values: "-5" from an int column stays -5, while "-5" from a text
// column is text like any other and gets its quote (docs/reports-and-sources.md, "The
// .csv file").
func isText(v any) bool {
	switch v.(type) {
	case nil, int64, int, int8, int16, int32, uint, uint8, uint16, uint32, uint64,
		float64, float32, bool, time.Time:
		return false
	}
	return true
}

// appendFloat appends f in the shortest form that parses back to the same value: plain
// decimals where they are of a sensible length (as JSON writes numbers), an exponent for
// the very large and the very small.
func appendFloat(b []byte, f float64, bits int) []byte {
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.AppendFloat(b, f, 'g', -1, bits)
	}
	return strconv.AppendFloat(b, f, 'f', -1, bits)
}

// warnings says, per column, how many values were written as base64 or had bytes
// replaced.
func (c *csvWriter) warnings() []string {
	var out []string
	for i, col := range c.cols {
		if n := c.binary[i]; n > 0 {
			out = append(out, fmt.Sprintf("column %q: %s written as base64, not being UTF-8 text", headerText(col), plural(n, "value was", "values were")))
		}
		if n := c.fixed[i]; n > 0 {
			out = append(out, fmt.Sprintf("column %q: %s bytes that are not UTF-8, written as U+FFFD", headerText(col), plural(n, "text value had", "text values had")))
		}
	}
	return out
}

// plural is "1 one" or "n many".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
