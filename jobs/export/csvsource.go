package export

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sheetq/internal/filekind"
	"sheetq/jobs"
)

// Limits on a CSV file, so that a file that is no table fails with a clear message
// instead of exhausting memory.
const (
	csvMaxColumns = 2000     // SQLite's default limit on a table's columns
	csvMaxLine    = 16 << 20 // bytes in one line
)

// csvSource serves a folder of CSV files as tables: orders.csv is table orders. Each
// query imports the files it names into a temporary SQLite database, typing every
// column from its values, runs there read-only like a SQLite source, and deletes the
// database. Nothing is cached, so an edited file is seen by the next export.
type csvSource struct {
	name  string
	dir   string
	shown string // dir as messages name it (shownPath)
	// tmpDir holds the temporary databases; empty means the system's temporary directory.
	tmpDir string
}

// csvTable is one file of the folder and the table it becomes.
type csvTable struct {
	name string // the file's name without .csv
	file string // the file's path
}

// Stream implements Source.
func (c *csvSource) Stream(ctx context.Context, q Query, w RowWriter) error {
	tables, err := c.tables(q.Report.Query)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(c.tmpDir, "sheetq-csv-")
	if err != nil {
		return jobs.Retryable("io", fmt.Errorf("source %s: temporary folder: %w", c.name, withoutPath(err)))
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "tables.db")
	if err := c.load(ctx, path, tables); err != nil {
		return err
	}
	db, err := openSQLiteReadOnly(path)
	if err != nil {
		return err
	}
	defer db.Close()
	s := &sqlSource{name: c.name, dialect: sqliteDialect}
	return s.stream(ctx, db, q, w)
}

// Close implements io.Closer; a CSV source holds nothing open between queries.
func (c *csvSource) Close() error { return nil }

// tables lists the files whose table names occur in query: importing the others would
// only cost time. A name that occurs in a string or a comment is imported for nothing,
// which is harmless.
func (c *csvSource) tables(query string) ([]csvTable, error) {
	entries, err := os.ReadDir(c.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: folder %s does not exist", c.name, c.shown))
	case err != nil:
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: %w", c.name, replacePath(err, c.dir, c.shown)))
	}
	lower := strings.ToLower(query)
	seen := map[string]string{} // table names are case-insensitive in SQL
	var out []csvTable
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || !strings.EqualFold(ext, ".csv") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ext)
		key := strings.ToLower(name)
		if name == "" || !strings.Contains(lower, key) {
			continue
		}
		if other, dup := seen[key]; dup {
			return nil, jobs.Permanentf("bad_csv", "source %s: %s and %s would both be table %s", c.name, other, e.Name(), name)
		}
		seen[key] = e.Name()
		out = append(out, csvTable{name: name, file: filepath.Join(c.dir, e.Name())})
	}
	return out, nil
}

