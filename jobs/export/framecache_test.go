package export

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A frame from the cache must be the frame the export would have made itself: each
// export below runs once with the cache holding every earlier export's frames and once
// with it empty, and the two files must be the same bytes. The sources differ in one
// thing each that goes into a frame (header text, widths, number formats, a later
// sheet's frame), so a key that left one out would hand a wrong frame to some of them.
func TestFrameCacheGivesTheFrameTheExportWouldMake(t *testing.T) {
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
	cases := []struct {
		name string
		src  sliceSource
		opt  xlsxOptions
	}{
		{"base", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}},
		{"header label", sliceSource{cols: cols("Customer", ""), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}},
		{"wider column", sliceSource{cols: cols("", ""), rows: rows(strings.Repeat("Ada Lovelace ", 4), 5), total: 5}, xlsxOptions{}},
		{"number format", sliceSource{cols: cols("", "#,##0.00"), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}},
		{"another format", sliceSource{cols: cols("", "0.0%"), rows: rows("Ada Lovelace", 5), total: 5}, xlsxOptions{}},
		{"later sheets", sliceSource{cols: cols("", ""), rows: rows("Ada Lovelace", 9), total: 9}, xlsxOptions{maxSheetRows: 4}},
	}
	q := Query{Report: Report{ID: "r", Title: "Frames", Sheet: "Rows"}, Time: at}
	warm := make([][]byte, len(cases))
	frames.reset()
	for i, c := range cases {
		_, warm[i] = exportWith(t, c.src, q, c.opt)
	}
	if frames.len() < len(cases) {
		t.Fatalf("the cache holds %d frames after %d exports of different shapes", frames.len(), len(cases))
	}
	for i, c := range cases {
		frames.reset()
		_, cold := exportWith(t, c.src, q, c.opt)
		if !bytes.Equal(warm[i], cold) {
			t.Errorf("%s: the file made with the cache differs from the one made without it", c.name)
		}
	}
	// And the same export again takes its frame from the cache.
	frames.reset()
	exportWith(t, cases[0].src, q, cases[0].opt)
	n := frames.len()
	exportWith(t, cases[0].src, q, cases[0].opt)
	if frames.len() != n {
		t.Errorf("exporting the same shape again added frames: %d, then %d", n, frames.len())
	}
}

func TestFrameCacheStaysBounded(t *testing.T) {
	c := frameCache{max: 3}
	for i := range 10 {
		c.put(strings.Repeat("k", i+1), &frameTemplate{})
		if c.len() > 3 {
			t.Fatalf("after %d puts the cache holds %d frames, more than its 3", i+1, c.len())
		}
	}
	if c.get(strings.Repeat("k", 10)) == nil {
		t.Error("the last frame put is not in the cache")
	}
}
