package export

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestPlaceholders(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  []Placeholder
	}{
		{"none", "SELECT 1", nil},
		{"simple", "SELECT * FROM t WHERE a = :a AND b = :b", []Placeholder{{"a", 1}, {"b", 1}}},
		{"first use wins", "SELECT :b,\n:a,\n:b", []Placeholder{{"b", 1}, {"a", 2}}},
		{"line numbers", "SELECT\n\n  :x", []Placeholder{{"x", 3}}},
		{"underscore and digits", "SELECT :_a1, :from_2", []Placeholder{{"_a1", 1}, {"from_2", 1}}},
		{"uppercase is a name too", "SELECT :From", []Placeholder{{"From", 1}}},
		{"at the start", ":a", []Placeholder{{"a", 1}}},
		{"in parentheses", "f(:a,:b)", []Placeholder{{"a", 1}, {"b", 1}}},
		{"followed by a cast", "SELECT :d::date", []Placeholder{{"d", 1}}},
		{"single-quoted string", "SELECT ':no', :yes", []Placeholder{{"yes", 1}}},
		{"doubled quote in string", "SELECT 'it''s :no', :yes", []Placeholder{{"yes", 1}}},
		{"string with a colon time", "SELECT '12:30' AS t", nil},
		{"newline in string counts", "SELECT 'a\nb', :x", []Placeholder{{"x", 2}}},
		{"backslash is literal in standard strings", `SELECT 'C:\', :x`, []Placeholder{{"x", 1}}},
		{"E string backslash escape", `SELECT E'it\'s :no', :yes`, []Placeholder{{"yes", 1}}},
		{"lowercase e string", `SELECT e'\' :no', :yes`, []Placeholder{{"yes", 1}}},
		{"a word ending in e is not an E string", `SELECT name'\', :x`, []Placeholder{{"x", 1}}},
		{"double-quoted identifier", `SELECT ":no", "a""b:no", :yes`, []Placeholder{{"yes", 1}}},
		{"backtick identifier", "SELECT `:no`, `a``:no`, :yes", []Placeholder{{"yes", 1}}},
		{"line comment", "SELECT 1 -- :no\n, :yes", []Placeholder{{"yes", 2}}},
		{"line comment at the end", "SELECT :yes -- :no", []Placeholder{{"yes", 1}}},
		{"block comment", "SELECT /* :no \n :no */ :yes", []Placeholder{{"yes", 2}}},
		{"block comments do not nest", "/* /* */ :yes */", []Placeholder{{"yes", 1}}},
		{"dollar quote", "SELECT $$ :no 'x $$, :yes", []Placeholder{{"yes", 1}}},
		{"tagged dollar quote", "SELECT $fn$ :no $$ :no $fn$, :yes", []Placeholder{{"yes", 1}}},
		{"dollar quote over lines", "SELECT $a$\n:no\n$a$,\n:yes", []Placeholder{{"yes", 4}}},
		{"positional dollar is not a quote", "SELECT $1, :yes, $2", []Placeholder{{"yes", 1}}},
		{"dollar inside a word is not a quote", "SELECT a$b$ :yes", []Placeholder{{"yes", 1}}},
		{"cast", "SELECT created_at::date FROM t", nil},
		{"cast then param", "SELECT x::text = :p", []Placeholder{{"p", 1}}},
		{"assignment", "SET @x := 1", nil},
		{"lone colon", "SELECT a : b, ':'", nil},
		{"colon then digit", "SELECT arr[1:2]", nil},
		{"glued to a word", "SELECT a:b, 1:c", nil},
		{"glued to a dollar", "SELECT $:x", nil},
		{"glued to a question mark", "SELECT ?:x", nil},
		{"glued to a placeholder", "SELECT :a:b", []Placeholder{{"a", 1}}},
		{"non-ASCII name", "SELECT :é, :aé", []Placeholder{{"é", 1}, {"aé", 1}}},
		{"a name runs over dollars", "SELECT :a$b$ x $b$", []Placeholder{{"a$b$", 1}}},
		{"question marks are not named", "SELECT ?", nil},
		{"unterminated string hides the rest", "SELECT ':no", nil},
		{"unterminated comment hides the rest", "SELECT /* :no", nil},
		{"unterminated dollar quote hides the rest", "SELECT $q$ :no", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Placeholders(tt.query)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Placeholders(%q)\n got %v\nwant %v", tt.query, got, tt.want)
			}
		})
	}
}

