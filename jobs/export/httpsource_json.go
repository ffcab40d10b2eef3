package export

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"

	"sheetq/jobs"
)

// maxJSONDepth bounds the nesting of a page read in order, as encoding/json bounds its
// own: a page of [[[[... must fail, not exhaust the stack.
const maxJSONDepth = 10_000

// maxExactFloatInt is 2^53: above it, not every whole float64 is an integer the API sent.
const maxExactFloatInt = 1 << 53

// decodePage reads a page's JSON, numbers as json.Number so that large ids stay exact.
// With ordered, it also returns each object's keys in the order the page has them, by
// the object's map: the page that gives the columns their order is read this way.
// encoding/json forgets the order, so only that page pays for reading token by token.
func decodePage(body []byte, ordered bool) (any, map[uintptr][]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var (
		doc   any
		order map[uintptr][]string
		err   error
	)
	if ordered {
		od := orderedDecoder{dec: dec, order: map[uintptr][]string{}}
		doc, err = od.value(0)
		order = od.order
	} else {
		err = dec.Decode(&doc)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("the body is empty")
		}
		return nil, nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("more follows the JSON value")
	}
	return doc, order, nil
}

// orderedDecoder reads a JSON value as Decode into any would, and notes the order of
// each object's keys.
type orderedDecoder struct {
	dec   *json.Decoder
	order map[uintptr][]string
}

func (d *orderedDecoder) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tok, err := d.dec.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // nil, bool, json.Number or string
	}
	switch delim {
	case '{':
		m := map[string]any{}
		var keys []string
		for d.dec.More() {
			kt, err := d.dec.Token()
			if err != nil {
				return nil, err
			}
			key := kt.(string) // the decoder gives an object's keys as strings
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if _, dup := m[key]; !dup {
				keys = append(keys, key)
			}
			m[key] = v // the last of duplicates, as encoding/json keeps
		}
		if _, err := d.dec.Token(); err != nil { // }
			return nil, err
		}
		d.order[mapID(m)] = keys
		return m, nil
	case '[':
		a := []any{}
		for d.dec.More() {
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.dec.Token(); err != nil { // ]
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected %v", delim)
}

// mapID identifies a map while it lives: jq's path expressions (.data[]) give the
// page's own objects, so a row finds the order its object was read in.
func mapID(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// pageRows runs the rows expression on a page: every result must be an object.
func (st *httpStream) pageRows(ctx context.Context, doc any, page int64) ([]map[string]any, error) {
	var rows []map[string]any
	iter := st.spec.rows.RunWithContext(ctx, doc)
	for {
		v, ok := iter.Next()
		if !ok {
			return rows, nil
		}
		if err, isErr := v.(error); isErr {
			if ctx.Err() != nil {
				return nil, jobs.Retryable("canceled", fmt.Errorf("source %s: %w", st.src.name, ctx.Err()))
			}
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				return rows, nil
			}
			return nil, jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d: the rows expression %s fails on it: %v",
				st.src.name, page, st.q.Report.Rows, err))
		}
		m, isObject := v.(map[string]any)
		if !isObject {
			return nil, jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d: row %d is %s, not an object: the rows expression %s must give objects",
				st.src.name, page, len(rows)+1, jsonKind(v), st.q.Report.Rows))
		}
		rows = append(rows, m)
	}
}

// jsonKind names a JSON value's kind, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// inferColumns makes the columns from the first page that has rows: its rows' keys, in
// the order they first appear, each typed from the page's values (int when every value
// is an integer, number when some are not, bool, else text). A row that jq built
// rather than found has no recorded order: its new keys come in alphabetical order.
func inferColumns(rows []map[string]any, order map[uintptr][]string) []Column {
	var cols []Column
	index := map[string]int{}
	for _, m := range rows {
		keys, ok := order[mapID(m)]
		if !ok {
			keys = slices.Sorted(maps.Keys(m))
		}
		for _, k := range keys {
			if _, seen := index[k]; !seen {
				index[k] = len(cols)
				cols = append(cols, Column{Name: k})
			}
		}
	}
	var enc jsonText
	for i := range cols {
		var t Type
		for _, m := range rows {
			v, ok := m[cols[i].Name]
			if !ok || v == nil {
				continue
			}
			var vt Type
			switch jsonCell(v, &enc).(type) {
			case int64:
				vt = TypeInt
			case float64:
				vt = TypeNumber
			case bool:
				vt = TypeBool
			default:
				vt = TypeText
			}
			switch {
			case t == "":
				t = vt
			case t == vt:
			case (t == TypeInt || t == TypeNumber) && (vt == TypeInt || vt == TypeNumber):
				t = TypeNumber
			default:
				t = TypeText
			}
			if t == TypeText {
				break
			}
		}
		cols[i].Type = cmp.Or(t, TypeText)
	}
	return cols
}

