package export

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxReportSize is the largest report file accepted, in bytes.
const MaxReportSize = 1 << 20

// reportExt is the file name extension of report files.
const reportExt = ".sql"

// ParseError says where a report file is wrong and why.
type ParseError struct {
	File string
	Line int // 1-based; 0 when the error is about the whole file
	Msg  string
}

// Error reads like: reports/orders.sql:3: unknown key "titel" (or file: msg for line 0).
func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

var (
	reportIDRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	paramNameRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)
	sourceRe    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// headerKeyRe finds "key:" at the start of a comment's text; the colon must end the
	// line or be followed by a space, so that "-- see http://x" stays a comment.
	headerKeyRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*):(?:[ \t]|$)`)
	// keyLikeRe finds a word and a colon that headerKeyRe refuses: a space before the
	// colon, or no space after it ("title : x", "queue:heavy").
	keyLikeRe = regexp.MustCompile(`^([a-z]+)[ \t]*:`)
)

// headerKeys are the keys a report header knows, in the order the docs list them.
var headerKeys = []string{"title", "source", "param", "sheet", "count", "queue", "description", "column", "filename", "access", "resume",
	"request", "rows", "paginate", "encrypt"}

// resumeColumnRe is how a "-- resume:" column is written: a plain identifier, which
// the source quotes.
var resumeColumnRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// paramTypes are the parameter types in the order messages list them.
var paramTypes = []Type{TypeText, TypeInt, TypeNumber, TypeDate, TypeDatetime, TypeBool}

// IsQueueName reports whether s is written like a queue name: like a report id, 1-64
// lowercase letters, digits, _ or -, starting with a letter or digit. The report header
// ("-- queue:") and the config file ([queues.NAME]) share the rule.
func IsQueueName(s string) bool { return reportIDRe.MatchString(s) }

// ParseReport parses the report file at path, whose content is src. Errors are *ParseError.
// A queue header is checked only for its form; the catalog also checks that the
// config defines it (Catalog.SetQueues).
func ParseReport(path string, src []byte) (Report, error) {
	return parseReport(path, src, nil)
}

// parseReport is ParseReport; with queues set, a "-- queue:" line must name one of them.
func parseReport(path string, src []byte, queues map[string]bool) (Report, error) {
	p := reportParser{file: path, queues: queues}
	rep, ok := p.parse(src)
	if !ok {
		return Report{}, p.err
	}
	return rep, nil
}

// reportParser keeps the first error; the parse stops there.
type reportParser struct {
	file   string
	queues map[string]bool // the queues a report may name; nil: any
	err    *ParseError
}

func (p *reportParser) fail(line int, format string, args ...any) bool {
	p.err = &ParseError{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
	return false
}

// headerField tracks a single-valued header key.
type headerField struct {
	value string
	line  int // 0 while unset
}

func (p *reportParser) parse(src []byte) (Report, bool) {
	base := filepath.Base(p.file)
	id, ok := strings.CutSuffix(base, reportExt)
	switch {
	case !ok:
		return Report{}, p.fail(0, "report file name %q must end in %s", base, reportExt)
	case !reportIDRe.MatchString(id):
		return Report{}, p.fail(0, "report id %q (the file name) must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit", id)
	case len(src) > MaxReportSize:
		return Report{}, p.fail(0, "file is larger than %d bytes", MaxReportSize)
	}
	text := string(src)
	if bad := invalidUTF8(text); bad >= 0 {
		return Report{}, p.fail(1+strings.Count(text[:bad], "\n"), "invalid UTF-8")
	}
	text = strings.TrimPrefix(text, "\uFEFF") // a byte order mark some Windows editors add
	if strings.TrimSpace(text) == "" {
		return Report{}, p.fail(0, "file is empty")
	}

	// The header is the leading run of "--" lines and blank lines.
	var (
		title, source, sheet, count, queue, filename, acc, resume, encrypt headerField
		request, rows, paginate                                            headerField // an HTTP report's
		params                                                             []Param
		paramLines                                                         []int
		columns                                                            []ColumnSpec
		columnLines                                                        []int
		description                                                        []string
		bodyStart                                                          = len(text)
		bodyLine                                                           = 0
	)
	single := map[string]*headerField{"title": &title, "source": &source, "sheet": &sheet, "count": &count, "queue": &queue,
		"filename": &filename, "access": &acc, "resume": &resume, "request": &request, "rows": &rows, "paginate": &paginate,
		"encrypt": &encrypt}
	for off, n := 0, 1; off < len(text); n++ {
		end := strings.IndexByte(text[off:], '\n')
		next := len(text)
		if end >= 0 {
			end += off
			next = end + 1
		} else {
			end = len(text)
		}
		line := strings.TrimSpace(text[off:end])
		if line != "" && !strings.HasPrefix(line, "--") {
			bodyStart, bodyLine = off, n
			break
		}
		off = next
		if line == "" {
			continue
		}
		key, value, isKey, ok := p.headerLine(n, line)
		if !ok {
			return Report{}, false
		}
		switch {
		case !isKey:
			// A free comment.
		case key == "param":
			prm, ok := p.param(n, value)
			if !ok {
				return Report{}, false
			}
			if i := slices.IndexFunc(params, func(q Param) bool { return q.Name == prm.Name }); i >= 0 {
				return Report{}, p.fail(n, "param %q is already declared on line %d", prm.Name, paramLines[i])
			}
			params = append(params, prm)
			paramLines = append(paramLines, n)
		case key == "description":
			// Repeatable free text: each line adds a line.
			if hasControl(value) {
				return Report{}, p.fail(n, "description must be text, without control characters")
			}
			description = append(description, value)
		case key == "column":
			col, ok := p.column(n, value)
			if !ok {
				return Report{}, false
			}
			// Case-blind, since a line finds its column case-blind when no name is
			// exactly equal (columns.go): two such lines could not both apply.
			if i := slices.IndexFunc(columns, func(c ColumnSpec) bool { return strings.EqualFold(c.Name, col.Name) }); i >= 0 {
				return Report{}, p.fail(n, "duplicate column %q (first on line %d)", col.Name, columnLines[i])
			}
			columns = append(columns, col)
			columnLines = append(columnLines, n)
		default:
			f := single[key]
			if f.line != 0 {
				return Report{}, p.fail(n, "duplicate %s (first on line %d)", key, f.line)
			}
			*f = headerField{value: value, line: n}
			switch {
			case key == "title" && hasControl(value):
				return Report{}, p.fail(n, "title must be text, without control characters")
			case key == "source" && !sourceRe.MatchString(value):
				return Report{}, p.fail(n, "source %q must be a source name from the config: letters, digits, _ or -", value)
			case key == "encrypt" && value != "required" && value != "optional":
				return Report{}, p.fail(n, "encrypt must be required (files only with a password) or optional, not %q", value)
			case key == "count" && value != "true" && value != "false":
				return Report{}, p.fail(n, "count must be true or false, not %q", value)
			case key == "resume" && !resumeColumnRe.MatchString(value):
				return Report{}, p.fail(n, "resume %q must name one column the query returns and orders by: letters, digits and _, not starting with a digit", value)
			case key == "queue" && !IsQueueName(value):
				return Report{}, p.fail(n, "queue %q must be a queue name: 1-64 lowercase letters, digits, _ or -, starting with a letter or digit", value)
			case key == "queue" && p.queues != nil && !p.queues[value]:
				return Report{}, p.fail(n, "queue %q is not defined: add [queues.%s] to the config file, or name one of %s",
					value, value, strings.Join(slices.Sorted(maps.Keys(p.queues)), ", "))
			case key == "rows":
				if _, err := compileJQ(value); err != nil {
					return Report{}, p.fail(n, "rows: %q %v", value, err)
				}
			case key == "paginate":
				if _, err := parsePaginate(value); err != nil {
					return Report{}, p.fail(n, "paginate: %v", err)
				}
			}
		}
	}
	// An HTTP report ("-- request:") has its rows and pagination in the header and no
	// SQL; the other reports have SQL and none of the HTTP lines.
	var query string
	used := map[string]bool{}
	if request.line != 0 {
		switch {
		case bodyStart < len(text):
			return Report{}, p.fail(bodyLine, "an HTTP report (-- request: on line %d) takes no SQL: remove the lines from here on", request.line)
		case rows.line == 0:
			return Report{}, p.fail(request.line, `an HTTP report needs "-- rows: <jq expression>", the rows of each page, such as .data[]`)
		case count.value == "true":
			return Report{}, p.fail(count.line, "count: an HTTP report cannot count its rows before it reads them; leave the line out")
		case resume.line != 0:
			return Report{}, p.fail(resume.line, "resume: an HTTP report resumes from the page it stopped in without it; leave the line out")
		}
		// Checked here, after the params, which may be declared below it.
		if _, _, err := parseRequest(request.value, params); err != nil {
			return Report{}, p.fail(request.line, "request: %v", err)
		}
		phs, _ := requestPlaceholders(request.value)
		for _, ph := range phs {
			used[ph.name] = true
		}
	} else {
		for _, f := range []*headerField{&rows, &paginate} {
			if f.line != 0 {
				key := "rows"
				if f == &paginate {
					key = "paginate"
				}
				return Report{}, p.fail(f.line, `%s: only an HTTP report has this line; add "-- request: GET <path>" (its source being an http one)`, key)
			}
		}
		// The body comes before the missing-source check: a header line stranded below
		// the SQL (say after a /* */ comment) is the likelier mistake and the clearer
		// message.
		if query, ok = p.body(text[bodyStart:], bodyLine); !ok {
			return Report{}, false
		}
	}
	if source.line == 0 {
		return Report{}, p.fail(0, `missing "-- source: NAME" in the header`)
	}

	// Every placeholder is declared and every declared param is used: a typo on either
	// side would otherwise show up only when the query runs.
	for _, ph := range Placeholders(query) {
		used[ph.Name] = true
		switch {
		case slices.ContainsFunc(params, func(q Param) bool { return q.Name == ph.Name }):
		case !paramNameRe.MatchString(ph.Name):
			return Report{}, p.fail(bodyLine+ph.Line-1, "unknown parameter :%s (param names are lowercase letters, digits and _)", ph.Name)
		default:
			return Report{}, p.fail(bodyLine+ph.Line-1, "unknown parameter :%s (declare it with \"-- param: %s <type>\")", ph.Name, ph.Name)
		}
	}
	for i, prm := range params {
		if prm.After == "" {
			continue
		}
		j := slices.IndexFunc(params, func(q Param) bool { return q.Name == prm.After })
		switch circle := afterCircle(params, i); {
		case j < 0:
			return Report{}, p.fail(paramLines[i], "param %q: after=%s names no declared parameter", prm.Name, prm.After)
		case params[j].Type != prm.Type:
			return Report{}, p.fail(paramLines[i], "param %q: after=%s compares a %s with a %s; both must have one type", prm.Name, prm.After, prm.Type, params[j].Type)
		case circle != "":
			return Report{}, p.fail(paramLines[i], "param %q: after= goes round in a circle (%s), which no values can keep", prm.Name, circle)
		case prm.Default != nil && params[j].Default != nil:
			if err := checkAfter(params, map[string]any{prm.Name: prm.Default, prm.After: params[j].Default}); err != nil {
				return Report{}, p.fail(paramLines[i], "param %q: its default %s", prm.Name, err.(*ParamError).Message)
			}
		}
	}
	for i, prm := range params {
		switch {
		case used[prm.Name]:
		case request.line != 0:
			return Report{}, p.fail(paramLines[i], "param %q is not used in the request (no {%s})", prm.Name, prm.Name)
		default:
			return Report{}, p.fail(paramLines[i], "param %q is not used in the query (no :%s)", prm.Name, prm.Name)
		}
	}
	// Checked after the params, which may be declared below it.
	if filename.line != 0 {
		if _, msg := parseFilename(filename.value, params, false); msg != "" {
			return Report{}, p.fail(filename.line, "%s", msg)
		}
	}

	var groups []string
	if acc.line != 0 {
		if groups, ok = p.access(acc.line, acc.value); !ok {
			return Report{}, false
		}
	}

	rep := Report{
		Access:      groups,
		Description: strings.Join(description, "\n"),
		ID:          id,
		Title:       cmp.Or(title.value, id),
		Source:      source.value,
		Params:      params,
		Query:       query,
		Count:       count.value == "true",
		Queue:       queue.value,
		Columns:     columns,
		Filename:    filename.value,
		Resume:      resume.value,
		File:        p.file,
		Request:     request.value,
		Rows:        rows.value,
		Paginate:    paginate.value,
		Encrypt:     encrypt.value == "required",
	}
	rep.Sheet = cmp.Or(sheet.value, rep.Title)
	if rep.Params == nil {
		rep.Params = []Param{}
	}
	return rep, true
}

// afterCircle returns the chain of after= that leads from params[i] back to it, as
// "a after b after a", or "" when there is none: every value would have to be greater
// than itself, so the report could never run.
func afterCircle(params []Param, i int) string {
	chain := []string{params[i].Name}
	for k := i; len(chain) <= len(params); {
		k = slices.IndexFunc(params, func(q Param) bool { return q.Name == params[k].After })
		if k < 0 {
			return ""
		}
		chain = append(chain, params[k].Name)
		if k == i {
			return strings.Join(chain, " after ")
		}
	}
	return ""
}

// invalidUTF8 returns the offset of the first byte of s that is not UTF-8, or -1.
func invalidUTF8(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// commentKey finds the "key: value" in a "--" comment. A key is a word of ASCII letters,
// digits and _ right after the dashes, followed by a colon and then a space or the end.
func commentKey(comment string) (key, value string, ok bool) {
	text := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(comment), "--"))
	m := headerKeyRe.FindStringSubmatch(text)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.TrimSpace(text[len(m[0]):]), true
}

// headerLine splits one header line into key and value; isKey is false for a free
// comment. Lowercase words are keys, so an unknown one is a typo to report, while
// "-- Note: ..." stays a comment; a known key in another case is reported too.
func (p *reportParser) headerLine(n int, line string) (key, value string, isKey, ok bool) {
	key, value, found := commentKey(line)
	if !found {
		// A known key written another way would be a comment, and the line it was
		// meant to be would be lost without a word ("-- queue:heavy" runs in exports).
		if m := keyLikeRe.FindStringSubmatch(strings.TrimSpace(strings.TrimPrefix(line, "--"))); m != nil && slices.Contains(headerKeys, m[1]) {
			return "", "", false, p.fail(n, "key %q: write \"-- %s: VALUE\", with the colon right after the key and a space after it", m[1], m[1])
		}
		return "", "", false, true
	}
	if !slices.Contains(headerKeys, key) {
		if lower := strings.ToLower(key); slices.Contains(headerKeys, lower) {
			return "", "", false, p.fail(n, "key %q must be lowercase: %s", key, lower)
		}
		if key != strings.ToLower(key) {
			return "", "", false, true
		}
		return "", "", false, p.fail(n, "unknown key %q (known keys: %s; a free comment must not start with a lowercase \"word:\")",
			key, strings.Join(headerKeys, ", "))
	}
	if value == "" {
		return "", "", false, p.fail(n, "%s: missing value", key)
	}
	return key, value, true, true
}

// param parses a param declaration: <name> <type> ["Label"] [= default].
func (p *reportParser) param(n int, s string) (Param, bool) {
	const syntax = `want: param: <name> <type> ["Label"] [after=<param>] [from=person.<attribute>] [= default]`
	name, rest := headerWord(s)
	if name == "" {
		return Param{}, p.fail(n, "param: missing name; %s", syntax)
	}
	if !paramNameRe.MatchString(name) {
		return Param{}, p.fail(n, "param name %q must be lowercase letters, digits and _, not starting with a digit (at most 64)", name)
	}
	typ, rest := headerWord(rest)
	types := make([]string, len(paramTypes))
	for i, t := range paramTypes {
		types[i] = string(t)
	}
	if typ == "" {
		return Param{}, p.fail(n, "param %q: missing type (one of %s); %s", name, strings.Join(types, ", "), syntax)
	}
	if !slices.Contains(types, typ) {
		return Param{}, p.fail(n, "param %q: unknown type %q (want one of %s)", name, typ, strings.Join(types, ", "))
	}
	prm := Param{Name: name, Type: Type(typ)}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return Param{}, p.fail(n, "param %q: label is not a valid quoted string", name)
		}
		prm.Label, _ = strconv.Unquote(q)
		if !utf8.ValidString(prm.Label) || strings.ContainsFunc(prm.Label, unicode.IsControl) {
			return Param{}, p.fail(n, "param %q: the label must be one line of text, without control characters", name)
		}
		rest = strings.TrimSpace(rest[len(q):])
	}
	// Options, before the default: after=<param>.
	for rest != "" && !strings.HasPrefix(rest, "=") {
		word := rest
		if end := strings.IndexAny(rest, " \t"); end >= 0 {
			word = rest[:end]
		}
		rest = strings.TrimSpace(rest[len(word):])
		if attr, ok := strings.CutPrefix(word, "from="); ok {
			attr, ok = strings.CutPrefix(attr, "person.")
			switch {
			case prm.From != "":
				return Param{}, p.fail(n, "param %q: from= is given twice", name)
			case !ok || !attrNameRe.MatchString(attr):
				return Param{}, p.fail(n, "param %q: from= must be person.<attribute>, the attribute being letters, digits, _, -, . or : (at most 64)", name)
			}
			prm.From = attr
			continue
		}
		other, ok := strings.CutPrefix(word, "after=")
		if !ok {
			return Param{}, p.fail(n, "param %q: unexpected %q; %s", name, word, syntax)
		}
		switch {
		case prm.After != "":
			return Param{}, p.fail(n, "param %q: after= is given twice", name)
		case !paramNameRe.MatchString(other):
			return Param{}, p.fail(n, "param %q: after=%s must name another parameter", name, other)
		case other == name:
			return Param{}, p.fail(n, "param %q: after= names the parameter itself", name)
		case !orderable(prm.Type):
			return Param{}, p.fail(n, "param %q: after= needs an int, number, date or datetime parameter, not %s", name, prm.Type)
		}
		prm.After = other
	}
	if rest == "" {
		return prm, true
	}
	if prm.From != "" {
		return Param{}, p.fail(n, "param %q: a parameter set from=person.%s takes no default: a person without the attribute cannot run the report", name, prm.From)
	}
	def, ok := strings.CutPrefix(rest, "=")
	if !ok {
		return Param{}, p.fail(n, "param %q: unexpected %q; %s", name, rest, syntax)
	}
	def = strings.TrimSpace(def)
	if def == "" {
		return Param{}, p.fail(n, "param %q: missing default after =", name)
	}
	if strings.HasPrefix(def, `"`) {
		q, err := strconv.QuotedPrefix(def)
		if err != nil {
			return Param{}, p.fail(n, "param %q: default is not a valid quoted string", name)
		}
		if after := strings.TrimSpace(def[len(q):]); after != "" {
			return Param{}, p.fail(n, "param %q: unexpected %q after the default", name, after)
		}
		def, _ = strconv.Unquote(q)
		if !utf8.ValidString(def) {
			return Param{}, p.fail(n, "param %q: default is not valid UTF-8", name)
		}
	}
	// The default goes through the same conversion as a sent value and is kept in
	// canonical form, so the API shows it typed (1000, not "1000").
	prm.Default = def
	v, err := prm.normalize(nil)
	if err != nil {
		return Param{}, p.fail(n, "param %q: default %q %s", name, def, err)
	}
	prm.Default = v
	return prm, true
}

