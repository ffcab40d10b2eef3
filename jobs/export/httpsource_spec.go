package export

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/itchyny/gojq"
)

// An HTTP report's lines (docs/reports-and-sources.md, "HTTP sources"):
//
//	-- request: GET orders?from={from}&limit=500
//	-- rows: .data[]
//	-- paginate: cursor .meta.next_cursor cursor
//
// The parser checks them when the report loads (reportfile.go) and the source parses
// them again from the job's spec when it runs, with these same functions, so that a
// job accepted under one sheetq reads its report the same way under the next.

// httpSpec is an HTTP report's request, rows and pagination.
type httpSpec struct {
	method string // GET or POST (without a body)
	target string // path and query relative to base_url, with {param} placeholders
	rows   *gojq.Code
	page   pagination
}

// pageStyle is how an API says where the next page is.
type pageStyle string

const (
	pageNone    pageStyle = ""         // one request
	pageLink    pageStyle = "link"     // the Link header's rel="next" (RFC 8288)
	pageNextURL pageStyle = "next_url" // a jq expression giving the next page's URL
	pageCursor  pageStyle = "cursor"   // a jq expression giving a cursor, sent in a query parameter
	pageNumber  pageStyle = "page"     // a page number in a query parameter, counted up
	pageOffset  pageStyle = "offset"   // a row offset in a query parameter, counted up by the rows received
)

// pagination is a report's paginate line.
type pagination struct {
	style pageStyle
	expr  *gojq.Code // next_url, cursor
	param string     // cursor, page, offset: the query parameter
}

// paginateSyntax is the form of a paginate line, for messages.
const paginateSyntax = "want one of: link; next_url <jq>; cursor <jq> <param>; page [<param>]; offset [<param>]"

var (
	// queryParamRe is what a pagination query parameter's name may be.
	queryParamRe = regexp.MustCompile(`^[A-Za-z0-9_.~\[\]-]{1,64}$`)
	// requestPlaceholderRe is a {param} in a request line.
	requestPlaceholderRe = regexp.MustCompile(`\{([^{}]*)\}`)
)

// maxJQ bounds a jq expression's length: a path into a page, not a program.
const maxJQ = 1024

// maxTarget bounds a request line's path and query.
const maxTarget = 2048

// compileJQ compiles a rows, next_url or cursor expression. The environment is empty
// ($ENV and env give {}): a report's author must not be able to copy the server's
// environment, where the sources' secrets are, into a file.
func compileJQ(expr string) (*gojq.Code, error) {
	if len(expr) > maxJQ {
		return nil, fmt.Errorf("is longer than %d characters", maxJQ)
	}
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("is not a jq expression: %v", err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, fmt.Errorf("does not compile: %v", err)
	}
	return code, nil
}

// requestPlaceholder is one {name} of a request line.
type requestPlaceholder struct {
	name       string
	start, end int  // the braces' offsets in the target
	inQuery    bool // after the ?: a query value, else a path segment
}

// parseRequest checks a request line, "METHOD path?query", against the report's params
// and returns its method and target. Every {name} must be a declared param; the path is
// relative to base_url.
func parseRequest(s string, params []Param) (method, target string, err error) {
	s = strings.TrimSpace(s)
	method, target = s, ""
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		method, target = s[:i], strings.TrimSpace(s[i:])
	}
	switch {
	case method != "GET" && method != "POST":
		if up := strings.ToUpper(method); up == "GET" || up == "POST" {
			return "", "", fmt.Errorf("write the method in capitals: %s", up)
		}
		return "", "", fmt.Errorf("method %q: want GET or POST (sent without a body); want: request: GET <path>?<query>", method)
	case target == "":
		return "", "", errors.New("missing path after the method; want: request: GET <path>?<query>")
	case strings.ContainsFunc(target, unicode.IsSpace):
		return "", "", fmt.Errorf("unexpected %q after the path (a space in a path or value is written %%20)", target[strings.IndexFunc(target, unicode.IsSpace):])
	case len(target) > maxTarget:
		return "", "", fmt.Errorf("the path and query are longer than %d characters", maxTarget)
	}
	phs, err := requestPlaceholders(target)
	if err != nil {
		return "", "", err
	}
	for _, ph := range phs {
		if !slices.ContainsFunc(params, func(p Param) bool { return p.Name == ph.name }) {
			if !paramNameRe.MatchString(ph.name) {
				return "", "", fmt.Errorf("unknown parameter {%s} (param names are lowercase letters, digits and _)", ph.name)
			}
			return "", "", fmt.Errorf("unknown parameter {%s} (declare it with \"-- param: %s <type>\")", ph.name, ph.name)
		}
	}
	// The target with every placeholder filled must be a relative reference that stays
	// on base_url's host: no scheme, no //host, no leading /.
	u, err := url.Parse(requestPlaceholderRe.ReplaceAllString(target, "x"))
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%q is not a URL path: %v", target, errors.Unwrap(err))
	case u.Scheme != "" || u.Host != "" || strings.HasPrefix(target, "//"):
		return "", "", fmt.Errorf("%q must be a path relative to the source's base_url, not a whole URL", target)
	case strings.HasPrefix(target, "/"):
		return "", "", fmt.Errorf("%q must be relative to the source's base_url: leave out the leading /", target)
	case u.Fragment != "" || strings.Contains(target, "#"):
		return "", "", fmt.Errorf("%q: a request has no #fragment", target)
	case slices.Contains(strings.Split(u.Path, "/"), ".."):
		return "", "", fmt.Errorf("%q must stay under the source's base_url: no .. in the path", target)
	}
	return method, target, nil
}

