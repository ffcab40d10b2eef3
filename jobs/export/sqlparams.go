package export

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
)

// PlaceholderStyle is how a database driver spells positional placeholders.
type PlaceholderStyle int

// Placeholder styles.
const (
	QuestionMarks PlaceholderStyle = iota // ?  (sqlite, mysql)
	DollarNumbers                         // $1 (postgres)
)

// Placeholder is one named parameter a query uses.
type Placeholder struct {
	Name string
	Line int // 1-based line of the first use
}

// Placeholders returns the distinct :names used in query, in order of first use, with
// the 1-based line of first use. Names inside strings, quoted identifiers, comments and
// dollar-quoted strings do not count, nor do :: casts or :=.
func Placeholders(query string) []Placeholder {
	var out []Placeholder
	seen := map[string]bool{}
	for tok := range sqlTokens(query) {
		if tok.kind != tokNamed {
			continue
		}
		name := query[tok.start+1 : tok.end]
		if !seen[name] {
			seen[name] = true
			out = append(out, Placeholder{Name: name, Line: tok.line})
		}
	}
	return out
}

// BindNamed rewrites :name placeholders in query to positional ones and returns the
// args in order. Unknown names are an error. A name used twice binds twice: each use
// gets its own ? or $n, so the args repeat the value; separate $n also let PostgreSQL
// infer a type per use. A query that already holds the style's own positional
// placeholders (? or $1) is refused, since its args could not be told apart.
func BindNamed(query string, style PlaceholderStyle, params map[string]any) (string, []any, error) {
	if style != QuestionMarks && style != DollarNumbers {
		return "", nil, fmt.Errorf("bind named: unknown placeholder style %d", style)
	}
	var (
		b    strings.Builder
		args []any
		last int // end of what has been copied to b
	)
	b.Grow(len(query) + 8)
	for tok := range sqlTokens(query) {
		switch tok.kind {
		case tokQuestion:
			if style == QuestionMarks {
				return "", nil, fmt.Errorf("bind named: line %d: positional placeholder ?; use :name", tok.line)
			}
		case tokDollarNum:
			if style == DollarNumbers {
				return "", nil, fmt.Errorf("bind named: line %d: positional placeholder %s; use :name", tok.line, query[tok.start:tok.end])
			}
		case tokNamed:
			name := query[tok.start+1 : tok.end]
			v, ok := params[name]
			if !ok {
				return "", nil, fmt.Errorf("bind named: line %d: unknown parameter :%s", tok.line, name)
			}
			b.WriteString(query[last:tok.start])
			args = append(args, v)
			if style == QuestionMarks {
				b.WriteByte('?')
			} else {
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(len(args)))
			}
			last = tok.end
		}
	}
	if args == nil {
		return query, nil, nil
	}
	b.WriteString(query[last:])
	return b.String(), args, nil
}

// tokKind classifies a stretch of SQL for the scanner.
type tokKind int

const (
	tokText         tokKind = iota // anything else, including whitespace
	tokNamed                       // :name
	tokQuestion                    // ?
	tokDollarNum                   // $1
	tokSemicolon                   // ;
	tokLineComment                 // -- to the end of the line (newline excluded)
	tokBlockComment                // /* ... */
	tokQuoted                      // '...', E'...', "...", `...`, $tag$...$tag$
)

// sqlToken is one stretch of a query: query[start:end], starting on line (1-based).
type sqlToken struct {
	kind       tokKind
	start, end int
	line       int
	// unterminated marks a quoted string or block comment that runs to the end.
	unterminated bool
}

