package export

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// A frame or a package template from the caches must be the one the export would have
// made itself: each export below runs once with the caches holding every earlier
// export's templates and once with them empty, and the two files must be the same
// bytes. The exports differ in one thing each that goes into a frame (header text,
// widths, number formats, a later sheet's frame) or into the package (the rows, the
// sheets' names, the title, the version, the time), so a key or a placeholder that left
// one out would hand some of them a wrong template.
func TestTemplateCachesGiveTheFileTheExportWouldMake(t *testing.T) {
	at := time.Date(2026, 12, 8, 9, 30, 0, 0, time.UTC)
	cols := func(label, format string) []Column {
		return []Column{
			{Name: "id", Type: TypeInt},
			{Name: "name", Type: TypeText, Label: label},
			{Name: "amount", Type: TypeNumber, Format: format},
		}
	}
	rows := func(name string, n int) [][]any {
		var out [][]any
		for i := range n {
			out = append(out, []any{int64(i + 1), name, float64(i) / 4})
		}
		return out
	}
	q := Query{Report: Report{ID: "r", Title: "Frames", Sheet: "Rows"}, Time: at}
	retitled, renamed, later := q, q, q
	retitled.Report.Title = "Frames & <more>"
	renamed.Report.Sheet = "Ro'ws & <x>"
	later.Time = at.Add(25 * time.Hour)
	cases := []struct {
		name string
		src  sliceSource
		opt  xlsxOptions
		q    Query
	}{
		{"base", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, Query{}},
		{"header label", sliceSource{cols: cols("Customer", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, Query{}},
		{"wider column", sliceSource{cols: cols("", ""), rows: rows(strings.Repeat("Ada Lovelace ", 4), 5), total: 5}, xlsxOptions{}, Query{}},
		{"number format", sliceSource{cols: cols("", "#,##0.00"), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, Query{}},
		{"another format", sliceSource{cols: cols("", "0.0%"), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, Query{}},
		{"later sheets", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 9), total: 9}, xlsxOptions{maxSheetRows: 4}, Query{}},
		{"more rows", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 7), total: 7}, xlsxOptions{}, Query{}},
		{"more rows in later sheets", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 10), total: 10}, xlsxOptions{maxSheetRows: 4}, Query{}},
		{"title", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, retitled},
		{"sheet name", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, renamed},
		{"version", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{version: "9.9.9"}, Query{}},
		{"time", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}, later},
	}
	for i := range cases {
		if cases[i].q.Report.ID == "" {
			cases[i].q = q
		}
	}
	warm := make([][]byte, len(cases))
	frames.reset()
	packages.reset()
	for i, c := range cases {
		_, warm[i] = exportWith(t, c.src, c.q, c.opt)
	}
	if frames.len() < 6 || packages.len() < 8 {
		t.Fatalf("the caches hold %d frames and %d packages after %d exports of different shapes", frames.len(), packages.len(), len(cases))
	}
	for i, c := range cases {
		frames.reset()
		packages.reset()
		_, cold := exportWith(t, c.src, c.q, c.opt)
		if !bytes.Equal(warm[i], cold) {
			t.Errorf("%s: the file made with the cache differs from the one made without it", c.name)
		}
	}
	// And the same export again takes its frame from the cache.
	frames.reset()
	packages.reset()
	exportWith(t, cases[0].src, q, cases[0].opt)
	n, m := frames.len(), packages.len()
	exportWith(t, cases[0].src, q, cases[0].opt)
	if frames.len() != n || packages.len() != m {
		t.Errorf("exporting the same shape again added templates: %d frames and %d packages, then %d and %d", n, m, frames.len(), packages.len())
	}
}

func TestTemplateCacheStaysBounded(t *testing.T) {
	c := templateCache[*frameTemplate]{max: 3}
	for i := range 10 {
		c.put(strings.Repeat("k", i+1), &frameTemplate{})
		if c.len() > 3 {
			t.Fatalf("after %d puts the cache holds %d frames, more than its 3", i+1, c.len())
		}
	}
	if _, ok := c.get(strings.Repeat("k", 10)); !ok {
		t.Error("the last frame put is not in the cache")
	}
}

