package export

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"sheetq/jobs"
)

// sqlDialect is the database family behind a sqlSource. It decides the placeholder
// style, the transaction options, how result columns are typed and which errors are
// the query's fault rather than the server's.
type sqlDialect int

const (
	sqliteDialect sqlDialect = iota
	postgresDialect
	mysqlDialect
)

func (d sqlDialect) String() string {
	switch d {
	case postgresDialect:
		return "postgres"
	case mysqlDialect:
		return "mysql"
	default:
		return "sqlite"
	}
}

// sqliteLookahead is how many rows a SQLite query may read before announcing its
// columns, to type the columns that have no declared type (expressions, aggregates)
// from their first non-NULL value. The rows are held, then written in order.
const sqliteLookahead = 100

// sqlSource runs a report's query through database/sql, in a read-only transaction,
// and streams its rows.
type sqlSource struct {
	name    string // the source's name in the config file, for messages
	dialect sqlDialect
	// db is the connection pool of a server source. It is nil for a SQLite file, which
	// is opened for each query: nothing stays open between exports, and a file that was
	// replaced (a fresh copy of a database) is seen at once.
	db    *sql.DB
	path  string // the SQLite file
	shown string // the SQLite file as messages name it (shownPath)
	// secret is the DSN's password: driver errors can quote a connection string, and
	// a password must never reach a job's error message or a log.
	secret string
}

// Stream implements Source.
func (s *sqlSource) Stream(ctx context.Context, q Query, w RowWriter) error {
	db := s.db
	if db == nil {
		var err error
		if db, err = s.openFile(); err != nil {
			return err
		}
		defer db.Close()
	}
	return s.stream(ctx, db, q, w)
}

// Close implements io.Closer: it closes the connection pool, if the source has one.
func (s *sqlSource) Close() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}

// openFile opens the source's SQLite file read-only. A missing file is retryable: it
// may be in the middle of being copied or restored.
func (s *sqlSource) openFile() (*sql.DB, error) {
	st, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: database file %s does not exist", s.name, s.shown))
	case err != nil:
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: %w", s.name, replacePath(err, s.path, s.shown)))
	case st.IsDir():
		return nil, jobs.Retryable("upstream", fmt.Errorf("source %s: %s is a folder, not a SQLite database file", s.name, s.shown))
	}
	return openSQLiteReadOnly(s.path)
}

// openSQLiteReadOnly opens the SQLite file at path so that nothing can write to it:
// mode=ro makes SQLite refuse writes (and refuse to create a missing file), and
// query_only stops even statements that would write to a temporary copy.
func openSQLiteReadOnly(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqliteURI(path)+"?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, jobs.Retryable("upstream", fmt.Errorf("open database: %w", replacePath(err, path, filepath.Base(path))))
	}
	// One query at a time: the count and the rows share one read transaction.
	db.SetMaxOpenConns(1)
	return db, nil
}