// load imports tables into a new SQLite database at path.
func (c *csvSource) load(ctx context.Context, path string, tables []csvTable) error {
	// No journal and no syncs: the database is thrown away after one query.
	db, err := sql.Open("sqlite", sqliteURI(path)+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
	if err != nil {
		return jobs.Retryable("io", fmt.Errorf("source %s: temporary database: %w", c.name, err))
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// Written even with no table, so that the file exists for the read-only open.
	if _, err := db.ExecContext(ctx, "PRAGMA user_version = 1"); err != nil {
		return c.ioErr(ctx, err)
	}
	for _, t := range tables {
		if err := c.loadTable(ctx, db, t); err != nil {
			return err
		}
	}
	return nil
}

// loadTable reads t twice: once to type its columns, once to insert its rows.
func (c *csvSource) loadTable(ctx context.Context, db *sql.DB, t csvTable) error {
	var (
		names []string
		kinds []csvKind
		seen  []bool
	)
	err := c.read(ctx, t, func(header []string) error {
		var err error
		names, err = c.columnNames(t, header)
		kinds = make([]csvKind, len(names))
		seen = make([]bool, len(names))
		for i := range kinds {
			kinds[i] = csvAnyKind
		}
		return err
	}, func(rec []string) error {
		for i, v := range rec {
			if v = strings.TrimSpace(v); v != "" {
				kinds[i] &= csvKindsOf(v)
				seen[i] = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	decls := make([]string, len(names))
	var create, insert strings.Builder
	fmt.Fprintf(&create, "CREATE TABLE %s (", quoteIdent(t.name))
	fmt.Fprintf(&insert, "INSERT INTO %s VALUES (", quoteIdent(t.name))
	for i, name := range names {
		decls[i] = csvDecl(kinds[i], seen[i])
		if i > 0 {
			create.WriteString(", ")
			insert.WriteString(", ")
		}
		fmt.Fprintf(&create, "%s %s", quoteIdent(name), decls[i])
		insert.WriteByte('?')
	}
	create.WriteByte(')')
	insert.WriteByte(')')
	if _, err := db.ExecContext(ctx, create.String()); err != nil {
		return c.ioErr(ctx, err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return c.ioErr(ctx, err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, insert.String())
	if err != nil {
		return c.ioErr(ctx, err)
	}
	defer stmt.Close()
	args := make([]any, len(names))
	err = c.read(ctx, t, func([]string) error { return nil }, func(rec []string) error {
		for i, v := range rec {
			args[i] = csvValue(decls[i], v)
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return c.ioErr(ctx, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return c.ioErr(ctx, err)
	}
	return nil
}

// read reads t's header, then each record, checking ctx every so many records.
func (c *csvSource) read(ctx context.Context, t csvTable, header func([]string) error, row func([]string) error) error {
	f, err := c.open(t)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(64 << 10) // the header line, as far as it fits
	r := csv.NewReader(&lineLimiter{r: br, max: csvMaxLine})
	r.Comma = csvComma(head)
	r.ReuseRecord = true
	rec, err := r.Read()
	if err == io.EOF {
		return jobs.Permanentf("bad_csv", "source %s: %s is empty: its first line must name the columns", c.name, filepath.Base(t.file))
	}
	if err != nil {
		return c.csvErr(t, err)
	}
	if err := header(rec); err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return jobs.Retryable("canceled", fmt.Errorf("source %s: %w", c.name, ctx.Err()))
		}
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return c.csvErr(t, err)
		}
		if err := row(rec); err != nil {
			return err
		}
	}
}

// open opens t's file if it is a regular file. A named pipe, a device or a socket is
// refused: the file is read twice (once to type the columns), and a pipe whose writer
// never writes would hold the attempt in a read that no cancellation interrupts.
// O_NONBLOCK keeps the open itself from waiting for a pipe's writer (it changes
// nothing for a regular file); the type is checked on the opened file, so that a
// file swapped in after the folder was listed is checked too.
func (c *csvSource) open(t csvTable) (*os.File, error) {
	f, err := os.OpenFile(t.file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: %w", c.name, replacePath(err, c.dir, c.shown)))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: %w", c.name, replacePath(err, c.dir, c.shown)))
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, jobs.Permanentf("bad_csv", "source %s: %s is not a regular file (%s): a csv source reads only regular files",
			c.name, filepath.Base(t.file), filekind.Of(st.Mode()))
	}
	return f, nil
}

// columnNames makes SQL column names from a header: trimmed, the first without a
// byte-order mark, blanks named column_N, repeats numbered (SQL names ignore case).
func (c *csvSource) columnNames(t csvTable, header []string) ([]string, error) {
	if len(header) > csvMaxColumns {
		return nil, jobs.Permanentf("bad_csv", "source %s: %s has %d columns; at most %d are supported",
			c.name, filepath.Base(t.file), len(header), csvMaxColumns)
	}
	names := make([]string, len(header))
	used := map[string]bool{}
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		base := strings.TrimSpace(h)
		if base == "" {
			base = "column_" + strconv.Itoa(i+1)
		}
		name := base
		for n := 2; used[strings.ToLower(name)]; n++ {
			name = base + "_" + strconv.Itoa(n)
		}
		used[strings.ToLower(name)] = true
		names[i] = name
	}
	return names, nil
}

// csvComma picks the separator from the start of a file: a comma, unless the header
// line has none but has semicolons (what Excel writes where the comma is the decimal
// separator) or tabs.
func csvComma(head []byte) rune {
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	switch {
	case bytes.IndexByte(head, ',') >= 0:
		return ','
	case bytes.IndexByte(head, ';') >= 0:
		return ';'
	case bytes.IndexByte(head, '\t') >= 0:
		return '\t'
	}
	return ','
}

// csvErr classifies a read error: a malformed file is permanent and says where.
func (c *csvSource) csvErr(t csvTable, err error) error {
	var (
		pe *csv.ParseError
		le *lineTooLongError
	)
	if errors.As(err, &pe) || errors.As(err, &le) {
		return jobs.Permanent("bad_csv", fmt.Errorf("source %s: %s: %w", c.name, filepath.Base(t.file), err))
	}
	return jobs.Retryable("upstream", fmt.Errorf("source %s: %s: %w", c.name, filepath.Base(t.file), replacePath(err, c.dir, c.shown)))
}

// ioErr classifies an error of the temporary database: a full disk, most likely.
func (c *csvSource) ioErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return jobs.Retryable("canceled", fmt.Errorf("source %s: %w", c.name, cerr))
	}
	return jobs.Retryable("io", fmt.Errorf("source %s: temporary database: %w", c.name, withoutPath(err)))
}

// withoutPath is err without the path an *fs.PathError quotes: the temporary folder's
// place on the server is nobody's business but the log's.
func withoutPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// csvKind is a set of the types a CSV column may still have.
type csvKind uint8

const (
	csvInt csvKind = 1 << iota
	csvNumber
	csvBool
	csvDate
	csvDatetime

	csvAnyKind = csvInt | csvNumber | csvBool | csvDate | csvDatetime
)

// csvNumberRe is a plain decimal number. Leading zeros make text (zip codes, account
// numbers keep their zeros), and so do hex, Inf and NaN, which ParseFloat accepts.
var csvNumberRe = regexp.MustCompile(`^[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

// csvKindsOf returns the types the trimmed, non-empty value v fits.
func csvKindsOf(v string) csvKind {
	var k csvKind
	if csvNumberRe.MatchString(v) {
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			k |= csvInt | csvNumber
		} else if strings.ContainsAny(v, ".eE") {
			if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) {
				k |= csvNumber
			}
		} // else an integer beyond int64: text keeps every digit
	}
	if strings.EqualFold(v, "true") || strings.EqualFold(v, "false") {
		k |= csvBool
	}
	if _, dateOnly, ok := parseCSVTime(v); ok {
		k |= csvDatetime
		if dateOnly {
			k |= csvDate
		}
	}
	return k
}

// csvDecl is the SQLite column type for the kinds every value of a column fits; a
// column without values is TEXT. The names are those the SQLite source reads back as
// the matching Type (BOOLEAN as bool, DATE and DATETIME as dates).
func csvDecl(k csvKind, seen bool) string {
	switch {
	case !seen:
		return "TEXT"
	case k&csvBool != 0:
		return "BOOLEAN"
	case k&csvInt != 0:
		return "INTEGER"
	case k&csvNumber != 0:
		return "REAL"
	case k&csvDate != 0:
		return "DATE"
	case k&csvDatetime != 0:
		return "DATETIME"
	}
	return "TEXT"
}

// csvValue converts a cell for a column of type decl. An empty cell is NULL; a blank
// one too, except in a TEXT column.
func csvValue(decl, v string) any {
	if v == "" {
		return nil
	}
	if decl == "TEXT" {
		return v
	}
	s := strings.TrimSpace(v)
	if s == "" {
		return nil
	}
	switch decl {
	case "INTEGER":
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	case "REAL":
		f, _ := strconv.ParseFloat(s, 64)
		return f
	case "BOOLEAN":
		if strings.EqualFold(s, "true") {
			return 1
		}
		return 0
	case "DATE", "DATETIME":
		t, _, _ := parseCSVTime(s)
		if decl == "DATE" {
			return t.Format(dateLayout)
		}
		// SQLite's own layout, in UTC: what datetime() writes and the source reads back.
		return t.UTC().Format(sqliteDatetimeLayout)
	}
	return v
}

// csvTimeLayouts are the date and time forms a CSV cell is recognised in: ISO 8601
// with a space or a T, seconds and fractions optional, a zone optional (UTC if none).
var csvTimeLayouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02 15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
}

// parseCSVTime parses an ISO date (dateOnly) or date and time.
func parseCSVTime(s string) (t time.Time, dateOnly, ok bool) {
	if len(s) < len(dateLayout) || s[4] != '-' || s[7] != '-' {
		return time.Time{}, false, false // cheap rejection of most text
	}
	if len(s) == len(dateLayout) {
		t, err := time.Parse(dateLayout, s)
		return t, true, err == nil
	}
	for _, layout := range csvTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, false, true
		}
	}
	return time.Time{}, false, false
}

// lineTooLongError says which line of a CSV file is over csvMaxLine.
type lineTooLongError struct{ line int }

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("line %d is longer than %d MiB", e.line, csvMaxLine>>20)
}

// lineLimiter fails a read once a line runs past max bytes: encoding/csv holds a whole
// record in memory, and a file without line breaks would be one record.
type lineLimiter struct {
	r    io.Reader
	max  int
	run  int // bytes since the last line break
	line int // line breaks so far
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for chunk := p[:n]; ; {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			l.run += len(chunk)
			break
		}
		if l.run+i > l.max {
			return 0, &lineTooLongError{line: l.line + 1}
		}
		l.line++
		l.run, chunk = 0, chunk[i+1:]
	}
	if l.run > l.max {
		return 0, &lineTooLongError{line: l.line + 1}
	}
	return n, err
}
