package export

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// parseReportTests are the parser's table; FuzzParseReport seeds its corpus from them.
// A case either fails with err (the whole message: file, line and text) or parses to want.
var parseReportTests = []struct {
	name string
	file string // "r/orders.sql" when empty
	src  string
	want *Report // ID and File are filled in from file
	err  string
}{
	{
		name: "design example",
		src: `-- title: Orders by month
-- source: shop
-- param: from date "From"
-- param: to date "To" = 2025-01-01
-- param: region text "Region" = "North"
-- sheet: Orders
-- count: true
SELECT id, customer, total, created_at FROM orders
WHERE created_at >= :from AND created_at < :to AND region = :region ORDER BY id;
`,
		want: &Report{Title: "Orders by month", Source: "shop", Sheet: "Orders", Count: true,
			Params: []Param{
				{Name: "from", Type: TypeDate, Label: "From"},
				{Name: "to", Type: TypeDate, Label: "To", Default: "2025-01-01"},
				{Name: "region", Type: TypeText, Label: "Region", Default: "North"},
			},
			Query: "SELECT id, customer, total, created_at FROM orders\nWHERE created_at >= :from AND created_at < :to AND region = :region ORDER BY id"},
	},
	{
		name: "access and a row-level parameter (issue 39)",
		src: `-- source: shop
-- access: sales, /finance/emea
-- param: region text "Region" from=person.region
-- param: cc text from=person.ext:cost_center
SELECT 1 WHERE region = :region AND cc = :cc`,
		want: &Report{Title: "orders", Source: "shop", Sheet: "orders", Access: []string{"sales", "/finance/emea"},
			Params: []Param{{Name: "region", Type: TypeText, Label: "Region", From: "region"}, {Name: "cc", Type: TypeText, From: "ext:cost_center"}},
			Query:  "SELECT 1 WHERE region = :region AND cc = :cc"},
	},
	{name: "access: an empty group", src: "-- source: s\n-- access: sales,,hr\nSELECT 1",
		err: `r/orders.sql:2: access: an empty group name; want: access: <group>[, <group>...]`},
	{name: "access: a group twice", src: "-- source: s\n-- access: Sales, sales\nSELECT 1",
		err: `r/orders.sql:2: access: group "sales" is named twice`},
	{name: "access: twice", src: "-- source: s\n-- access: a\n-- access: b\nSELECT 1",
		err: `r/orders.sql:3: duplicate access (first on line 2)`},
	{name: "from: not person", src: "-- source: s\n-- param: r text from=request.region\nSELECT :r",
		err: `r/orders.sql:2: param "r": from= must be person.<attribute>, the attribute being letters, digits, _, -, . or : (at most 64)`},
	{name: "from: with a default", src: "-- source: s\n-- param: r text from=person.region = North\nSELECT :r",
		err: `r/orders.sql:2: param "r": a parameter set from=person.region takes no default: a person without the attribute cannot run the report`},
	{name: "from: twice", src: "-- source: s\n-- param: r text from=person.a from=person.b\nSELECT :r",
		err: `r/orders.sql:2: param "r": from= is given twice`},
	{
		name: "minimal: title and sheet default to the id",
		src:  "-- source: shop\nSELECT 1",
		want: &Report{Title: "orders", Source: "shop", Sheet: "orders", Params: []Param{}, Query: "SELECT 1"},
	},
	{
		name: "sheet defaults to the title",
		src:  "-- title: All orders\n-- source: shop\nSELECT 1",
		want: &Report{Title: "All orders", Source: "shop", Sheet: "All orders", Params: []Param{}, Query: "SELECT 1"},
	},
	{
		name: "defaults of every type are canonical",
		src: `-- source: s
-- param: t text = plain words
-- param: i int = 0042
-- param: n number "N" = 1e3
-- param: d date = "2025-03-04"
-- param: dt datetime = 2025-03-04 05:06
-- param: b bool = yes
-- param: e text = ""
-- param: q text "Say \"hi\"" = "  padded  "
SELECT :t, :i, :n, :d, :dt, :b, :e, :q`,
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Query: "SELECT :t, :i, :n, :d, :dt, :b, :e, :q",
			Params: []Param{
				{Name: "t", Type: TypeText, Default: "plain words"},
				{Name: "i", Type: TypeInt, Default: int64(42)},
				{Name: "n", Type: TypeNumber, Label: "N", Default: 1000.0},
				{Name: "d", Type: TypeDate, Default: "2025-03-04"},
				{Name: "dt", Type: TypeDatetime, Default: "2025-03-04T05:06:00Z"},
				{Name: "b", Type: TypeBool, Default: true},
				{Name: "e", Type: TypeText, Default: ""},
				{Name: "q", Type: TypeText, Label: `Say "hi"`, Default: "  padded  "},
			}},
	},
	{
		name: "param spacing is free",
		src:  "-- source: s\n-- param:   n\tint\"N\"=5\nSELECT :n",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Query: "SELECT :n",
			Params: []Param{{Name: "n", Type: TypeInt, Label: "N", Default: int64(5)}}},
	},
	{
		name: "comments, blank lines, description and count false",
		src: `-- Orders report. Note: a capitalised word with a colon is a comment.
--
-- see https://example.com/x: also a comment
--- title: three dashes comment a header line out
-- title: T

-- source: s
-- description: first line
-- description: second line
-- count: false
--Sheet names are free text
--sheet: S: with colon
-- Every order placed in [from, to).
/* a block comment starts the body */
SELECT 1 -- trailing comment
; -- after the semicolon
;
-- end`,
		want: &Report{Title: "T", Description: "first line\nsecond line", Source: "s", Sheet: "S: with colon",
			Params: []Param{}, Query: "/* a block comment starts the body */\nSELECT 1"},
	},
	{
		name: "CRLF line ends, byte order mark, indented header",
		src:  "\uFEFF-- title: T\r\n  -- source: s\r\n-- param: x int\r\nSELECT :x\r\n",
		want: &Report{Title: "T", Source: "s", Sheet: "T", Query: "SELECT :x",
			Params: []Param{{Name: "x", Type: TypeInt}}},
	},
	{
		name: "placeholders in strings, comments and casts do not count",
		src: `-- source: pg
-- param: from date
SELECT ':nope', ":nope", $$ :nope $$, created_at::date -- :nope
FROM t /* :nope */ WHERE created_at >= :from::date`,
		want: &Report{Title: "orders", Source: "pg", Sheet: "orders", Params: []Param{{Name: "from", Type: TypeDate}},
			Query: "SELECT ':nope', \":nope\", $$ :nope $$, created_at::date -- :nope\nFROM t /* :nope */ WHERE created_at >= :from::date"},
	},
	{
		name: "a semicolon inside a string is not a second statement",
		src:  "-- source: s\nSELECT 'a;b', \"c;\" -- d; e\n;",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Params: []Param{}, Query: "SELECT 'a;b', \"c;\""},
	},
	{
		name: "a header word in a trailing body comment is fine",
		src:  "-- source: s\nSELECT 1 -- count: not a header line",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Params: []Param{}, Query: "SELECT 1"},
	},
	{
		name: "body indented with a form feed",
		src:  "-- source: s\n\f SELECT 1\n\t",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Params: []Param{}, Query: "SELECT 1"},
	},
	{
		name: "id with digits, _ and -",
		file: "r/0-sales_by_day.sql",
		src:  "-- source: s\nSELECT 1",
		want: &Report{Title: "0-sales_by_day", Source: "s", Sheet: "0-sales_by_day", Params: []Param{}, Query: "SELECT 1"},
	},

	// The file as a whole.
	{name: "not .sql", file: "r/orders.txt", src: "-- source: s\nSELECT 1",
		err: `r/orders.txt: report file name "orders.txt" must end in .sql`},
	{name: "uppercase extension", file: "r/orders.SQL", src: "-- source: s\nSELECT 1",
		err: `r/orders.SQL: report file name "orders.SQL" must end in .sql`},
	{name: "uppercase id", file: "r/Orders.sql", src: "-- source: s\nSELECT 1",
		err: `r/Orders.sql: report id "Orders" (the file name) must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`},
	{name: "space in id", file: "r/my orders.sql", src: "-- source: s\nSELECT 1",
		err: `r/my orders.sql: report id "my orders" (the file name) must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`},
	{name: "id starts with dash", file: "r/-x.sql", src: "-- source: s\nSELECT 1",
		err: `r/-x.sql: report id "-x" (the file name) must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`},
	{name: "empty id", file: "r/.sql", src: "-- source: s\nSELECT 1",
		err: `r/.sql: report id "" (the file name) must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`},
	{name: "id too long", file: "r/" + strings.Repeat("a", 65) + ".sql", src: "-- source: s\nSELECT 1",
		err: `r/` + strings.Repeat("a", 65) + `.sql: report id "` + strings.Repeat("a", 65) + `" (the file name) must be 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`},
	{name: "too large", src: "-- source: s\nSELECT 1 " + strings.Repeat(" ", MaxReportSize),
		err: `r/orders.sql: file is larger than 1048576 bytes`},
	{name: "invalid UTF-8", src: "-- source: s\n-- title: caf\xe9\nSELECT 1",
		err: `r/orders.sql:2: invalid UTF-8`},
	{name: "empty", src: "",
		err: `r/orders.sql: file is empty`},
	{name: "only whitespace", src: " \n\t\n",
		err: `r/orders.sql: file is empty`},

	// Header lines.
	{name: "key in the wrong case", src: "-- source: s\n-- Title: T\nSELECT 1",
		err: `r/orders.sql:2: key "Title" must be lowercase: title`},
	{name: "unknown key", src: "-- source: s\n\n-- titel: T\nSELECT 1",
		err: `r/orders.sql:3: unknown key "titel" (known keys: title, source, param, sheet, count, queue, description, column, filename, access, resume, request, rows, paginate, encrypt; a free comment must not start with a lowercase "word:")`},
	// A known key with a space before the colon, or none after it, used to be a comment,
	// and its line lost without a word.
	{name: "space before the colon", src: "-- source: s\n-- title : T\nSELECT 1",
		err: `r/orders.sql:2: key "title": write "-- title: VALUE", with the colon right after the key and a space after it`},
	{name: "no space after the colon", src: "-- source: s\n-- queue:heavy\nSELECT 1",
		err: `r/orders.sql:2: key "queue": write "-- queue: VALUE", with the colon right after the key and a space after it`},
	{name: "no-break space after the colon", src: "-- source: s\n--count:\u00a0true\nSELECT 1",
		err: `r/orders.sql:2: key "count": write "-- count: VALUE", with the colon right after the key and a space after it`},
	{name: "missing value", src: "-- source: s\n-- title:   \nSELECT 1",
		err: `r/orders.sql:2: title: missing value`},
	{name: "duplicate title", src: "-- title: A\n-- source: s\n-- title: B\nSELECT 1",
		err: `r/orders.sql:3: duplicate title (first on line 1)`},
	{name: "duplicate source", src: "-- source: s\n-- source: s\nSELECT 1",
		err: `r/orders.sql:2: duplicate source (first on line 1)`},
	{name: "duplicate sheet", src: "-- source: s\n-- sheet: A\n-- sheet: A\nSELECT 1",
		err: `r/orders.sql:3: duplicate sheet (first on line 2)`},
	{name: "duplicate count", src: "-- source: s\n-- count: true\n-- count: true\nSELECT 1",
		err: `r/orders.sql:3: duplicate count (first on line 2)`},
	{name: "bad source", src: "-- source: my shop\nSELECT 1",
		err: `r/orders.sql:1: source "my shop" must be a source name from the config: letters, digits, _ or -`},
	{name: "bad count", src: "-- source: s\n-- count: yes\nSELECT 1",
		err: `r/orders.sql:2: count must be true or false, not "yes"`},
	{name: "missing source", src: "-- title: T\nSELECT 1",
		err: `r/orders.sql: missing "-- source: NAME" in the header`},

	// Params.
	{name: "param without name", src: "-- source: s\n-- param: \"Label\"\nSELECT 1",
		err: `r/orders.sql:2: param: missing name; want: param: <name> <type> ["Label"] [after=<param>] [from=person.<attribute>] [= default]`},
	{name: "param name uppercase", src: "-- source: s\n-- param: From date\nSELECT :From",
		err: `r/orders.sql:2: param name "From" must be lowercase letters, digits and _, not starting with a digit (at most 64)`},
	{name: "param name starts with digit", src: "-- source: s\n-- param: 1x int\nSELECT 1",
		err: `r/orders.sql:2: param name "1x" must be lowercase letters, digits and _, not starting with a digit (at most 64)`},
	{name: "param name with dash", src: "-- source: s\n-- param: a-b int\nSELECT 1",
		err: `r/orders.sql:2: param name "a-b" must be lowercase letters, digits and _, not starting with a digit (at most 64)`},
	{name: "param without type", src: "-- source: s\n-- param: from \"From\"\nSELECT :from",
		err: `r/orders.sql:2: param "from": missing type (one of text, int, number, date, datetime, bool); want: param: <name> <type> ["Label"] [after=<param>] [from=person.<attribute>] [= default]`},
	{name: "param unknown type", src: "-- source: s\n-- param: from string\nSELECT :from",
		err: `r/orders.sql:2: param "from": unknown type "string" (want one of text, int, number, date, datetime, bool)`},
	{name: "param unterminated label", src: "-- source: s\n-- param: from date \"From\nSELECT :from",
		err: `r/orders.sql:2: param "from": label is not a valid quoted string`},
	{name: "param label not UTF-8", src: "-- source: s\n-- param: from date \"\\xff\"\nSELECT :from",
		err: `r/orders.sql:2: param "from": the label must be one line of text, without control characters`},
	{name: "param label with an escape", src: "-- source: s\n-- param: from date \"From\\x1b[31m\"\nSELECT :from",
		err: `r/orders.sql:2: param "from": the label must be one line of text, without control characters`},
	{name: "param label on two lines", src: "-- source: s\n-- param: from date \"From\\nTo\"\nSELECT :from",
		err: `r/orders.sql:2: param "from": the label must be one line of text, without control characters`},
	{name: "title with a control character", src: "-- source: s\n-- title: Orders\x1b[2J\nSELECT 1",
		err: `r/orders.sql:2: title must be text, without control characters`},
	{name: "description with a control character", src: "-- source: s\n-- description: ok\n-- description: bell\a\nSELECT 1",
		err: `r/orders.sql:3: description must be text, without control characters`},
	{name: "param bad number default with underscores", src: "-- source: s\n-- param: n number = 1_000.5\nSELECT :n",
		err: `r/orders.sql:2: param "n": default "1_000.5" must be a number`},
	{name: "param junk after label", src: "-- source: s\n-- param: from date \"From\" required\nSELECT :from",
		err: `r/orders.sql:2: param "from": unexpected "required"; want: param: <name> <type> ["Label"] [after=<param>] [from=person.<attribute>] [= default]`},
	{name: "param two labels", src: "-- source: s\n-- param: from date \"A\" \"B\"\nSELECT :from",
		err: `r/orders.sql:2: param "from": unexpected "\"B\""; want: param: <name> <type> ["Label"] [after=<param>] [from=person.<attribute>] [= default]`},
	{name: "param missing default", src: "-- source: s\n-- param: from date =  \nSELECT :from",
		err: `r/orders.sql:2: param "from": missing default after =`},
	{name: "param unterminated default", src: "-- source: s\n-- param: r text = \"North\nSELECT :r",
		err: `r/orders.sql:2: param "r": default is not a valid quoted string`},
	{name: "param default not UTF-8", src: "-- source: s\n-- param: r text = \"\\xff\"\nSELECT :r",
		err: `r/orders.sql:2: param "r": default is not valid UTF-8`},
	{name: "param junk after quoted default", src: "-- source: s\n-- param: r text = \"North\" East\nSELECT :r",
		err: `r/orders.sql:2: param "r": unexpected "East" after the default`},
	{name: "param bad int default", src: "-- source: s\n-- param: n int = 1.5\nSELECT :n",
		err: `r/orders.sql:2: param "n": default "1.5" must be an integer`},
	{name: "param bad number default", src: "-- source: s\n-- param: n number = NaN\nSELECT :n",
		err: `r/orders.sql:2: param "n": default "NaN" must be a number`},
	{name: "param bad date default", src: "-- source: s\n-- param: d date = 2025-13-01\nSELECT :d",
		err: `r/orders.sql:2: param "d": default "2025-13-01" must be a date (YYYY-MM-DD)`},
	{name: "param bad datetime default", src: "-- source: s\n-- param: d datetime = noon\nSELECT :d",
		err: `r/orders.sql:2: param "d": default "noon" must be a date and time (RFC 3339, e.g. 2006-01-02T15:04:05Z)`},
	{name: "param bad bool default", src: "-- source: s\n-- param: b bool = maybe\nSELECT :b",
		err: `r/orders.sql:2: param "b": default "maybe" must be true or false`},
	{name: "param empty int default", src: "-- source: s\n-- param: n int = \"\"\nSELECT :n",
		err: `r/orders.sql:2: param "n": default "" must be an integer`},
	{name: "param declared twice", src: "-- source: s\n-- param: a int\n-- param: a text\nSELECT :a",
		err: `r/orders.sql:3: param "a" is already declared on line 2`},
	{name: "placeholder not declared", src: "-- source: s\n-- param: from date\nSELECT 1\nWHERE a >= :from\n  AND b < :form AND c = :form",
		err: `r/orders.sql:5: unknown parameter :form (declare it with "-- param: form <type>")`},
	{name: "placeholder not a param name", src: "-- source: s\nSELECT :Region",
		err: `r/orders.sql:2: unknown parameter :Region (param names are lowercase letters, digits and _)`},
	{name: "param not used", src: "-- source: s\n-- param: from date\n-- param: to date\nSELECT 1 WHERE a >= :from -- :to",
		err: `r/orders.sql:3: param "to" is not used in the query (no :to)`},

	// The body.
	{name: "no body", src: "-- title: T\n-- source: s\n\n",
		err: `r/orders.sql: no query after the header`},
	{name: "only comments and semicolons in the body", src: "-- source: s\n/* nothing */ ;\n-- here",
		err: `r/orders.sql: no query after the header`},
	{name: "two statements", src: "-- source: s\nSELECT 1;\n\nDELETE FROM t",
		err: `r/orders.sql:2: a report holds one statement, but more SQL follows this ;`},
	{name: "a statement that is no read", src: "-- source: s\n\n/* copy */ ATTACH DATABASE '/tmp/x' AS x",
		err: `r/orders.sql:3: a report may only read: its SQL must start with SELECT, WITH or VALUES, not ATTACH`},
	{name: "a write on a later line", src: "-- source: s\n/* a\nb */\n  insert into t values (1);",
		err: `r/orders.sql:4: a report may only read: its SQL must start with SELECT, WITH or VALUES, not INSERT`},
	{name: "reads in parentheses", src: "-- source: s\n(SELECT 1) UNION (VALUES (2))",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Params: []Param{}, Query: "(SELECT 1) UNION (VALUES (2))"}},
	{name: "unterminated string", src: "-- source: s\nSELECT 1,\n'abc",
		err: `r/orders.sql:3: unterminated string`},
	{name: "unterminated identifier", src: "-- source: s\nSELECT \"abc",
		err: `r/orders.sql:2: unterminated quoted identifier "`},
	{name: "unterminated backtick", src: "-- source: s\nSELECT `abc",
		err: "r/orders.sql:2: unterminated quoted identifier `"},
	{name: "unterminated comment", src: "-- source: s\nSELECT 1\n/* abc",
		err: `r/orders.sql:3: unterminated comment /*`},
	{name: "unterminated dollar quote", src: "-- source: s\nSELECT $fn$ abc $$",
		err: `r/orders.sql:2: unterminated dollar-quoted string $fn$`},
	{name: "header line below the SQL", src: "-- source: s\nSELECT 1\n  -- count: true",
		err: `r/orders.sql:3: header line "-- count:" after the query started on line 2: move it above the SQL`},
	{name: "queue", src: "-- source: s\n-- queue: heavy\nSELECT 1",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Queue: "heavy", Params: []Param{}, Query: "SELECT 1"}},
	{name: "resume", src: "-- source: s\n-- resume: order_id\nSELECT order_id FROM orders ORDER BY order_id",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Resume: "order_id", Params: []Param{}, Query: "SELECT order_id FROM orders ORDER BY order_id"}},
	{name: "resume that is no column name", src: "-- source: s\n-- resume: id, name\nSELECT 1",
		err: `r/orders.sql:2: resume "id, name" must name one column the query returns and orders by: letters, digits and _, not starting with a digit`},
	{name: "resume twice", src: "-- source: s\n-- resume: a\n-- resume: b\nSELECT 1",
		err: `r/orders.sql:3: duplicate resume (first on line 2)`},
	{name: "queue that is no name", src: "-- source: s\n-- queue: Big Ones\nSELECT 1",
		err: `r/orders.sql:2: queue "Big Ones" must be a queue name: 1-64 lowercase letters, digits, _ or -, starting with a letter or digit`},
	{name: "queue twice", src: "-- source: s\n-- queue: a\n-- queue: b\nSELECT 1",
		err: `r/orders.sql:3: duplicate queue (first on line 2)`},
	{name: "header after a leading block comment", src: "/* Orders */\n-- source: s\nSELECT 1",
		err: `r/orders.sql:2: header line "-- source:" after the query started on line 1: move it above the SQL`},

	// Column lines (docs/reports-and-sources.md, "Report files"): NAME ["Label"] [TYPE[(FORMAT)]].
	{name: "column lines, every part optional", src: `-- source: s
-- column: unit_price "Unit price" number(#,##0.00)
-- column: created_at "Created" datetime
-- column: id
-- column: note "Note, if any"
-- column: qty int
-- column: due date(dd.mm.yyyy)
-- column: total number(#,##0.00 "EUR";[Red]-#,##0.00 "EUR")
-- column: net   "Net"   number(  #,##0.00;(#,##0.00)  )
-- column: Größe "Größe \"cm\"" text(@)
SELECT 1`,
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Params: []Param{}, Query: "SELECT 1",
			Columns: []ColumnSpec{
				{Name: "unit_price", Label: "Unit price", Type: TypeNumber, Format: "#,##0.00"},
				{Name: "created_at", Label: "Created", Type: TypeDatetime},
				{Name: "id"},
				{Name: "note", Label: "Note, if any"},
				{Name: "qty", Type: TypeInt},
				{Name: "due", Type: TypeDate, Format: "dd.mm.yyyy"},
				{Name: "total", Type: TypeNumber, Format: `#,##0.00 "EUR";[Red]-#,##0.00 "EUR"`},
				{Name: "net", Label: "Net", Type: TypeNumber, Format: "  #,##0.00;(#,##0.00)  "},
				{Name: "Größe", Label: `Größe "cm"`, Type: TypeText, Format: "@"},
			}}},
	{name: "column format with brackets in quotes and escapes", src: "-- source: s\n-- column: x number(0.0\" )[\"\\)\\[)\nSELECT 1",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Params: []Param{}, Query: "SELECT 1",
			Columns: []ColumnSpec{{Name: "x", Type: TypeNumber, Format: `0.0" )["\)\[`}}}},
	{name: "column: missing value", src: "-- source: s\n-- column:\nSELECT 1",
		err: `r/orders.sql:2: column: missing value`},
	{name: "column: unknown type", src: "-- source: s\n-- column: total money(0.00)\nSELECT 1",
		err: `r/orders.sql:2: column "total": unknown type "money" (want one of text, int, number, date, datetime, bool)`},
	{name: "column: type in capitals", src: "-- source: s\n-- column: total Number\nSELECT 1",
		err: `r/orders.sql:2: column "total": unknown type "Number" (want one of text, int, number, date, datetime, bool)`},
	{name: "column: unterminated label", src: "-- source: s\n-- column: total \"Total number\nSELECT 1",
		err: `r/orders.sql:2: column "total": the label is not a valid quoted string (close it with ", and write \" for a quote inside)`},
	{name: "column: empty label", src: "-- source: s\n-- column: total \"\" number\nSELECT 1",
		err: `r/orders.sql:2: column "total": the label is empty (leave it out to keep the name)`},
	{name: "column: label with a newline", src: "-- source: s\n-- column: total \"a\\nb\"\nSELECT 1",
		err: `r/orders.sql:2: column "total": the label must be one line of text, without control characters`},
	{name: "column: label after the type", src: "-- source: s\n-- column: total number \"Total\"\nSELECT 1",
		err: `r/orders.sql:2: column "total": the label comes before the type; want: column: <name> ["Label"] [<type>[(<format>)]]`},
	{name: "column: format without a type", src: "-- source: s\n-- column: total \"Total\" (0.00)\nSELECT 1",
		err: `r/orders.sql:2: column "total": a format needs a type before it, as in number(#,##0.00); want: column: <name> ["Label"] [<type>[(<format>)]]`},
	{name: "column: format without its )", src: "-- source: s\n-- column: total number(#,##0.00;(#,##0.00)\nSELECT 1",
		err: `r/orders.sql:2: column "total": format has unbalanced brackets: a ( without )`},
	{name: "column: format with [ unclosed", src: "-- source: s\n-- column: total number([Red0.00)\nSELECT 1",
		err: `r/orders.sql:2: column "total": format has a [ without ]`},
	{name: "column: format with ] unopened", src: "-- source: s\n-- column: total number(Red]0.00)\nSELECT 1",
		err: `r/orders.sql:2: column "total": format has a ] without [`},
	{name: "column: format with unterminated quote", src: "-- source: s\n-- column: total number(0.00 \"EUR)\nSELECT 1",
		err: `r/orders.sql:2: column "total": format has an unterminated quoted text`},
	{name: "column: empty format", src: "-- source: s\n-- column: total number()\nSELECT 1",
		err: `r/orders.sql:2: column "total": the format is empty (leave out the brackets to keep the default)`},
	{name: "column: text after the format", src: "-- source: s\n-- column: total number(0.00) wide\nSELECT 1",
		err: `r/orders.sql:2: column "total": unexpected "wide" after the format; want: column: <name> ["Label"] [<type>[(<format>)]]`},
	{name: "column: a word after the type", src: "-- source: s\n-- column: total number 0.00\nSELECT 1",
		err: `r/orders.sql:2: column "total": unexpected "0.00" after the type; want: column: <name> ["Label"] [<type>[(<format>)]]`},
	{name: "column: duplicate, in another case", src: "-- source: s\n-- column: total number\n-- param: n int\n-- column: Total \"T\"\nSELECT :n",
		err: `r/orders.sql:4: duplicate column "Total" (first on line 2)`},
	{name: "column: name in quotes", src: "-- source: s\n-- column: \"unit price\" number\nSELECT 1",
		err: `r/orders.sql:2: column: missing name; want: column: <name> ["Label"] [<type>[(<format>)]]`},
	{name: "column line below the SQL", src: "-- source: s\nSELECT 1\n-- column: x int",
		err: `r/orders.sql:3: header line "-- column:" after the query started on line 2: move it above the SQL`},

	// The download name's pattern.
	{name: "filename with params declared after it", src: "-- source: s\n-- filename: orders {from}..{to} (EU)\n-- param: from date\n-- param: to date\nSELECT :from, :to",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Filename: "orders {from}..{to} (EU)", Query: "SELECT :from, :to",
			Params: []Param{{Name: "from", Type: TypeDate}, {Name: "to", Type: TypeDate}}}},
	{name: "filename without params", src: "-- source: s\n-- filename: everything\nSELECT 1",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Filename: "everything", Params: []Param{}, Query: "SELECT 1"}},
	{name: "filename: unknown param", src: "-- source: s\n-- param: from date\n-- filename: orders-{from}-{until}\nSELECT :from",
		err: `r/orders.sql:3: filename: unknown parameter {until} (declared: from)`},
	{name: "filename: param of a report without params", src: "-- source: s\n-- filename: orders-{from}\nSELECT 1",
		err: `r/orders.sql:2: filename: unknown parameter {from} (the report declares no params)`},
	{name: "filename: { unclosed", src: "-- source: s\n-- param: from date\n-- filename: orders-{from\nSELECT :from",
		err: `r/orders.sql:3: filename: { without } in "orders-{from"`},
	{name: "filename: } unopened", src: "-- source: s\n-- filename: orders-from}\nSELECT 1",
		err: `r/orders.sql:2: filename: } without { in "orders-from}"`},
	{name: "filename: empty {}", src: "-- source: s\n-- filename: orders-{}\nSELECT 1",
		err: `r/orders.sql:2: filename: {} names no parameter; write {NAME} with a declared param`},
	{name: "filename: a folder", src: "-- source: s\n-- filename: exports/orders\nSELECT 1",
		err: `r/orders.sql:2: filename: a name has no folders: leave out / and \`},
	{name: "filename: with the extension", src: "-- source: s\n-- filename: orders.XLSX\nSELECT 1",
		err: `r/orders.sql:2: filename: leave out the extension .xlsx: the export's format adds it`},
	{name: "filename twice", src: "-- source: s\n-- filename: a\n-- filename: b\nSELECT 1",
		err: `r/orders.sql:3: duplicate filename (first on line 2)`},

	// after=: one parameter must follow another.
	{name: "after with label and default", src: "-- source: s\n-- param: from date \"From\" = 2025-01-01\n-- param: to date \"To\" after=from = 2025-02-01\nSELECT :from, :to",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Query: "SELECT :from, :to",
			Params: []Param{{Name: "from", Type: TypeDate, Label: "From", Default: "2025-01-01"},
				{Name: "to", Type: TypeDate, Label: "To", Default: "2025-02-01", After: "from"}}}},
	{name: "after declared before the other, no label", src: "-- source: s\n-- param: hi int after=lo\n-- param: lo int\nSELECT :lo, :hi",
		want: &Report{Title: "orders", Source: "s", Sheet: "orders", Query: "SELECT :lo, :hi",
			Params: []Param{{Name: "hi", Type: TypeInt, After: "lo"}, {Name: "lo", Type: TypeInt}}}},
	{name: "after: unknown param", src: "-- source: s\n-- param: to date after=since\nSELECT :to",
		err: `r/orders.sql:2: param "to": after=since names no declared parameter`},
	{name: "after: itself", src: "-- source: s\n-- param: to date after=to\nSELECT :to",
		err: `r/orders.sql:2: param "to": after= names the parameter itself`},
	{name: "after: types differ", src: "-- source: s\n-- param: from datetime\n-- param: to date after=from\nSELECT :from, :to",
		err: `r/orders.sql:3: param "to": after=from compares a date with a datetime; both must have one type`},
	{name: "after: not orderable", src: "-- source: s\n-- param: a text\n-- param: b text after=a\nSELECT :a, :b",
		err: `r/orders.sql:3: param "b": after= needs an int, number, date or datetime parameter, not text`},
	{name: "after: defaults break it", src: "-- source: s\n-- param: from date \"From\" = 2025-03-01\n-- param: to date after=from = 2025-03-01\nSELECT :from, :to",
		err: `r/orders.sql:3: param "to": its default must be after From (2025-03-01)`},
	// A circle of after= could never be kept: every export of the report would be refused.
	{name: "after: a circle of two", src: "-- source: s\n-- param: a int after=b\n-- param: b int after=a\nSELECT :a, :b",
		err: `r/orders.sql:2: param "a": after= goes round in a circle (a after b after a), which no values can keep`},
	{name: "after: a circle of three, entered from outside", src: "-- source: s\n-- param: x date after=a\n-- param: a date after=b\n-- param: b date after=c\n-- param: c date after=a\nSELECT :x, :a, :b, :c",
		err: `r/orders.sql:3: param "a": after= goes round in a circle (a after b after c after a), which no values can keep`},
	{name: "after: twice", src: "-- source: s\n-- param: a int\n-- param: b int after=a after=a\nSELECT :a, :b",
		err: `r/orders.sql:3: param "b": after= is given twice`},
	{name: "after: unknown option", src: "-- source: s\n-- param: a int\n-- param: b int before=a\nSELECT :a, :b",
		err: `r/orders.sql:3: param "b": unexpected "before=a"; want: param: <name> <type> ["Label"] [after=<param>] [from=person.<attribute>] [= default]`},
}