// sqliteURI makes a file: URI for path, so that SQLite applies URI parameters such as
// mode=ro; the path is escaped, since ? # and % are legal in file names.
func sqliteURI(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/data/shop.db becomes file:///C:/data/shop.db
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// stream runs q on db and writes the rows to w.
func (s *sqlSource) stream(ctx context.Context, db *sql.DB, q Query, w RowWriter) error {
	text := trimQuery(q.Report.Query)
	if text == "" {
		return jobs.Permanentf("query", "report %s: the query is empty", q.Report.ID)
	}
	// The statement check gives a clear message before anything connects; what keeps
	// the source unchanged is the read-only connection or transaction below.
	if msg, _ := readOnlyProblem(text); msg != "" {
		return jobs.Permanentf("query", "report %s: %s", q.Report.ID, msg)
	}
	if s.dialect == mysqlDialect {
		if msg := mysqlProblem(text); msg != "" {
			return jobs.Permanentf("query", "report %s: %s", q.Report.ID, msg)
		}
	}
	query, args, err := BindNamed(text, s.dialect.placeholders(), s.dialect.params(q))
	if err != nil {
		return jobs.Permanent("query", fmt.Errorf("report %s: %w", q.Report.ID, err))
	}
	counted := query
	if q.Report.Resume != "" {
		if query, args, err = s.resumeQuery(query, args, q); err != nil {
			return err
		}
	}

	// Cancelled on an early return, before the rows are closed: closing an unfinished
	// result otherwise reads (MySQL, PostgreSQL) every row that is left.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := db.Conn(ctx) // one session for the settings, the count and the rows
	if err != nil {
		return s.fail(ctx, "connect", err)
	}
	defer conn.Close()
	if s.dialect == sqliteDialect {
		// The connection is this query's own (the file is opened per query), so the
		// authorizer leaves with it.
		if err := readOnlySQLite(conn); err != nil {
			return s.fail(ctx, "connect", err)
		}
	}
	if s.dialect == mysqlDialect {
		// DDL (CREATE, DROP, ALTER, TRUNCATE) first commits the transaction it is sent
		// in and then runs outside it: only a read-only session refuses it too. Every
		// connection of the pool is ours, so the setting may stay.
		if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION READ ONLY"); err != nil {
			return s.fail(ctx, "connect", err)
		}
	}
	tx, err := conn.BeginTx(ctx, s.dialect.txOptions())
	if err != nil {
		return s.fail(ctx, "connect", err)
	}
	// Read-only: there is nothing to commit. Rolling back before the context is
	// cancelled keeps the connection in the pool.
	defer func() { _ = tx.Rollback() }()

	total := int64(-1)
	if q.Report.Count {
		// The newlines keep a trailing -- comment from swallowing the closing parenthesis.
		cargs := args
		if counted != query {
			cargs = args[:len(args)-resumeArgs(q)]
		}
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM (\n"+counted+"\n) AS q", cargs...).Scan(&total); err != nil {
			return s.fail(ctx, "count rows", err)
		}
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return s.fail(ctx, "run query", err)
	}
	finished := false
	defer func() {
		if !finished {
			cancel()
		}
		rows.Close()
	}()
	cols, specs, untyped, err := s.columns(rows)
	if err != nil {
		return s.fail(ctx, "read columns", err)
	}

	n := len(cols)
	raw := make([]any, n)
	dest := make([]any, n)
	for i := range raw {
		dest[i] = &raw[i]
	}
	var ahead [][]any
	for len(untyped) > 0 && len(ahead) < sqliteLookahead && rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return s.fail(ctx, "read row", err)
		}
		// Scan into *any copies []byte, so keeping the values is safe.
		ahead = append(ahead, slices.Clone(raw))
		untyped = slices.DeleteFunc(untyped, func(i int) bool {
			if raw[i] == nil {
				return false
			}
			specs[i].typ = typeOfValue(raw[i])
			cols[i].Type = specs[i].typ
			return true
		})
	}
	for _, i := range untyped { // NULL in every row looked at
		specs[i].typ, cols[i].Type = TypeText, TypeText
	}

	if q.Report.Resume != "" && q.Place != nil {
		i := slices.IndexFunc(cols, func(c Column) bool { return c.Name == q.Report.Resume })
		if i < 0 {
			return jobs.Permanentf("query", "report %s: -- resume: names column %q, which the query does not return", q.Report.ID, q.Report.Resume)
		}
		q.Place(func(_ int64, last []any) (json.RawMessage, error) { return encodeResumeValue(last[i]) })
	}
	if err := w.Begin(cols, total); err != nil {
		return err
	}
	vals := make([]any, n) // reused for every row: the writer keeps nothing
	emit := func(r []any) error {
		for i, v := range r {
			vals[i] = specs[i].convert(v)
		}
		return w.Row(vals)
	}
	for _, r := range ahead {
		if err := emit(r); err != nil {
			return err
		}
	}
	ahead = nil
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return s.fail(ctx, "read row", err)
		}
		if err := emit(raw); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.fail(ctx, "read rows", err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "read rows", err)
	}
	finished = true
	return nil
}