// attrNameRe is the syntax of the attribute a from=person.<attribute> parameter reads:
// a claim's name, such as "region", "custom:region" or "ext.cost_center".
var attrNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$`)

// maxAccessGroups bounds the groups of one "-- access:" line.
const maxAccessGroups = 64

// access reads an "-- access: sales, finance" line: the groups whose members may see and
// run the report. A group's name is what the provider sends (a name, a path such as
// /sales, an object id), so anything printable but a comma goes.
func (p *reportParser) access(n int, s string) ([]string, bool) {
	var groups []string
	for _, g := range strings.Split(s, ",") {
		g = strings.TrimSpace(g)
		switch {
		case g == "":
			return nil, p.fail(n, "access: an empty group name; want: access: <group>[, <group>...]")
		case utf8.RuneCountInString(g) > 128 || hasControl(g):
			return nil, p.fail(n, "access: group %q must be at most 128 characters of text", g)
		case slices.ContainsFunc(groups, func(h string) bool { return strings.EqualFold(g, h) }):
			return nil, p.fail(n, "access: group %q is named twice", g)
		}
		groups = append(groups, g)
	}
	if len(groups) > maxAccessGroups {
		return nil, p.fail(n, "access: at most %d groups", maxAccessGroups)
	}
	return groups, true
}

// hasControl reports whether a header line's free text (a title, a description line)
// has a control character other than a tab: an escape sequence would reach the terminal
// of whoever lists the reports, and the pages would show what no one can see.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && unicode.IsControl(r) })
}

// columnSyntax is the form of a column line, for messages.
const columnSyntax = `want: column: <name> ["Label"] [<type>[(<format>)]]`

// maxLabel is the longest column label, in characters: a header, not a paragraph.
const maxLabel = 255

// maxFormat is the longest number format, in characters: Excel refuses longer codes.
const maxFormat = 255

// column parses a column line: <name> ["Label"] [<type>[(<format>)]]. The name is the
// column's name in the query's result, written without quotes or spaces.
func (p *reportParser) column(n int, s string) (ColumnSpec, bool) {
	end := strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '(' || r == ')' })
	if end < 0 {
		end = len(s)
	}
	col := ColumnSpec{Name: s[:end]}
	rest := strings.TrimSpace(s[end:])
	switch {
	case col.Name == "":
		return ColumnSpec{}, p.fail(n, "column: missing name; %s", columnSyntax)
	case utf8.RuneCountInString(col.Name) > 128:
		return ColumnSpec{}, p.fail(n, "column name %q is longer than 128 characters", shorten(col.Name, 40))
	}
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return ColumnSpec{}, p.fail(n, "column %q: the label is not a valid quoted string (close it with \", and write \\\" for a quote inside)", col.Name)
		}
		col.Label, _ = strconv.Unquote(q)
		switch {
		case col.Label == "":
			return ColumnSpec{}, p.fail(n, "column %q: the label is empty (leave it out to keep the name)", col.Name)
		case !utf8.ValidString(col.Label) || strings.ContainsFunc(col.Label, unicode.IsControl):
			return ColumnSpec{}, p.fail(n, "column %q: the label must be one line of text, without control characters", col.Name)
		case utf8.RuneCountInString(col.Label) > maxLabel:
			return ColumnSpec{}, p.fail(n, "column %q: the label is longer than %d characters", col.Name, maxLabel)
		}
		rest = strings.TrimSpace(rest[len(q):])
	}
	if rest == "" {
		return col, true
	}
	if rest[0] == '(' {
		return ColumnSpec{}, p.fail(n, "column %q: a format needs a type before it, as in number(#,##0.00); %s", col.Name, columnSyntax)
	}
	end = strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '(' })
	if end < 0 {
		end = len(rest)
	}
	typ := rest[:end]
	rest = strings.TrimSpace(rest[end:])
	types := make([]string, len(paramTypes))
	for i, t := range paramTypes {
		types[i] = string(t)
	}
	if !slices.Contains(types, typ) {
		return ColumnSpec{}, p.fail(n, "column %q: unknown type %q (want one of %s)", col.Name, typ, strings.Join(types, ", "))
	}
	col.Type = Type(typ)
	if rest == "" {
		return col, true
	}
	if rest[0] != '(' {
		if rest[0] == '"' {
			return ColumnSpec{}, p.fail(n, "column %q: the label comes before the type; %s", col.Name, columnSyntax)
		}
		return ColumnSpec{}, p.fail(n, "column %q: unexpected %q after the type; %s", col.Name, rest, columnSyntax)
	}
	format, after, msg := numberFormat(rest)
	switch {
	case msg != "":
		return ColumnSpec{}, p.fail(n, "column %q: format %s", col.Name, msg)
	case after != "":
		return ColumnSpec{}, p.fail(n, "column %q: unexpected %q after the format; %s", col.Name, after, columnSyntax)
	case strings.TrimSpace(format) == "":
		return ColumnSpec{}, p.fail(n, "column %q: the format is empty (leave out the brackets to keep the default)", col.Name)
	case utf8.RuneCountInString(format) > maxFormat:
		return ColumnSpec{}, p.fail(n, "column %q: the format is longer than %d characters, which Excel refuses", col.Name, maxFormat)
	}
	col.Format = format
	return col, true
}

// numberFormat reads the "(FORMAT)" that starts s and returns the format, what follows
// its closing bracket, or a message. An Excel format has brackets of its own, such as
// #,##0.00;(#,##0.00) and [Red][<0]0.0, and quoted or escaped text ("EUR " or \)), so
// round brackets nest, square ones pair, and brackets in quotes or after \ are text.
func numberFormat(s string) (format, after, msg string) {
	depth, square := 0, -1 // square: where an open [ is, or -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++ // the next character is text
		case '"':
			q := strings.IndexByte(s[i+1:], '"')
			if q < 0 {
				return "", "", "has an unterminated quoted text"
			}
			i += q + 1
		case '[':
			if square >= 0 {
				return "", "", "has a [ inside [ ]"
			}
			square = i
		case ']':
			if square < 0 {
				return "", "", "has a ] without ["
			}
			square = -1
		case '(':
			if square < 0 {
				depth++
			}
		case ')':
			if square >= 0 {
				continue
			}
			depth--
			if depth == 0 {
				return s[1:i], strings.TrimSpace(s[i+1:]), ""
			}
		}
	}
	if square >= 0 {
		return "", "", "has a [ without ]"
	}
	return "", "", "has unbalanced brackets: a ( without )"
}

// headerWord splits s into its first word (up to a space, a quote or =) and the rest.
func headerWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexAny(s, " \t\"=")
	if end < 0 {
		return s, ""
	}
	return s[:end], s[end:]
}

// body checks the SQL after the header, which starts on line bodyLine, and returns the
// query: one statement, without a trailing semicolon or trailing comments.
func (p *reportParser) body(body string, bodyLine int) (string, bool) {
	fileLine := func(tok sqlToken) int { return bodyLine + tok.line - 1 }
	var (
		end  int      // end of the last token that is SQL (not space, comment or ;)
		semi sqlToken // the first ; after SQL, if any
	)
	for tok := range sqlTokens(body) {
		if tok.unterminated {
			what := "string"
			switch {
			case tok.kind == tokBlockComment:
				what = "comment /*"
			case body[tok.start] == '"' || body[tok.start] == '`':
				what = "quoted identifier " + body[tok.start:tok.start+1]
			case body[tok.start] == '$':
				tag, _ := dollarTag(body[tok.start:])
				what = "dollar-quoted string " + tag
			}
			return "", p.fail(fileLine(tok), "unterminated %s", what)
		}
		switch tok.kind {
		case tokSemicolon:
			if semi.line == 0 && end > 0 {
				semi = tok
			}
			continue
		case tokLineComment:
			if lineStart := strings.LastIndexByte(body[:tok.start], '\n') + 1; strings.TrimSpace(body[lineStart:tok.start]) == "" {
				if key, _, ok := commentKey(body[tok.start:tok.end]); ok && slices.Contains(headerKeys, key) {
					return "", p.fail(fileLine(tok), "header line %q after the query started on line %d: move it above the SQL",
						"-- "+key+":", bodyLine)
				}
			}
			continue
		case tokBlockComment:
			continue
		case tokText:
			if strings.TrimSpace(body[tok.start:tok.end]) == "" {
				continue
			}
		}
		if semi.line != 0 {
			return "", p.fail(fileLine(semi), "a report holds one statement, but more SQL follows this ;")
		}
		end = tok.start + len(strings.TrimRightFunc(body[tok.start:tok.end], unicode.IsSpace))
	}
	if end == 0 {
		return "", p.fail(0, "no query after the header")
	}
	// A report that would write is refused when it loads rather than when it first runs;
	// the source refuses it again (readonly.go), since this reads the SQL only as text.
	if msg, line := readOnlyProblem(body[:end]); msg != "" {
		return "", p.fail(bodyLine+line-1, "%s", msg)
	}
	// The first line holds SQL, so trimming cannot shift the line numbers.
	return strings.TrimLeftFunc(body[:end], unicode.IsSpace), true
}
