package export

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseReport checks that the parser never panics, and that what it accepts is
// consistent: the report passes the checks the parser promises, works with the rest of
// the package, and written back out as a header parses to the same report.
func FuzzParseReport(f *testing.F) {
	for _, tt := range parseReportTests {
		if len(tt.src) > 64<<10 {
			continue // the size limit case: the fuzzer's mutations of 1 MiB inputs are slow
		}
		f.Add(cmp.Or(tt.file, "r/orders.sql"), []byte(tt.src))
	}
	for _, tt := range httpReportTests {
		f.Add("r/orders.sql", []byte(tt.src))
	}
	f.Fuzz(func(t *testing.T, file string, src []byte) {
		rep, err := ParseReport(file, src)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %v is a %T, not a *ParseError", err, err)
			}
			return
		}
		checkParsedReport(t, file, rep)

		// Written back as a file, the report parses to itself.
		again, err := ParseReport(file, []byte(formatReport(rep)))
		if err != nil {
			t.Fatalf("formatted report does not parse: %v\n%s", err, formatReport(rep))
		}
		if !reflect.DeepEqual(again, rep) {
			t.Fatalf("round trip\n got %#v\nwant %#v\nfile:\n%s", again, rep, formatReport(rep))
		}
	})
}

// checkParsedReport checks the promises a parsed report keeps.
func checkParsedReport(t *testing.T, file string, rep Report) {
	t.Helper()
	if !reportIDRe.MatchString(rep.ID) || rep.File != file || rep.Title == "" || rep.Sheet == "" ||
		!sourceRe.MatchString(rep.Source) || (rep.Query == "") == (rep.Request == "") || rep.Params == nil ||
		(rep.Queue != "" && !reportIDRe.MatchString(rep.Queue)) {
		t.Fatalf("report %#v breaks an invariant", rep)
	}
	if strings.TrimSpace(rep.Query) != rep.Query || strings.HasSuffix(rep.Query, ";") {
		t.Fatalf("query %q is not trimmed", rep.Query)
	}
	// An HTTP report's lines are what the source reads.
	if rep.Request != "" {
		if _, err := httpSpecOf(rep); err != nil || rep.Count {
			t.Fatalf("HTTP report (count %v): %v", rep.Count, err)
		}
	} else if rep.Rows != "" || rep.Paginate != "" {
		t.Fatalf("report %#v has HTTP lines without a request", rep)
	}
	// Placeholders and params match one to one.
	var names []string
	for _, ph := range Placeholders(rep.Query) {
		names = append(names, ph.Name)
	}
	phs, _ := requestPlaceholders(rep.Request)
	for _, ph := range phs {
		if !slices.Contains(names, ph.name) {
			names = append(names, ph.name)
		}
	}
	declared := map[string]bool{}
	for _, p := range rep.Params {
		declared[p.Name] = true
	}
	if len(names) != len(declared) {
		t.Fatalf("placeholders %v, params %v", names, rep.Params)
	}
	for _, n := range names {
		if !declared[n] {
			t.Fatalf("placeholder :%s is not a param of %v", n, rep.Params)
		}
	}
	// Defaults are canonical: converting them again changes nothing.
	values := map[string]any{}
	for _, p := range rep.Params {
		if p.Default == nil {
			values[p.Name] = sampleParamValue(p.Type)
			continue
		}
		v, err := p.normalize(nil)
		if err != nil || !reflect.DeepEqual(v, p.Default) {
			t.Fatalf("default of %s: %v (%T), err %v; want %v (%T)", p.Name, v, v, err, p.Default, p.Default)
		}
	}
	// after= rules: a declared parameter of the same orderable type. The sample values
	// do not keep them (two samples of one type are equal), so canon is validated
	// without them; TestValidateParamsAfter tests the rule itself.
	free := slices.Clone(rep.Params)
	for i, p := range free {
		if p.After == "" {
			continue
		}
		j := slices.IndexFunc(rep.Params, func(q Param) bool { return q.Name == p.After })
		if j < 0 || j == i || rep.Params[j].Type != p.Type || !orderable(p.Type) {
			t.Fatalf("param %s: after=%s breaks an invariant (%v)", p.Name, p.After, rep.Params)
		}
		free[i].After = ""
	}
	canon, err := validateParams(free, values)
	if err != nil {
		t.Fatalf("validate %v: %v", values, err)
	}
	// Column lines name a column and a known type, a format only with a type.
	for _, c := range rep.Columns {
		if c.Name == "" || (c.Type != "" && !slices.Contains(paramTypes, c.Type)) || (c.Format != "" && c.Type == "") {
			t.Fatalf("column line %#v breaks an invariant", c)
		}
	}
	// A filename pattern names declared params only, and fills to a safe name.
	if rep.Filename != "" {
		if _, msg := parseFilename(rep.Filename, rep.Params, false); msg != "" {
			t.Fatalf("filename %q: %s", rep.Filename, msg)
		}
		if name := safeFileName(renderFilename(rep.Filename, canon)); name != "" {
			checkSafeName(t, name)
		}
	}
	if rep.Request != "" {
		if _, err := fillTarget(rep.Request, canon); err != nil && !errors.As(err, new(*ParamError)) {
			t.Fatalf("fill %q: %v", rep.Request, err)
		}
		return
	}
	for _, style := range []PlaceholderStyle{QuestionMarks, DollarNumbers} {
		_, args, err := BindNamed(rep.Query, style, canon)
		if err != nil {
			if strings.Contains(err.Error(), "positional placeholder") {
				continue // the query is for the other style's driver
			}
			t.Fatalf("bind %q: %v", rep.Query, err)
		}
		uses := 0
		for tok := range sqlTokens(rep.Query) {
			if tok.kind == tokNamed {
				uses++
			}
		}
		if len(args) != uses {
			t.Fatalf("bind %q: %d args for %d uses", rep.Query, len(args), uses)
		}
	}
}