// columns types the result's columns. untyped lists the SQLite columns whose declared
// type says nothing; they are typed from their first value.
func (s *sqlSource) columns(rows *sql.Rows) (cols []Column, specs []colSpec, untyped []int, err error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, nil, nil, err
	}
	cols = make([]Column, len(cts))
	specs = make([]colSpec, len(cts))
	lengths := columnLengths(rows, s.dialect, len(cts))
	for i, ct := range cts {
		spec, known := s.dialect.column(ct, lengths[i])
		cols[i], specs[i] = Column{Name: ct.Name(), Type: spec.typ}, spec
		if !known {
			untyped = append(untyped, i)
		}
	}
	return cols, specs, untyped, nil
}

// trimQuery drops what follows a query's last SQL: semicolons, comments, whitespace.
// The count wraps the query in a subquery, where a ; is a syntax error.
func trimQuery(query string) string {
	end := 0
	for tok := range sqlTokens(query) {
		switch tok.kind {
		case tokSemicolon, tokLineComment, tokBlockComment:
			continue
		case tokText:
			if strings.TrimSpace(query[tok.start:tok.end]) == "" {
				continue
			}
			end = tok.start + len(strings.TrimRight(query[tok.start:tok.end], " \t\r\n\f\v"))
			continue
		}
		end = tok.end
	}
	return strings.TrimSpace(query[:end])
}

// fail classifies a driver error: an error in the query is permanent, anything else
// (no connection, a server going away, too many connections) is worth a retry.
func (s *sqlSource) fail(ctx context.Context, doing string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return jobs.Retryable("canceled", fmt.Errorf("source %s: %w", s.name, cerr))
	}
	err = redact(err, s.secret)
	if s.path != "" {
		err = replacePath(err, s.path, s.shown)
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok && se.Code()&0xff == sqliteAuth {
		return jobs.Permanent("query", fmt.Errorf("source %s: %s: a report may only read, and this query would write, "+
			"change a setting or attach a database: %w", s.name, doing, err))
	}
	if s.dialect.queryError(err) {
		return jobs.Permanent("query", fmt.Errorf("source %s: %s: %w", s.name, doing, err))
	}
	return jobs.Retryable("upstream", fmt.Errorf("source %s: %s: %w", s.name, doing, err))
}

// redactedError is err with a secret masked in its message.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact masks secret wherever err's message quotes it.
func redact(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, "xxxxx"), err: err}
}

func (d sqlDialect) placeholders() PlaceholderStyle {
	if d == postgresDialect {
		return DollarNumbers
	}
	return QuestionMarks
}

// txOptions: read-only everywhere. On the servers the transaction is also REPEATABLE
// READ, so the count and the rows see one snapshot; SQLite's read transaction is one.
func (d sqlDialect) txOptions() *sql.TxOptions {
	if d == sqliteDialect {
		return &sql.TxOptions{ReadOnly: true}
	}
	return &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}
}

// sqliteDatetimeLayout is how SQLite's own datetime() writes a date and time; datetime
// parameters reach SQLite in it, so they compare as text with stored values.
const sqliteDatetimeLayout = "2006-01-02 15:04:05.999999999"

// params returns q's parameters as the driver should bind them. Canonical values are
// int64, float64, bool and strings; only datetimes (RFC 3339, UTC) need a dialect's form.
// PostgreSQL parses RFC 3339 itself, for timestamp and timestamptz alike.
func (d sqlDialect) params(q Query) map[string]any {
	out := make(map[string]any, len(q.Params))
	for name, v := range q.Params {
		out[name] = v
	}
	for _, p := range q.Report.Params {
		s, ok := out[p.Name].(string)
		if !ok || p.Type != TypeDatetime {
			continue
		}
		t, err := time.Parse(datetimeLayout, s)
		if err != nil {
			continue
		}
		switch d {
		case sqliteDialect:
			out[p.Name] = t.UTC().Format(sqliteDatetimeLayout)
		case mysqlDialect:
			out[p.Name] = t.UTC() // the driver writes it in its Loc, UTC
		}
	}
	return out
}