// sqlTokens scans query into tokens that together cover it exactly. It knows just
// enough SQL to find placeholders and statement ends: quotes and comments of SQLite,
// PostgreSQL and MySQL. Block comments do not nest (as in SQLite and MySQL), and
// backslash escapes are honoured only in PostgreSQL's E'...' strings.
func sqlTokens(query string) iter.Seq[sqlToken] {
	return func(yield func(sqlToken) bool) {
		var (
			line      = 1
			textStart = 0
			textLine  = 1
			i         = 0
		)
		// emit yields the pending text, then tok; it advances i and line past tok.
		emit := func(tok sqlToken) bool {
			if textStart < tok.start {
				if !yield(sqlToken{kind: tokText, start: textStart, end: tok.start, line: textLine}) {
					return false
				}
			}
			tok.line = line
			line += strings.Count(query[tok.start:tok.end], "\n")
			i, textStart, textLine = tok.end, tok.end, line
			return yield(tok)
		}
		for i < len(query) {
			c := query[i]
			var tok sqlToken
			switch {
			case c == '\n':
				line++
				i++
				continue
			case c == '\'':
				// E'...' takes backslash escapes, unless the E ends a word or a named
				// placeholder (:E'...' is the placeholder :E, then a plain string, and must
				// lex the same after :E becomes $1).
				esc := i > 0 && (query[i-1] == 'e' || query[i-1] == 'E') &&
					(i < 2 || !isIdentByte(query[i-2]) && query[i-2] != ':')
				end, ok := quotedEnd(query, i, '\'', esc)
				tok = sqlToken{kind: tokQuoted, start: i, end: end, unterminated: !ok}
			case c == '"' || c == '`':
				end, ok := quotedEnd(query, i, c, false)
				tok = sqlToken{kind: tokQuoted, start: i, end: end, unterminated: !ok}
			case c == '-' && strings.HasPrefix(query[i:], "--"):
				end := strings.IndexByte(query[i:], '\n')
				if end < 0 {
					end = len(query) - i
				}
				tok = sqlToken{kind: tokLineComment, start: i, end: i + end}
			case c == '/' && strings.HasPrefix(query[i:], "/*"):
				end := strings.Index(query[i+2:], "*/")
				if end < 0 {
					tok = sqlToken{kind: tokBlockComment, start: i, end: len(query), unterminated: true}
				} else {
					tok = sqlToken{kind: tokBlockComment, start: i, end: i + 2 + end + 2}
				}
			case c == '$' && (i == 0 || !isIdentByte(query[i-1])):
				if j := i + 1; j < len(query) && isDigit(query[j]) {
					for j < len(query) && isDigit(query[j]) {
						j++
					}
					tok = sqlToken{kind: tokDollarNum, start: i, end: j}
					break
				}
				tag, ok := dollarTag(query[i:])
				if !ok {
					i++
					continue
				}
				end := strings.Index(query[i+len(tag):], tag)
				if end < 0 {
					tok = sqlToken{kind: tokQuoted, start: i, end: len(query), unterminated: true}
				} else {
					tok = sqlToken{kind: tokQuoted, start: i, end: i + len(tag) + end + len(tag)}
				}
			case c == ':':
				if strings.HasPrefix(query[i:], "::") {
					// A cast (created_at::date): the type name after it is not a parameter.
					i += 2
					continue
				}
				// A name glued to what precedes it (a:b, $:x, ?:x) is not a placeholder:
				// after rewriting, a$1 would read as one identifier in PostgreSQL, and
				// :a:b would become ?:b with a new placeholder in it. The name runs over
				// every byte an identifier may hold ($ and non-ASCII too), so that what
				// follows a rewritten placeholder never joins it; such a name is unknown.
				if i+1 < len(query) && (isIdentStart(query[i+1]) || query[i+1] >= 0x80) &&
					(i == 0 || !isIdentByte(query[i-1]) && query[i-1] != '?') {
					j := i + 2
					for j < len(query) && isIdentByte(query[j]) {
						j++
					}
					tok = sqlToken{kind: tokNamed, start: i, end: j}
					break
				}
				i++
				continue
			case c == '?':
				tok = sqlToken{kind: tokQuestion, start: i, end: i + 1}
			case c == ';':
				tok = sqlToken{kind: tokSemicolon, start: i, end: i + 1}
			default:
				i++
				continue
			}
			if !emit(tok) {
				return
			}
		}
		if textStart < len(query) {
			yield(sqlToken{kind: tokText, start: textStart, end: len(query), line: textLine})
		}
	}
}

// quotedEnd returns the end of the quoted run opening at query[open] with quote q: a
// doubled quote stands for itself, and with esc a backslash escapes the next byte.
// ok is false when the quote is never closed; end is then len(query).
func quotedEnd(query string, open int, q byte, esc bool) (end int, ok bool) {
	for i := open + 1; i < len(query); i++ {
		switch query[i] {
		case '\\':
			if esc {
				i++
			}
		case q:
			if i+1 < len(query) && query[i+1] == q {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return len(query), false
}

// dollarTag returns the opening $tag$ (or $$) at the start of s.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[:j+1], true
		case j == 1 && !isIdentStart(c), j > 1 && !isIdentChar(c):
			return "", false
		}
	}
	return "", false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isIdentStart and isIdentChar spell a dollar quote's tag (ASCII only).
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// isIdentByte reports whether c may sit inside an SQL identifier, where PostgreSQL also
// allows $ and any non-ASCII letter: a $ or : right after one is part of that word.
func isIdentByte(c byte) bool { return isIdentChar(c) || c == '$' || c >= 0x80 }