// formatReport writes rep as a report file with every header key spelled out.
func formatReport(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- title: %s\n-- source: %s\n", rep.Title, rep.Source)
	if rep.Description != "" {
		for _, line := range strings.Split(rep.Description, "\n") {
			fmt.Fprintf(&b, "-- description: %s\n", line)
		}
	}
	for _, p := range rep.Params {
		fmt.Fprintf(&b, "-- param: %s %s", p.Name, p.Type)
		if p.Label != "" {
			b.WriteString(" " + strconv.Quote(p.Label))
		}
		if p.After != "" {
			b.WriteString(" after=" + p.After)
		}
		if p.From != "" {
			b.WriteString(" from=person." + p.From)
		}
		switch v := p.Default.(type) {
		case nil:
		case string:
			b.WriteString(" = " + strconv.Quote(v))
		case float64:
			b.WriteString(" = " + strconv.FormatFloat(v, 'g', -1, 64))
		default:
			fmt.Fprintf(&b, " = %v", v)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "-- sheet: %s\n-- count: %t\n", rep.Sheet, rep.Count)
	if rep.Queue != "" {
		fmt.Fprintf(&b, "-- queue: %s\n", rep.Queue)
	}
	for _, c := range rep.Columns {
		fmt.Fprintf(&b, "-- column: %s\n", c)
	}
	if rep.Filename != "" {
		fmt.Fprintf(&b, "-- filename: %s\n", rep.Filename)
	}
	if rep.Resume != "" {
		fmt.Fprintf(&b, "-- resume: %s\n", rep.Resume)
	}
	if rep.Access != nil {
		fmt.Fprintf(&b, "-- access: %s\n", strings.Join(rep.Access, ", "))
	}
	for _, l := range []struct{ key, value string }{{"request", rep.Request}, {"rows", rep.Rows}, {"paginate", rep.Paginate}} {
		if l.value != "" {
			fmt.Fprintf(&b, "-- %s: %s\n", l.key, l.value)
		}
	}
	if rep.Query != "" {
		fmt.Fprintf(&b, "%s\n", rep.Query)
	}
	return b.String()
}

func sampleParamValue(t Type) any {
	switch t {
	case TypeInt:
		return int64(7)
	case TypeNumber:
		return 1.5
	case TypeDate:
		return "2025-01-02"
	case TypeDatetime:
		return "2025-01-02T03:04:05Z"
	case TypeBool:
		return true
	}
	return "x"
}