// queryError reports whether err is the query's fault (syntax, unknown table or column,
// a type or data error, a write in a read-only transaction), which no retry can fix.
func (d sqlDialect) queryError(err error) bool {
	switch d {
	case postgresDialect:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || len(pe.Code) < 2 {
			return false
		}
		switch pe.Code[:2] {
		// Server trouble: connection (08), authorization (28), unknown database (3D),
		// serialization/deadlock (40), resources such as too many connections (53),
		// lock not available (55), shutdown or cancel (57), system (58), internal (XX).
		case "08", "28", "3D", "40", "53", "55", "57", "58", "XX":
			return false
		}
		// The rest is about the statement: syntax and names (42), data (22), read-only
		// transaction (25), unsupported feature (0A), cardinality (21), limits (54)...
		return true
	case mysqlDialect:
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			return false
		}
		switch me.Number {
		case 1021, 1030, 1037, 1038, 1040, 1041, 1044, 1045, 1049, 1053, 1077, 1078, 1079, 1080,
			1081, 1114, 1129, 1130, 1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161,
			1180, 1181, 1203, 1205, 1213, 1226, 1317, 1927, 3024:
			// Disk full, out of memory, too many connections, access denied, unknown
			// database, shutdown, network errors, lock waits, deadlocks, interrupted or
			// timed-out queries: trouble with the server, not with the SQL.
			return false
		}
		return true
	default:
		var se *sqlite.Error
		if !errors.As(err, &se) {
			return false
		}
		switch se.Code() & 0xff { // the primary result code
		case 1, // SQLITE_ERROR: syntax, no such table or column, ...
			8,  // SQLITE_READONLY: the query tried to write
			18, // SQLITE_TOOBIG
			19, // SQLITE_CONSTRAINT
			20, // SQLITE_MISMATCH
			sqliteAuth,
			25: // SQLITE_RANGE: a parameter index out of range
			return true
		}
		return false
	}
}

// sqliteAuth is SQLITE_AUTH, the result code of a statement the authorizer denied.
const sqliteAuth = 23

// colSpec is how one result column is typed and how its values are converted.
type colSpec struct {
	typ Type
	// float32 marks a single-precision column: its values are rounded to the shortest
	// decimal that reads back as the same float32, so 1.1 stays 1.1 and not 1.100000023841858.
	float32 bool
	// bits marks a MySQL BIT column, whose values come as big-endian bytes.
	bits bool
}

// column types a result column from what the driver reports. known is false for a
// SQLite column whose declared type says nothing; it is typed from its first value.
func (d sqlDialect) column(ct *sql.ColumnType, length int64) (spec colSpec, known bool) {
	name := strings.ToUpper(ct.DatabaseTypeName())
	switch d {
	case postgresDialect:
		switch name {
		case "INT2", "INT4", "INT8", "OID", "XID", "CID":
			return colSpec{typ: TypeInt}, true
		case "FLOAT4":
			return colSpec{typ: TypeNumber, float32: true}, true
		case "FLOAT8", "NUMERIC":
			return colSpec{typ: TypeNumber}, true
		case "DATE":
			return colSpec{typ: TypeDate}, true
		case "TIMESTAMP", "TIMESTAMPTZ":
			return colSpec{typ: TypeDatetime}, true
		case "BOOL":
			return colSpec{typ: TypeBool}, true
		}
		return colSpec{typ: TypeText}, true
	case mysqlDialect:
		base := strings.TrimPrefix(name, "UNSIGNED ")
		switch base {
		case "TINYINT":
			// BOOLEAN is TINYINT(1) in MySQL and MariaDB.
			if length == 1 {
				return colSpec{typ: TypeBool}, true
			}
			return colSpec{typ: TypeInt}, true
		case "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
			return colSpec{typ: TypeInt}, true
		case "BIT":
			if length == 1 {
				return colSpec{typ: TypeBool, bits: true}, true
			}
			return colSpec{typ: TypeInt, bits: true}, true
		case "FLOAT":
			return colSpec{typ: TypeNumber, float32: true}, true
		case "DOUBLE", "DECIMAL":
			return colSpec{typ: TypeNumber}, true
		case "DATE":
			return colSpec{typ: TypeDate}, true
		case "DATETIME", "TIMESTAMP":
			return colSpec{typ: TypeDatetime}, true
		}
		return colSpec{typ: TypeText}, true
	default:
		// SQLite: the declared type, read like SQLite's affinity rules, with the names
		// people use for booleans and dates, which SQLite stores as integers or text.
		base, _, _ := strings.Cut(name, "(")
		base = strings.TrimSpace(base)
		switch {
		case base == "":
			return colSpec{}, false
		case base == "BOOL" || base == "BOOLEAN":
			return colSpec{typ: TypeBool}, true
		case base == "DATE":
			return colSpec{typ: TypeDate}, true
		case base == "DATETIME" || strings.Contains(base, "TIMESTAMP"):
			return colSpec{typ: TypeDatetime}, true
		case strings.Contains(base, "INT"):
			return colSpec{typ: TypeInt}, true
		case strings.Contains(base, "CHAR"), strings.Contains(base, "CLOB"), strings.Contains(base, "TEXT"):
			return colSpec{typ: TypeText}, true
		case strings.Contains(base, "REAL"), strings.Contains(base, "FLOA"), strings.Contains(base, "DOUB"),
			base == "NUMERIC", strings.HasPrefix(base, "DECIMAL"):
			return colSpec{typ: TypeNumber}, true
		}
		// BLOB, JSON, or any other name: look at the values.
		return colSpec{}, false
	}
}