func TestBindNamed(t *testing.T) {
	params := map[string]any{"a": int64(1), "b": "two", "d": "2025-01-01"}
	tests := []struct {
		name     string
		query    string
		style    PlaceholderStyle
		want     string
		wantArgs []any
	}{
		{"none", "SELECT 1", QuestionMarks, "SELECT 1", nil},
		{"question marks", "SELECT :a, :b", QuestionMarks, "SELECT ?, ?", []any{int64(1), "two"}},
		{"dollar numbers", "SELECT :a, :b", DollarNumbers, "SELECT $1, $2", []any{int64(1), "two"}},
		{"reuse binds twice (?)", "WHERE x = :a OR y = :a", QuestionMarks, "WHERE x = ? OR y = ?", []any{int64(1), int64(1)}},
		{"reuse binds twice ($n)", "WHERE x = :a OR y = :a", DollarNumbers, "WHERE x = $1 OR y = $2", []any{int64(1), int64(1)}},
		{"cast kept", "WHERE t::date >= :d::date", DollarNumbers, "WHERE t::date >= $1::date", []any{"2025-01-01"}},
		{"strings and comments kept", "SELECT ':a', \":a\", `:a` -- :a\n, /* :a */ $$:a$$, :b",
			QuestionMarks, "SELECT ':a', \":a\", `:a` -- :a\n, /* :a */ $$:a$$, ?", []any{"two"}},
		{"question mark is an operator in postgres", "SELECT j ? 'k', :a", DollarNumbers, "SELECT j ? 'k', $1", []any{int64(1)}},
		{"dollar number is text for ?", "SELECT '$1', :a", QuestionMarks, "SELECT '$1', ?", []any{int64(1)}},
		{"unused params are ignored", "SELECT :a", QuestionMarks, "SELECT ?", []any{int64(1)}},
		{"adjacent", "SELECT :a||:b", DollarNumbers, "SELECT $1||$2", []any{int64(1), "two"}},
		{"ten and more", strings.Repeat(":a,", 10) + ":b", DollarNumbers,
			"$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11", []any{int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), "two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, args, err := BindNamed(tt.query, tt.style, params)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || !reflect.DeepEqual(args, tt.wantArgs) {
				t.Fatalf("BindNamed(%q)\n got %q %v\nwant %q %v", tt.query, got, args, tt.want, tt.wantArgs)
			}
		})
	}
}

func TestBindNamedErrors(t *testing.T) {
	tests := []struct {
		name  string
		query string
		style PlaceholderStyle
		want  string
	}{
		{"unknown name", "SELECT :a,\n:nope", QuestionMarks, "bind named: line 2: unknown parameter :nope"},
		{"positional ?", "SELECT ?, :a", QuestionMarks, "bind named: line 1: positional placeholder ?; use :name"},
		{"positional $n", "SELECT :a,\n$12", DollarNumbers, "bind named: line 2: positional placeholder $12; use :name"},
		{"unknown style", "SELECT 1", PlaceholderStyle(9), "bind named: unknown placeholder style 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := BindNamed(tt.query, tt.style, map[string]any{"a": 1})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
		})
	}
}

// The scanner's tokens cover the query exactly, in order, with the right lines.
func TestSQLTokensCover(t *testing.T) {
	q := "SELECT 'a\nb', \"c\" -- d\n/* e\n*/ $$f$$ :g ? $1 ; x::int"
	end, line := 0, 1
	for tok := range sqlTokens(q) {
		if tok.start != end || tok.end <= tok.start {
			t.Fatalf("token %+v does not follow offset %d", tok, end)
		}
		if tok.line != line {
			t.Fatalf("token %q on line %d, want %d", q[tok.start:tok.end], tok.line, line)
		}
		line += strings.Count(q[tok.start:tok.end], "\n")
		end = tok.end
	}
	if end != len(q) {
		t.Fatalf("tokens end at %d of %d", end, len(q))
	}
}

func FuzzBindNamed(f *testing.F) {
	seeds := []string{
		"SELECT * FROM t WHERE a = :a AND b = :b",
		"SELECT 'it''s :x', \"a:b\", `c:d`, :e -- :f\n/* :g */ $$ :h $$ $t$ :i $t$ x::date :j := :",
		"SELECT $:a$ :b$c$ :d",
		"SELECT E'\\':x', :y?",
		"SELECT $1, ?, :a",
		"SELECT :a::int, :a",
		"/* unterminated :a",
		"'unterminated :a",
		"$q$ unterminated :a",
	}
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, query string, dollar bool) {
		style := QuestionMarks
		if dollar {
			style = DollarNumbers
		}
		params := map[string]any{}
		for i, ph := range Placeholders(query) {
			params[ph.Name] = i
		}
		out, args, err := BindNamed(query, style, params)
		if err != nil {
			if !strings.Contains(err.Error(), "positional placeholder") {
				t.Fatalf("BindNamed(%q): %v", query, err)
			}
			return
		}
		if ph := Placeholders(out); len(ph) != 0 {
			t.Fatalf("BindNamed(%q) = %q still has named placeholders %v", query, out, ph)
		}
		// Exactly as many positional placeholders as args, and $n numbered 1..n in order.
		n := 0
		for tok := range sqlTokens(out) {
			switch {
			case tok.kind == tokQuestion && style == QuestionMarks:
				n++
			case tok.kind == tokDollarNum && style == DollarNumbers:
				n++
				if got := out[tok.start:tok.end]; got != "$"+strconv.Itoa(n) {
					t.Fatalf("BindNamed(%q) = %q: placeholder %d is %s", query, out, n, got)
				}
			}
		}
		if n != len(args) {
			t.Fatalf("BindNamed(%q) = %q with %d placeholders and %d args", query, out, n, len(args))
		}
		if len(args) == 0 && out != query {
			t.Fatalf("BindNamed(%q) changed a query without placeholders to %q", query, out)
		}
	})
}