// jsonCell is a JSON value as a cell: a number as int64 when it is an integer that
// int64 holds (1.0 and 1e3 too) and float64 otherwise, except an integer too large for
// int64, which stays its exact digits as text; true and false; strings; null as an empty
// cell; an object or array as its compact JSON text.
func jsonCell(v any, enc *jsonText) any {
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case json.Number:
		return numberCell(string(x))
	case int:
		return int64(x)
	case int64:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= maxExactFloatInt {
			return int64(x)
		}
		return x
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return x.String()
	}
	return enc.of(v)
}

// numberCell is jsonCell for a number as the page wrote it.
func numberCell(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if !strings.ContainsAny(s, ".eE") {
		return s // an integer beyond int64: its digits, exactly
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s // beyond float64
	}
	if f == math.Trunc(f) && math.Abs(f) <= maxExactFloatInt {
		return int64(f)
	}
	return f
}

// jsonText writes nested values as compact JSON text, reusing its buffer.
type jsonText struct{ buf bytes.Buffer }

func (t *jsonText) of(v any) string {
	t.buf.Reset()
	enc := json.NewEncoder(&t.buf)
	enc.SetEscapeHTML(false) // a cell is not HTML: <, > and & stay themselves
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(t.buf.String(), "\n")
}

// droppedKeys are the keys of later pages that the columns do not have.
type droppedKeys struct {
	names []string // the first few, in the order met
	more  int      // how many others
	page  int64    // where the first was met
	seen  map[string]bool
}

// maxDroppedNamed is how many dropped keys the warning names.
const maxDroppedNamed = 10

func (d *droppedKeys) note(m map[string]any, cols []Column, page int64) {
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if d.seen[k] || slices.ContainsFunc(cols, func(c Column) bool { return c.Name == k }) {
			continue
		}
		d.seen[k] = true
		if d.page == 0 {
			d.page = page
		}
		if len(d.names) < maxDroppedNamed {
			d.names = append(d.names, k)
		} else {
			d.more++
		}
	}
}

// warning is the one message about dropped keys, or "".
func (d *droppedKeys) warning() string {
	if len(d.names) == 0 {
		return ""
	}
	names := strings.Join(d.names, ", ")
	if d.more > 0 {
		names += fmt.Sprintf(" and %d more", d.more)
	}
	return fmt.Sprintf("the API sent keys that the first page with rows did not have, from page %d on: %s; the columns are that page's keys, so these values are not in the file",
		d.page, names)
}

// nextPage is the page after ref, from the page's body, its headers and its row count
// by the report's pagination; nil: ref was the last.
func (st *httpStream) nextPage(ctx context.Context, ref pageRef, doc any, header http.Header, rows int64) (*url.URL, error) {
	s, p := st.src, st.spec.page
	bad := func(format string, args ...any) error {
		return jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d: "+format, append([]any{s.name, ref.page}, args...)...))
	}
	switch p.style {
	case pageNone:
		return nil, nil
	case pageLink:
		next := nextLink(header.Values("Link"))
		if next == "" {
			return nil, nil
		}
		return st.sameOrigin(ref, next, "the Link header's next page")
	case pageNextURL, pageCursor:
		v, err := firstResult(ctx, p.expr, doc)
		if err != nil {
			if ctx.Err() != nil {
				return nil, jobs.Retryable("canceled", fmt.Errorf("source %s: %w", s.name, ctx.Err()))
			}
			return nil, bad("the paginate expression fails on it: %v", err)
		}
		var text string
		switch x := v.(type) {
		case nil:
		case string:
			text = x
		case json.Number, int, int64, float64, *big.Int:
			if p.style == pageCursor { // a numeric cursor, sent as the API wrote it
				text = fmt.Sprint(jsonCell(x, nil))
				break
			}
			return nil, bad("the paginate expression gives a number, not a URL")
		default:
			return nil, bad("the paginate expression gives %s, not a %s", jsonKind(v), map[pageStyle]string{pageNextURL: "URL", pageCursor: "cursor"}[p.style])
		}
		if text == "" {
			return nil, nil
		}
		if p.style == pageNextURL {
			return st.sameOrigin(ref, text, "the next page's URL")
		}
		next := *ref.url
		next.RawQuery = setQueryParam(next.RawQuery, p.param, text)
		return &next, nil
	case pageNumber, pageOffset:
		if rows == 0 {
			return nil, nil
		}
		start := int64(1)
		step := int64(1)
		if p.style == pageOffset {
			start, step = 0, rows
		}
		if v, ok := queryParam(ref.url.RawQuery, p.param); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, bad("the query parameter %s is %q, not a whole number to count up", p.param, shorten(v, 40))
			}
			start = n
		}
		next := *ref.url
		next.RawQuery = setQueryParam(next.RawQuery, p.param, strconv.FormatInt(start+step, 10))
		return &next, nil
	}
	return nil, bad("unknown pagination %q", p.style)
}

