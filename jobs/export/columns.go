package export

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ColumnSpec is one "-- column: NAME "Label" TYPE(FORMAT)" line of a report: how the
// column the query returns as Name looks in the file. Empty fields keep what the source
// says (Label: the name; Type: the driver's type; Format: the writer's default).
type ColumnSpec struct {
	Name   string `json:"name"`
	Label  string `json:"label,omitempty"`
	Type   Type   `json:"type,omitempty"`
	Format string `json:"format,omitempty"`
}

// String is the spec as a report line writes it, after "-- column: ".
func (c ColumnSpec) String() string {
	s := c.Name
	if c.Label != "" {
		s += " " + strconv.Quote(c.Label)
	}
	if c.Type != "" {
		s += " " + string(c.Type)
		if c.Format != "" {
			s += "(" + c.Format + ")"
		}
	}
	return s
}

// withColumns wraps src so that a report's column lines apply to the rows it streams,
// whatever writer receives them. warn gets, after a stream that succeeded, one message
// per column line that matched nothing and per column whose values did not all convert.
func withColumns(src Source, specs []ColumnSpec, warn func(string)) Source {
	if len(specs) == 0 {
		return src
	}
	return columnSource{src: src, specs: specs, warn: warn}
}

type columnSource struct {
	src   Source
	specs []ColumnSpec
	warn  func(string)
}

func (s columnSource) Stream(ctx context.Context, q Query, w RowWriter) error {
	cw := &columnWriter{w: w, specs: s.specs}
	if err := s.src.Stream(ctx, q, cw); err != nil {
		return err
	}
	if s.warn != nil {
		for _, msg := range cw.warnings() {
			s.warn(msg)
		}
	}
	return nil
}

// columnWriter is the RowWriter a source streams into when its report has column lines:
// it gives the columns their labels, formats and types, and converts each value to its
// column's declared type on the way to the writer.
type columnWriter struct {
	w     RowWriter
	specs []ColumnSpec

	cols      []Column
	from      []Type   // the source's type of each column, before a line changed it
	convert   []bool   // whether column i's values are converted to cols[i].Type
	bad       []int    // per column: values that did not convert and stay text
	firstBad  []string // per column: the first of them, for the warning
	unmatched []string // lines naming a column the query does not return
	buf       []any    // the converted row, reused: writers keep no values
	anyConv   bool     // whether any column converts
	names     []string // the query's column names, for the unmatched warning
}

func (c *columnWriter) Begin(cols []Column, total int64) error {
	c.cols = make([]Column, len(cols))
	copy(c.cols, cols) // the source's slice stays the source's
	c.from = make([]Type, len(cols))
	c.convert = make([]bool, len(cols))
	c.bad = make([]int, len(cols))
	c.firstBad = make([]string, len(cols))
	c.names = make([]string, len(cols))
	for i, col := range cols {
		c.from[i], c.names[i] = col.Type, col.Name
	}
	for _, spec := range c.specs {
		matched := c.apply(spec, func(a, b string) bool { return a == b })
		// PostgreSQL folds unquoted names to lowercase, so a line written as the SQL
		// reads (UnitPrice) still finds its column (unitprice); the parser refuses two
		// lines that differ only in case.
		if !matched {
			matched = c.apply(spec, strings.EqualFold)
		}
		if !matched {
			c.unmatched = append(c.unmatched, spec.Name)
		}
	}
	if c.anyConv {
		c.buf = make([]any, len(cols))
	}
	return c.w.Begin(c.cols, total)
}

// apply sets spec on every column whose name matches, and reports whether one did.
func (c *columnWriter) apply(spec ColumnSpec, match func(a, b string) bool) bool {
	found := false
	for i := range c.cols {
		if !match(c.cols[i].Name, spec.Name) {
			continue
		}
		found = true
		if spec.Label != "" {
			c.cols[i].Label = spec.Label
		}
		if spec.Format != "" {
			c.cols[i].Format = spec.Format
		}
		if spec.Type != "" {
			c.cols[i].Type = spec.Type
			c.convert[i], c.anyConv = true, true
		}
	}
	return found
}