// A package template whose placeholders are not where the writer replaces them is
// refused, not written: a file with a filter over a million empty rows, or the
// stand-in time, would be wrong without an error.
func TestPackageTemplateRefusesAnUnknownShape(t *testing.T) {
	good := func() *packageTemplate {
		return &packageTemplate{lastCol: "C", parts: []templatePart{
			{name: "xl/worksheets/sheet1.xml", sheet: 0},
			{name: workbookPart, sheet: -1, data: []byte("<definedName>'Rows'!$A$1:$C$1048576</definedName>")},
			{name: corePart, sheet: -1, data: []byte("<a>" + templateStamp + "</a><b>" + templateStamp + "</b>")},
		}}
	}
	if err := good().check(1); err != nil {
		t.Fatalf("a template of the expected shape: %v", err)
	}
	for name, spoil := range map[string]func(*packageTemplate){
		"no filter range":  func(p *packageTemplate) { p.parts[1].data = []byte("<definedName/>") },
		"one time":         func(p *packageTemplate) { p.parts[2].data = []byte("<a>" + templateStamp + "</a>") },
		"a sheet missing":  func(p *packageTemplate) { p.parts = p.parts[1:] },
		"a sheet twice":    func(p *packageTemplate) { p.parts = append(p.parts, p.parts[0]) },
		"another last col": func(p *packageTemplate) { p.lastCol = "D" },
	} {
		p := good()
		spoil(p)
		if err := p.check(1); err == nil {
			t.Errorf("%s: the template was accepted", name)
		}
	}
}

// The parts a template puts right for each export say that export's rows and time.
func TestPackageTemplateStatesTheExportsRowsAndTime(t *testing.T) {
	at := time.Date(2026, 12, 8, 9, 30, 0, 0, time.UTC)
	cols := []Column{{Name: "id", Type: TypeInt}, {Name: "name", Type: TypeText}}
	src := func(n int) sliceSource {
		var rows [][]any
		for i := range n {
			rows = append(rows, []any{int64(i + 1), "Ada"})
		}
		return sliceSource{cols: cols, rows: rows, total: int64(n)}
	}
	packages.reset()
	for _, c := range []struct {
		rows int
		at   time.Time
		want []string // each sheet's filter range
	}{
		{10, at, []string{"'Rows'!$A$1:$B$4<", "'Rows (2)'!$A$1:$B$4<", "'Rows (3)'!$A$1:$B$4<", "'Rows (4)'!$A$1:$B$2<"}},
		{9, at.Add(time.Hour), []string{"'Rows'!$A$1:$B$4<", "'Rows (2)'!$A$1:$B$4<", "'Rows (3)'!$A$1:$B$4<"}},
		{11, at.Add(2 * time.Hour), []string{"'Rows'!$A$1:$B$4<", "'Rows (2)'!$A$1:$B$4<", "'Rows (3)'!$A$1:$B$4<", "'Rows (4)'!$A$1:$B$3<"}},
	} {
		q := Query{Report: Report{ID: "r", Title: "Rows", Sheet: "Rows"}, Time: c.at}
		_, data := exportWith(t, src(c.rows), q, xlsxOptions{maxSheetRows: 4})
		workbook := strings.ReplaceAll(zipPart(t, data, workbookPart), "&#39;", "'")
		var got []string
		for _, d := range strings.Split(workbook, "</definedName>")[:len(c.want)] {
			got = append(got, d[strings.LastIndex(d, ">")+1:]+"<")
		}
		if !slices.Equal(got, c.want) || strings.Count(workbook, "</definedName>") != len(c.want) {
			t.Errorf("%d rows: the workbook's filter ranges are %q, want %q", c.rows, got, c.want)
		}
		stamp := ">" + c.at.Format(time.RFC3339) + "<"
		if core := zipPart(t, data, corePart); strings.Count(core, stamp) != 2 || strings.Contains(core, templateStamp) {
			t.Errorf("%d rows: the core properties do not state %s twice: %s", c.rows, stamp, core)
		}
	}
}