func TestParseReport(t *testing.T) {
	for _, tt := range parseReportTests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file == "" {
				file = "r/orders.sql"
			}
			got, err := ParseReport(file, []byte(tt.src))
			if tt.err != "" {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v (%T), want *ParseError %s", err, err, tt.err)
				}
				if pe.Error() != tt.err || pe.File != file {
					t.Fatalf("err\n got %s\nwant %s", pe, tt.err)
				}
				if !reflect.DeepEqual(got, Report{}) {
					t.Fatalf("a failed parse returned %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.want
			want.ID = strings.TrimSuffix(filepath.Base(file), ".sql")
			want.File = file
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("report\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

func TestParseErrorMessage(t *testing.T) {
	tests := []struct {
		err  ParseError
		want string
	}{
		{ParseError{File: "reports/a.sql", Line: 3, Msg: "bad"}, "reports/a.sql:3: bad"},
		{ParseError{File: "reports/a.sql", Msg: "bad"}, "reports/a.sql: bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// A parsed report works with the rest of the package: its defaults validate, its
// JSON (a job's spec) reads back, and its query binds.
func TestParseReportIntegrates(t *testing.T) {
	src := parseReportTests[0].src
	rep, err := ParseReport("reports/orders.sql", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := validateParams(rep.Params, map[string]any{"from": "2024-12-01"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"from": "2024-12-01", "to": "2025-01-01", "region": "North"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("params %v, want %v", got, want)
	}
	if _, err := validateParams(rep.Params, nil); err == nil || err.Error() != `param "from": is required` {
		t.Fatalf("no from: err = %v", err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := validateParams(back.Params, map[string]any{"from": "2024-12-01"}); err != nil {
		t.Fatalf("params of the report read back from JSON: %v", err)
	}
	q, args, err := BindNamed(rep.Query, DollarNumbers, got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(q, "created_at >= $1 AND created_at < $2 AND region = $3") || !reflect.DeepEqual(args, []any{"2024-12-01", "2025-01-01", "North"}) {
		t.Fatalf("bound %q %v", q, args)
	}
}

// The sample reports installed on first run parse.
func TestParseSampleReports(t *testing.T) {
	files, _ := filepath.Glob("sample/reports/*.sql")
	if len(files) == 0 {
		t.Skip("no sample reports")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseReport(f, src); err != nil {
			t.Error(err)
		}
	}
}
