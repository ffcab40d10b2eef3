package export

import (
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Report SQL only reads. Each source enforces that where the SQL runs: a SQLite
// connection (a sqlite or csv source) refuses at compile time, through its authorizer,
// every statement but reads, and may attach no database; PostgreSQL and MySQL run the
// report in a read-only transaction (and MySQL in a read-only session). The statement
// check below comes first, to give a clear message early (at load time for report
// files), but it reads the SQL only as text and is not what keeps a source safe.

// readKeywords are the words a report's SQL may start with: one query.
var readKeywords = []string{"SELECT", "WITH", "VALUES"}

// firstKeyword returns the first word of query's SQL, in upper case, skipping
// whitespace, comments and opening parentheses, and the line (from 1) it is on.
func firstKeyword(query string) (word string, line int) {
	for tok := range sqlTokens(query) {
		switch tok.kind {
		case tokLineComment, tokBlockComment:
			continue
		case tokText:
			text := query[tok.start:tok.end]
			rest := strings.TrimLeftFunc(text, func(r rune) bool { return unicode.IsSpace(r) || r == '(' })
			if rest == "" {
				continue
			}
			end := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' })
			if end < 0 {
				end = len(rest)
			}
			line := tok.line + strings.Count(text[:len(text)-len(rest)], "\n")
			if end == 0 { // a digit, an operator...: the character says enough
				_, size := utf8.DecodeRuneInString(rest)
				return rest[:size], line
			}
			return strings.ToUpper(rest[:end]), line
		}
		// A string, a placeholder or a ; before any keyword: no statement starts so.
		return query[tok.start : tok.start+1], tok.line
	}
	return "", 0
}

// readOnlyProblem says why query is not a single read, or returns "" if it may be one.
// It looks at the first keyword only: "WITH x AS (...) DELETE ..." passes here and is
// refused by the source.
func readOnlyProblem(query string) (msg string, line int) {
	word, line := firstKeyword(query)
	for _, k := range readKeywords {
		if word == k {
			return "", 0
		}
	}
	if word == "" {
		return "", 0 // no SQL at all: the caller says so
	}
	return fmt.Sprintf("a report may only read: its SQL must start with SELECT, WITH or VALUES, not %s", word), line
}

// mysqlFileRe finds what lets a MySQL query write a file on the database server (INTO
// OUTFILE, INTO DUMPFILE), which a read-only transaction does not stop, and executable
// comments (/*! ... */, MariaDB's /*M! ... */), whose text MySQL runs as SQL while
// every other reader skips it. The whole text is searched, strings included, so that
// no quoting trick hides the words; a report that merely mentions them is refused too.
var mysqlFileRe = regexp.MustCompile(`(?i)\b(?:outfile|dumpfile)\b|/\*M?!`)

// mysqlProblem is readOnlyProblem's addition for MySQL, or "".
func mysqlProblem(query string) string {
	m := mysqlFileRe.FindString(query)
	switch {
	case m == "":
		return ""
	case strings.HasPrefix(m, "/*"):
		return "a report may not hold MySQL executable comments (" + m + " ... */)"
	}
	return "a report may not write files on the server (INTO " + strings.ToUpper(m) + "), nor mention " + strings.ToUpper(m)
}

// readOnlySQLite makes conn, a connection of the modernc.org/sqlite driver, refuse
// everything but reading: its authorizer refuses at compile time, before anything runs,
// every statement that would write, change a setting or attach a database, and its
// limit of attached databases is 0, so that even an ATTACH that got past the authorizer
// could not open (and so create) a file. mode=ro and query_only already stop writes to
// the database, but not ATTACH, which creates the file it names.
func readOnlySQLite(conn *sql.Conn) error {
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_ATTACHED, 0); err != nil {
		return fmt.Errorf("limit attached databases: %w", err)
	}
	err := conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the SQLite driver offers no authorizer")
		}
		return r.RegisterAuthorizer(readOnlyAuthorizer)
	})
	if err != nil {
		return fmt.Errorf("install read-only authorizer: %w", err)
	}
	return nil
}

// readOnlyAuthorizer allows reading tables (and eponymous virtual tables such as
// json_each), calling functions, recursive queries, the BEGIN and ROLLBACK the driver
// sends, and the pragmas that only describe the schema, which a query reaches as
// pragma_table_info('t') and so on; everything else is denied.
func readOnlyAuthorizer(action sqlite.AuthorizerActionCode, arg1, _, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthFunction, sqlite.AuthRecursive, sqlite.AuthTransaction:
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		if schemaPragmas[strings.ToLower(arg1)] {
			return sqlite.AuthorizerOK
		}
	}
	return sqlite.AuthorizerDeny
}

// schemaPragmas are the pragmas that read the schema and change nothing, whatever
// their argument.
var schemaPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true, "index_info": true,
	"index_xinfo": true, "foreign_key_list": true, "database_list": true, "collation_list": true,
	"function_list": true, "module_list": true, "pragma_list": true, "compile_options": true,
}