func (c *columnWriter) Row(values []any) error {
	if !c.anyConv {
		return c.w.Row(values)
	}
	out := c.buf[:len(values)]
	for i, v := range values {
		if i >= len(c.convert) || !c.convert[i] {
			out[i] = v
			continue
		}
		cv, ok := convertValue(v, c.from[i], c.cols[i].Type)
		if !ok {
			if c.bad[i] == 0 {
				c.firstBad[i] = textOf(v, c.from[i])
			}
			c.bad[i]++
		}
		out[i] = cv
	}
	return c.w.Row(out)
}

// warnings lists the column lines that matched no column, then per column the values
// that stayed text. Neither fails the export: the file is still right, only plainer.
func (c *columnWriter) warnings() []string {
	var out []string
	for _, name := range c.unmatched {
		out = append(out, fmt.Sprintf("column line %q: the query returns no such column (it returns %s)",
			name, strings.Join(c.names, ", ")))
	}
	for i, n := range c.bad {
		if n == 0 {
			continue
		}
		what := "1 value is"
		if n > 1 {
			what = strconv.Itoa(n) + " values are"
		}
		out = append(out, fmt.Sprintf("column %q: %s not %s and stayed text (the first: %q)",
			c.cols[i].Name, what, c.cols[i].Type, shorten(c.firstBad[i], 40)))
	}
	return out
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// convertValue converts a value the source sent for a column of type from into what a
// RowWriter takes for type to. ok is false when it cannot: the value is then returned
// as text, which every writer shows as it is.
func convertValue(v any, from, to Type) (out any, ok bool) {
	if v == nil {
		return nil, true
	}
	if b, isBytes := v.([]byte); isBytes {
		if !utf8.Valid(b) {
			return bytesText(b), to == TypeText
		}
		v = string(b)
	}
	switch to {
	case TypeText:
		return textOf(v, from), true
	case TypeInt:
		switch x := v.(type) {
		case bool:
			if x {
				return int64(1), true
			}
			return int64(0), true
		case float64:
			if x == math.Trunc(x) && math.Abs(x) <= maxExactInt {
				return int64(x), true
			}
		case float32:
			return convertValue(float64(x), from, to)
		case string:
			s := strings.TrimSpace(x)
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, true
			}
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return convertValue(f, from, to)
			}
		default:
			if n, isInt64 := intValue(v).(int64); isInt64 {
				return n, true
			}
		}
	case TypeNumber:
		switch x := v.(type) {
		case bool:
			if x {
				return 1.0, true
			}
			return 0.0, true
		case string:
			v = strings.TrimSpace(x)
		}
		if f, isFloat := numberValue(v, false).(float64); isFloat {
			return f, true
		}
		if n, isInt64 := intValue(v).(int64); isInt64 {
			return float64(n), true
		}
	case TypeBool:
		switch x := v.(type) {
		case bool:
			return x, true
		case float64:
			return x != 0, true
		case string:
			switch strings.ToLower(strings.TrimSpace(x)) {
			case "1", "t", "true", "yes", "y":
				return true, true
			case "0", "f", "false", "no", "n":
				return false, true
			}
		default:
			if n, isInt64 := intValue(v).(int64); isInt64 {
				return n != 0, true
			}
		}
	case TypeDate, TypeDatetime:
		switch v.(type) {
		case time.Time, string:
			switch t := timeValue(v, to == TypeDate).(type) {
			case time.Time, nil:
				return t, true
			}
		}
	}
	return textOf(v, from), false
}

// textOf is v as text, as a column of type t shows it: numbers in their shortest exact
// form, dates as 2006-01-02, datetimes as 2006-01-02 15:04:05 (with the fraction when
// there is one).
func textOf(v any, t Type) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return bytesText(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case time.Time:
		if t == TypeDate {
			return x.Format(dateLayout)
		}
		return x.Format("2006-01-02 15:04:05.999999999")
	}
	return fmt.Sprint(v)
}