// requestPlaceholders finds the {name}s of a target. A brace that does not make one is
// an error: URLs have no braces of their own.
func requestPlaceholders(target string) ([]requestPlaceholder, error) {
	var out []requestPlaceholder
	query := strings.IndexByte(target, '?')
	rest := requestPlaceholderRe.ReplaceAllString(target, "")
	if strings.ContainsAny(rest, "{}") {
		return nil, fmt.Errorf("%q has a { without } (or a } without {); a parameter is written {name}", target)
	}
	for _, m := range requestPlaceholderRe.FindAllStringSubmatchIndex(target, -1) {
		name := target[m[2]:m[3]]
		if name == "" {
			return nil, errors.New("an empty {} names no parameter")
		}
		out = append(out, requestPlaceholder{name: name, start: m[0], end: m[1], inQuery: query >= 0 && m[0] > query})
	}
	return out, nil
}

// fillTarget is target with each {name} replaced by its parameter's value, escaped for
// where it stands: a path segment (url.PathEscape, so a / in a value stays inside its
// segment) or a query value (url.QueryEscape).
func fillTarget(target string, params map[string]any) (string, error) {
	phs, err := requestPlaceholders(target)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, ph := range phs {
		v, ok := params[ph.name]
		if !ok {
			return "", fmt.Errorf("parameter %q has no value", ph.name)
		}
		text := paramText(v)
		b.WriteString(target[last:ph.start])
		if ph.inQuery {
			b.WriteString(url.QueryEscape(text))
		} else {
			// A whole segment of . or .. would climb out of the path the report names.
			if text == "." || text == ".." {
				return "", &ParamError{Param: ph.name, Message: fmt.Sprintf("%q cannot stand in a URL path", text)}
			}
			b.WriteString(url.PathEscape(text))
		}
		last = ph.end
	}
	b.WriteString(target[last:])
	return b.String(), nil
}

// paramText is a canonical parameter value as text in a URL: integers in decimal,
// numbers in their shortest exact form without an exponent, true or false, and text,
// dates and datetimes as they are.
func paramText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// parsePaginate checks a paginate line and returns what it says.
func parsePaginate(s string) (pagination, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return pagination{}, errors.New(paginateSyntax)
	}
	style, rest := pageStyle(fields[0]), strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), fields[0]))
	p := pagination{style: style}
	switch style {
	case pageLink:
		if rest != "" {
			return pagination{}, fmt.Errorf("link takes nothing after it (the next page is in the Link header), not %q", rest)
		}
	case pageNextURL:
		if rest == "" {
			return pagination{}, errors.New("next_url needs a jq expression giving the next page's URL, as in: next_url .links.next")
		}
		code, err := compileJQ(rest)
		if err != nil {
			return pagination{}, fmt.Errorf("next_url: %q %v", rest, err)
		}
		p.expr = code
	case pageCursor:
		cut := strings.LastIndexFunc(rest, unicode.IsSpace)
		if cut < 0 {
			return pagination{}, errors.New("cursor needs a jq expression and the query parameter to send the cursor in, as in: cursor .meta.next_cursor cursor")
		}
		expr, param := strings.TrimSpace(rest[:cut]), rest[cut+1:]
		if !queryParamRe.MatchString(param) {
			return pagination{}, fmt.Errorf("cursor: the query parameter %q must be 1-64 letters, digits or _ . - ~ [ ]", param)
		}
		code, err := compileJQ(expr)
		if err != nil {
			return pagination{}, fmt.Errorf("cursor: %q %v", expr, err)
		}
		p.expr, p.param = code, param
	case pageNumber, pageOffset:
		p.param = string(style)
		switch {
		case len(fields) > 2:
			return pagination{}, fmt.Errorf("%s takes one query parameter, not %q", style, rest)
		case len(fields) == 2:
			p.param = fields[1]
		}
		if !queryParamRe.MatchString(p.param) {
			return pagination{}, fmt.Errorf("%s: the query parameter %q must be 1-64 letters, digits or _ . - ~ [ ]", style, p.param)
		}
	default:
		return pagination{}, fmt.Errorf("unknown style %q; %s", style, paginateSyntax)
	}
	return p, nil
}

// httpSpecOf parses r's HTTP lines. r was checked when it loaded, so an error here is
// a report changed by hand in a job's spec, or an older parser's mistake.
func httpSpecOf(r Report) (httpSpec, error) {
	if r.Request == "" {
		return httpSpec{}, fmt.Errorf("report %q has no request line (-- request: GET <path>), which an http source needs", r.ID)
	}
	method, target, err := parseRequest(r.Request, r.Params)
	if err != nil {
		return httpSpec{}, fmt.Errorf("report %q: request: %w", r.ID, err)
	}
	rows, err := compileJQ(r.Rows)
	if err != nil {
		return httpSpec{}, fmt.Errorf("report %q: rows: %q %w", r.ID, r.Rows, err)
	}
	spec := httpSpec{method: method, target: target, rows: rows}
	if r.Paginate != "" {
		if spec.page, err = parsePaginate(r.Paginate); err != nil {
			return httpSpec{}, fmt.Errorf("report %q: paginate: %w", r.ID, err)
		}
	}
	return spec, nil
}