// typeOfValue types a SQLite column from the first non-NULL value it holds. Text that
// is exactly a date or a date and time, as SQLite's date functions write them (max(day),
// date('now')), makes a date column.
func typeOfValue(v any) Type {
	switch v := v.(type) {
	case int64:
		return TypeInt
	case float64:
		return TypeNumber
	case bool:
		return TypeBool
	case time.Time:
		return TypeDatetime
	case string:
		if _, err := time.Parse(dateLayout, v); err == nil {
			return TypeDate
		}
		if _, err := time.Parse("2006-01-02 15:04:05", v); err == nil {
			return TypeDatetime
		}
	}
	return TypeText
}

// convert turns a scanned driver value into what a RowWriter takes for the column's
// type. A value that does not fit the type (SQLite lets any column hold anything) is
// passed on as it is, or as text, rather than failing the export.
//
// A value that is already what the writer takes is passed on in the interface it came
// in: converting it would make an equal value and box it again, an allocation per cell
// (issue 43). TestSQLConvertKeepsValues holds the two paths to the same values.
func (c colSpec) convert(v any) any {
	if c.keeps(v) {
		return v
	}
	return c.convertValue(v)
}

// keeps reports whether convertValue would return a value equal to v: v is already
// the column type's own, and normal (a datetime in UTC, a date at midnight UTC).
func (c colSpec) keeps(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case int64:
		return c.typ == TypeInt
	case float64:
		return c.typ == TypeNumber && !c.float32 && !math.IsNaN(x) && !math.IsInf(x, 0)
	case bool:
		return c.typ == TypeBool
	case string:
		return c.typ == TypeText
	case time.Time:
		if x.Location() != time.UTC || x.IsZero() {
			return false
		}
		switch c.typ {
		case TypeDatetime:
			return true
		case TypeDate:
			h, m, s := x.Clock()
			return h == 0 && m == 0 && s == 0 && x.Nanosecond() == 0
		}
	}
	return false
}

// convertValue is convert for any value.
func (c colSpec) convertValue(v any) any {
	if v == nil {
		return nil
	}
	if b, ok := v.([]byte); ok {
		if c.bits {
			return bitsValue(b, c.typ)
		}
		if c.typ == TypeText || !utf8.Valid(b) {
			return bytesText(b)
		}
		v = string(b) // MySQL sends numbers and dates as text in its text protocol
	}
	switch c.typ {
	case TypeInt:
		return intValue(v)
	case TypeNumber:
		return numberValue(v, c.float32)
	case TypeBool:
		return boolValue(v)
	case TypeDate, TypeDatetime:
		return timeValue(v, c.typ == TypeDate)
	}
	return v
}

