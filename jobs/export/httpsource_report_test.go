package export

import (
	"errors"
	"reflect"
	"testing"
)

// httpReportTests are the parser's cases for HTTP reports' lines (request, rows,
// paginate), in parseReportTests' form; FuzzParseReport seeds from them too.
var httpReportTests = []struct {
	name string
	src  string
	want *Report
	err  string
}{
	{
		name: "the design's example",
		src: `-- title: CRM orders
-- source: crm
-- param: from date "From"
-- param: to date "To" after=from
-- request: GET orders?from={from}&to={to}&limit=500
-- rows: .data[]
-- paginate: cursor .meta.next_cursor cursor
-- column: total "Total" number(#,##0.00)
`,
		want: &Report{Title: "CRM orders", Source: "crm", Sheet: "CRM orders",
			Params:  []Param{{Name: "from", Type: TypeDate, Label: "From"}, {Name: "to", Type: TypeDate, Label: "To", After: "from"}},
			Columns: []ColumnSpec{{Name: "total", Label: "Total", Type: TypeNumber, Format: "#,##0.00"}},
			Request: "GET orders?from={from}&to={to}&limit=500", Rows: ".data[]", Paginate: "cursor .meta.next_cursor cursor"},
	},
	{
		name: "no pagination, a placeholder in the path, POST, blank lines and comments after",
		src:  "-- source: crm\n-- param: id int\n-- request: POST customers/{id}/orders\n-- rows: .[] | select(.open)\n\n-- a free comment\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{{Name: "id", Type: TypeInt}},
			Request: "POST customers/{id}/orders", Rows: ".[] | select(.open)"},
	},
	{name: "a tab after the method", src: "-- source: crm\n-- request: GET\torders\n-- rows: .[]\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{}, Request: "GET\torders", Rows: ".[]"}},
	{name: "every pagination style parses", src: "-- source: crm\n-- request: GET a\n-- rows: .data[]\n-- paginate: link\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{}, Request: "GET a", Rows: ".data[]", Paginate: "link"}},
	{name: "next_url with a pipe", src: "-- source: crm\n-- request: GET a\n-- rows: .data[]\n-- paginate: next_url .links | .next\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{}, Request: "GET a", Rows: ".data[]", Paginate: "next_url .links | .next"}},
	{name: "page with its default parameter", src: "-- source: crm\n-- request: GET a?per_page=100\n-- rows: .[]\n-- paginate: page\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{}, Request: "GET a?per_page=100", Rows: ".[]", Paginate: "page"}},
	{name: "offset with its parameter", src: "-- source: crm\n-- request: GET a\n-- rows: .items[]\n-- paginate: offset skip\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{}, Request: "GET a", Rows: ".items[]", Paginate: "offset skip"}},

	{name: "request: lowercase method", src: "-- source: crm\n-- request: get orders\n-- rows: .[]\n",
		err: "r/orders.sql:2: request: write the method in capitals: GET"},
	{name: "request: another method", src: "-- source: crm\n-- request: DELETE orders\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: method "DELETE": want GET or POST (sent without a body); want: request: GET <path>?<query>`},
	{name: "request: no path", src: "-- source: crm\n-- request: GET\n-- rows: .[]\n",
		err: "r/orders.sql:2: request: missing path after the method; want: request: GET <path>?<query>"},
	{name: "request: a space in the path", src: "-- source: crm\n-- request: GET orders by month\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: unexpected " by month" after the path (a space in a path or value is written %20)`},
	{name: "request: an unknown placeholder", src: "-- source: crm\n-- param: from date\n-- request: GET orders?from={from}&to={to}\n-- rows: .[]\n",
		err: `r/orders.sql:3: request: unknown parameter {to} (declare it with "-- param: to <type>")`},
	{name: "request: a placeholder declared below", src: "-- source: crm\n-- request: GET orders?from={from}\n-- rows: .[]\n-- param: from date\n",
		want: &Report{Title: "orders", Source: "crm", Sheet: "orders", Params: []Param{{Name: "from", Type: TypeDate}},
			Request: "GET orders?from={from}", Rows: ".[]"}},
	{name: "request: a brace without its pair", src: "-- source: crm\n-- request: GET orders?q={from\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: "orders?q={from" has a { without } (or a } without {); a parameter is written {name}`},
	{name: "request: an empty placeholder", src: "-- source: crm\n-- request: GET orders/{}\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: an empty {} names no parameter`},
	{name: "request: a whole URL", src: "-- source: crm\n-- request: GET https://evil.example/x\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: "https://evil.example/x" must be a path relative to the source's base_url, not a whole URL`},
	{name: "request: another host", src: "-- source: crm\n-- request: GET //evil.example/x\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: "//evil.example/x" must be a path relative to the source's base_url, not a whole URL`},
	{name: "request: a leading slash", src: "-- source: crm\n-- request: GET /orders\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: "/orders" must be relative to the source's base_url: leave out the leading /`},
	{name: "request: climbing out", src: "-- source: crm\n-- request: GET ../admin/users\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: "../admin/users" must stay under the source's base_url: no .. in the path`},
	{name: "request: a fragment", src: "-- source: crm\n-- request: GET orders#top\n-- rows: .[]\n",
		err: `r/orders.sql:2: request: "orders#top": a request has no #fragment`},
	{name: "request: an unused param", src: "-- source: crm\n-- param: from date\n-- request: GET orders\n-- rows: .[]\n",
		err: `r/orders.sql:2: param "from" is not used in the request (no {from})`},
	{name: "request: SQL after the header", src: "-- source: crm\n-- request: GET orders\n-- rows: .[]\nSELECT 1\n",
		err: `r/orders.sql:4: an HTTP report (-- request: on line 2) takes no SQL: remove the lines from here on`},
	{name: "request: without rows", src: "-- source: crm\n-- request: GET orders\n",
		err: `r/orders.sql:2: an HTTP report needs "-- rows: <jq expression>", the rows of each page, such as .data[]`},
	{name: "request: count", src: "-- source: crm\n-- count: true\n-- request: GET orders\n-- rows: .[]\n",
		err: `r/orders.sql:2: count: an HTTP report cannot count its rows before it reads them; leave the line out`},
	{name: "request: resume", src: "-- source: crm\n-- request: GET orders\n-- rows: .[]\n-- resume: id\n",
		err: `r/orders.sql:4: resume: an HTTP report resumes from the page it stopped in without it; leave the line out`},
	{name: "request: twice", src: "-- source: crm\n-- request: GET a\n-- request: GET b\n-- rows: .[]\n",
		err: `r/orders.sql:3: duplicate request (first on line 2)`},
	{name: "request: no source", src: "-- request: GET a\n-- rows: .[]\n",
		err: `r/orders.sql: missing "-- source: NAME" in the header`},

	{name: "rows: not jq", src: "-- source: crm\n-- request: GET a\n-- rows: .data[\n",
		err: `r/orders.sql:3: rows: ".data[" is not a jq expression: unexpected EOF`},
	{name: "rows: an unknown function", src: "-- source: crm\n-- request: GET a\n-- rows: .data[] | nosuch\n",
		err: `r/orders.sql:3: rows: ".data[] | nosuch" does not compile: function not defined: nosuch/0`},
	{name: "rows: without a request", src: "-- source: crm\n-- rows: .data[]\nSELECT 1\n",
		err: `r/orders.sql:2: rows: only an HTTP report has this line; add "-- request: GET <path>" (its source being an http one)`},
	{name: "paginate: without a request", src: "-- source: crm\n-- paginate: link\nSELECT 1\n",
		err: `r/orders.sql:2: paginate: only an HTTP report has this line; add "-- request: GET <path>" (its source being an http one)`},
	{name: "paginate: unknown style", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: scroll\n",
		err: `r/orders.sql:4: paginate: unknown style "scroll"; want one of: link; next_url <jq>; cursor <jq> <param>; page [<param>]; offset [<param>]`},
	{name: "paginate: link with more", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: link .next\n",
		err: `r/orders.sql:4: paginate: link takes nothing after it (the next page is in the Link header), not ".next"`},
	{name: "paginate: next_url without jq", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: next_url\n",
		err: `r/orders.sql:4: paginate: next_url needs a jq expression giving the next page's URL, as in: next_url .links.next`},
	{name: "paginate: next_url with bad jq", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: next_url .links.[\n",
		err: `r/orders.sql:4: paginate: next_url: ".links.[" is not a jq expression: unexpected EOF`},
	{name: "paginate: cursor without its parameter", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: cursor .meta.next\n",
		err: `r/orders.sql:4: paginate: cursor needs a jq expression and the query parameter to send the cursor in, as in: cursor .meta.next_cursor cursor`},
	{name: "paginate: cursor with a bad parameter", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: cursor .meta.next a&b\n",
		err: `r/orders.sql:4: paginate: cursor: the query parameter "a&b" must be 1-64 letters, digits or _ . - ~ [ ]`},
	{name: "paginate: page with two parameters", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: page p q\n",
		err: `r/orders.sql:4: paginate: page takes one query parameter, not "p q"`},
	{name: "paginate: twice", src: "-- source: crm\n-- request: GET a\n-- rows: .[]\n-- paginate: link\n-- paginate: page\n",
		err: `r/orders.sql:5: duplicate paginate (first on line 4)`},
}

func TestParseHTTPReport(t *testing.T) {
	for _, tt := range httpReportTests {
		t.Run(tt.name, func(t *testing.T) {
			const file = "r/orders.sql"
			got, err := ParseReport(file, []byte(tt.src))
			if tt.err != "" {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v (%T), want *ParseError %s", err, err, tt.err)
				}
				if pe.Error() != tt.err {
					t.Fatalf("err\n got %s\nwant %s", pe, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.want
			want.ID, want.File = "orders", file
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("report\n got %#v\nwant %#v", got, want)
			}
			checkParsedReport(t, file, got)
			if _, err := httpSpecOf(got); err != nil {
				t.Fatalf("the source cannot read what the parser accepted: %v", err)
			}
		})
	}
}