// sameOrigin resolves a next page's URL against the page's and refuses one on another
// host: the source's credentials go to base_url's host only, and a next page elsewhere
// is an API's mistake or a trap.
func (st *httpStream) sameOrigin(ref pageRef, raw, what string) (*url.URL, error) {
	s := st.src
	rel, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d: %s is not a URL: %q", s.name, ref.page, what, shorten(raw, 80)))
	}
	u := ref.url.ResolveReference(rel)
	u.Fragment, u.RawFragment = "", ""
	if originOf(u) != s.origin {
		return nil, jobs.Permanent("bad_response", fmt.Errorf("source %s: page %d: %s is on %s, not on base_url's %s; sheetq follows pages on the API's own host only",
			s.name, ref.page, what, originOf(u), s.origin))
	}
	return u, nil
}

// firstResult is a jq expression's first result on doc; none is null.
func firstResult(ctx context.Context, code *gojq.Code, doc any) (any, error) {
	iter := code.RunWithContext(ctx, doc)
	v, ok := iter.Next()
	if !ok {
		return nil, nil
	}
	if err, isErr := v.(error); isErr {
		var halt *gojq.HaltError
		if errors.As(err, &halt) && halt.Value() == nil {
			return nil, nil
		}
		return nil, err
	}
	return v, nil
}

// nextLink finds the rel="next" target in Link header values (RFC 8288): a list of
// <URI-reference> followed by ;-separated parameters, whose rel is a space-separated
// list of relation types, compared without case.
func nextLink(values []string) string {
	for _, v := range values {
		for v != "" {
			v = strings.TrimLeft(v, " \t,")
			if !strings.HasPrefix(v, "<") {
				return "" // not a link: the header is malformed from here on
			}
			end := strings.IndexByte(v, '>')
			if end < 0 {
				return ""
			}
			target := v[1:end]
			v = v[end+1:]
			// The parameters run to the next comma outside quotes.
			params, rest := splitLinkParams(v)
			v = rest
			for _, prm := range params {
				name, value, _ := strings.Cut(prm, "=")
				if !strings.EqualFold(strings.TrimSpace(name), "rel") {
					continue
				}
				value = strings.Trim(strings.TrimSpace(value), `"`)
				for _, rel := range strings.Fields(value) {
					if strings.EqualFold(rel, "next") {
						return target
					}
				}
			}
		}
	}
	return ""
}

// splitLinkParams splits the ";a=b; c="d,e"" after a link's target into its parameters,
// up to the comma that starts the next link, and returns what follows that comma.
func splitLinkParams(s string) (params []string, rest string) {
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			quoted = !quoted
			cur.WriteByte(c)
		case c == '\\' && quoted && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
		case c == ';' && !quoted:
			if p := strings.TrimSpace(cur.String()); p != "" {
				params = append(params, p)
			}
			cur.Reset()
		case c == ',' && !quoted:
			if p := strings.TrimSpace(cur.String()); p != "" {
				params = append(params, p)
			}
			return params, s[i+1:]
		default:
			cur.WriteByte(c)
		}
	}
	if p := strings.TrimSpace(cur.String()); p != "" {
		params = append(params, p)
	}
	return params, ""
}

// queryParam is the first value of key in a raw query.
func queryParam(raw, key string) (string, bool) {
	for part := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == key {
			uv, err := url.QueryUnescape(v)
			if err != nil {
				return v, true
			}
			return uv, true
		}
	}
	return "", false
}

// setQueryParam sets key to value in a raw query: in place of its first occurrence
// (dropping others), or at the end. The other parameters keep their order and their
// escaping, as the request line or the API wrote them.
func setQueryParam(raw, key, value string) string {
	kv := url.QueryEscape(key) + "=" + url.QueryEscape(value)
	var out []string
	done := false
	if raw != "" {
		for part := range strings.SplitSeq(raw, "&") {
			k, _, _ := strings.Cut(part, "=")
			if uk, err := url.QueryUnescape(k); err == nil && uk == key {
				if !done {
					out = append(out, kv)
					done = true
				}
				continue
			}
			out = append(out, part)
		}
	}
	if !done {
		out = append(out, kv)
	}
	return strings.Join(out, "&")
}