// bytesText is b as text: binary data that is not UTF-8 is shown in hex.
func bytesText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "0x" + hex.EncodeToString(b)
}

// bitsValue decodes a MySQL BIT(n) value, big-endian.
func bitsValue(b []byte, t Type) any {
	if len(b) > 8 {
		return bytesText(b)
	}
	var buf [8]byte
	copy(buf[8-len(b):], b)
	n := binary.BigEndian.Uint64(buf[:])
	if t == TypeBool {
		return n != 0
	}
	return intValue(n)
}

func intValue(v any) any {
	switch v := v.(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case uint32:
		return int64(v)
	case uint16:
		return int64(v)
	case uint8:
		return int64(v)
	case uint64:
		if v > math.MaxInt64 {
			return strconv.FormatUint(v, 10) // BIGINT UNSIGNED beyond int64: keep every digit
		}
		return int64(v)
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		if _, err := strconv.ParseUint(v, 10, 64); err == nil {
			return v
		}
	}
	return v
}

func numberValue(v any, single bool) any {
	var f float64
	switch v := v.(type) {
	case float64:
		f = v
	case float32:
		f, single = float64(v), true
	case int64:
		f = float64(v)
	case string:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return v
		}
		f = x
	default:
		return v
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// A spreadsheet number cannot hold them; PostgreSQL's numeric and float can.
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if single {
		f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
	}
	return f
}

func boolValue(v any) any {
	switch v := v.(type) {
	case bool:
		return v
	case int64:
		return v != 0
	case string:
		switch strings.ToLower(v) {
		case "1", "t", "true":
			return true
		case "0", "f", "false":
			return false
		}
	}
	return intValue(v)
}

// timeLayouts are the text forms a date or time is read from (SQLite keeps them as text).
var timeLayouts = []string{
	dateLayout,
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	time.RFC3339Nano,
	"2006-01-02 15:04",
	"2006-01-02T15:04",
}

// timeValue normalises a date or time: datetimes to UTC, dates to midnight UTC of
// their own calendar day, whatever zone the driver put them in. The zero time is
// MySQL's 0000-00-00, which means no date: NULL.
func timeValue(v any, dateOnly bool) any {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case string:
		s := strings.TrimSpace(v)
		ok := false
		for _, layout := range timeLayouts {
			if p, err := time.Parse(layout, s); err == nil {
				t, ok = p, true
				break
			}
		}
		if !ok {
			return v // 'infinity', or text that is no date
		}
	default:
		return v
	}
	if t.IsZero() {
		return nil
	}
	if dateOnly {
		y, m, d := t.Date()
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	return t.UTC()
}

// columnLengths returns the declared lengths of a MySQL result's columns, which tell
// TINYINT(1) (BOOLEAN) and BIT(1) apart, or zeros. The driver keeps them but does not
// export them (its ColumnTypeLength is commented out), so they are read by reflection;
// if either package's internals change, every length reads 0 and such columns come out
// as numbers, which the MySQL tests notice.
func columnLengths(rows *sql.Rows, d sqlDialect, n int) []int64 {
	out := make([]int64, n)
	if d != mysqlDialect {
		return out
	}
	defer func() { _ = recover() }() // reflection on internals: a surprise is no crash
	rv := reflect.ValueOf(rows).Elem().FieldByName("rowsi")
	for rv.IsValid() && (rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer) {
		rv = rv.Elem()
	}
	if !rv.IsValid() || rv.Kind() != reflect.Struct {
		return out
	}
	// textRows and binaryRows embed mysqlRows, whose rs.columns are the fields.
	cols := rv.FieldByName("rs").FieldByName("columns")
	if !cols.IsValid() || cols.Kind() != reflect.Slice || cols.Len() != n {
		return out
	}
	for i := range n {
		if l := cols.Index(i).FieldByName("length"); l.IsValid() && l.CanUint() {
			out[i] = int64(l.Uint())
		}
	}
	return out
}
