package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Type is the type of a report parameter or of a result column.
type Type string

// The types a parameter or a column can have.
const (
	TypeText     Type = "text"
	TypeInt      Type = "int"
	TypeNumber   Type = "number"
	TypeDate     Type = "date"
	TypeDatetime Type = "datetime"
	TypeBool     Type = "bool"
)

// Canonical layouts: what Validate stores and what sources receive.
const (
	dateLayout     = "2006-01-02"
	datetimeLayout = time.RFC3339Nano
)

// maxExactInt is the largest integer a float64 (and so a JSON number read back into
// map[string]any) holds exactly; beyond it an int parameter would silently change.
const maxExactInt = 1 << 53

// ErrUnknownReport is returned (wrapped, with the report's id) for a report that does not exist.
var ErrUnknownReport = errors.New("unknown report")

// ParamError says which parameter is wrong and why.
type ParamError struct {
	Param   string
	Message string
}

// Error reads like: param "rows": must be an integer.
func (e *ParamError) Error() string { return fmt.Sprintf("param %q: %s", e.Param, e.Message) }

// Param declares one typed parameter of a report.
type Param struct {
	Name  string `json:"name"`
	Type  Type   `json:"type"`
	Label string `json:"label,omitempty"`
	// Default is used when the parameter is absent; nil makes the parameter required.
	// Any accepted input form will do; it is converted like a sent value.
	Default any `json:"default,omitempty"`
	// Min and Max bound int and number parameters when set.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// After names another parameter of the same type (int, number, date or datetime)
	// that this one must be later than (greater than): `after=from` on a "to" date. The
	// rule applies when both have a value.
	After string `json:"after,omitempty"`
	// From names the attribute of the person (or token) running the report that gives
	// the parameter its value ("from=person.region" is "region"): row-level parameters.
	// The request may not give it; a person without the attribute cannot run the report.
	From string `json:"from,omitempty"`
}

// orderable is whether parameters of type t can be compared by After.
func orderable(t Type) bool {
	switch t {
	case TypeInt, TypeNumber, TypeDate, TypeDatetime:
		return true
	}
	return false
}

// labelOrName is how messages name the parameter: its label, or its name without one.
func (p Param) labelOrName() string {
	if p.Label != "" {
		return p.Label
	}
	return p.Name
}

// checkAfter checks the After rules of decl on canonical values, in declaration order.
func checkAfter(decl []Param, values map[string]any) error {
	for _, p := range decl {
		if p.After == "" {
			continue
		}
		i := slices.IndexFunc(decl, func(q Param) bool { return q.Name == p.After })
		if i < 0 {
			return &ParamError{Param: p.Name, Message: fmt.Sprintf("must follow parameter %q, which the report does not declare", p.After)}
		}
		v, w := values[p.Name], values[p.After]
		if v == nil || w == nil {
			continue
		}
		c, ok := compareValues(v, w)
		if !ok {
			return &ParamError{Param: p.Name, Message: fmt.Sprintf("cannot be compared with %q", p.After)}
		}
		if c <= 0 {
			return &ParamError{Param: p.Name, Message: fmt.Sprintf("must be after %s (%s)", decl[i].labelOrName(), showValue(w))}
		}
	}
	return nil
}

// compareValues compares two canonical values of one orderable type: -1, 0 or +1, and
// false when they are not of one such type.
func compareValues(a, b any) (int, bool) {
	switch a := a.(type) {
	case int64:
		if b, ok := b.(int64); ok {
			return cmpOrdered(a, b), true
		}
	case float64:
		if b, ok := b.(float64); ok {
			return cmpOrdered(a, b), true
		}
	case string: // dates and datetimes in canonical form
		if b, ok := b.(string); ok {
			ta, errA := parseCanonicalTime(a)
			tb, errB := parseCanonicalTime(b)
			if errA != nil || errB != nil {
				return 0, false
			}
			return ta.Compare(tb), true
		}
	}
	return 0, false
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseCanonicalTime reads a canonical date or datetime.
func parseCanonicalTime(s string) (time.Time, error) {
	if t, err := time.Parse(dateLayout, s); err == nil {
		return t, nil
	}
	return time.Parse(datetimeLayout, s)
}

// showValue is a canonical value as a message shows it.
func showValue(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// validateParams checks params against the declared ones and returns every declared
// parameter in canonical form, defaults applied. Errors are *ParamError.
func validateParams(decl []Param, params map[string]any) (map[string]any, error) {
	// Unknown names first, sorted, so the error does not depend on map order.
	var unknown []string
	for name := range params {
		if !slices.ContainsFunc(decl, func(p Param) bool { return p.Name == name }) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, &ParamError{Param: unknown[0], Message: "unknown parameter"}
	}
	out := make(map[string]any, len(decl))
	for _, p := range decl {
		v, err := p.normalize(params[p.Name])
		if err != nil {
			return nil, &ParamError{Param: p.Name, Message: err.Error()}
		}
		out[p.Name] = v
	}
	if err := checkAfter(decl, out); err != nil {
		return nil, err
	}
	return out, nil
}

// errNUL refuses a value that holds a NUL character (U+0000), whatever the parameter's
// type: PostgreSQL's text and json cannot keep one, and a job whose args held one could
// never be finished there (issue 36), while no report needs one.
var errNUL = errors.New("contains a NUL character")

// normalize converts raw (from JSON, a form or the CLI) to the parameter's canonical value.
func (p Param) normalize(raw any) (any, error) {
	if s, ok := raw.(string); ok && p.Type != TypeText && strings.TrimSpace(s) == "" {
		// An empty form field means "not given" for everything but text.
		raw = nil
	}
	if raw == nil {
		if p.Default == nil {
			return nil, errors.New("is required")
		}
		// Defaults go through the same conversion, so a report file may write them as text.
		raw = p.Default
	}
	if s, ok := raw.(string); ok && strings.IndexByte(s, 0) >= 0 {
		return nil, errNUL
	}
	var (
		v   any
		err error
	)
	switch p.Type {
	case TypeText:
		v, err = toText(raw)
	case TypeInt:
		v, err = toInt(raw)
	case TypeNumber:
		v, err = toNumber(raw)
	case TypeDate:
		v, err = toDate(raw)
	case TypeDatetime:
		v, err = toDatetime(raw)
	case TypeBool:
		v, err = toBool(raw)
	default:
		return nil, fmt.Errorf("has unsupported type %q", p.Type)
	}
	if err != nil {
		return nil, err
	}
	return v, p.checkRange(v)
}

func (p Param) checkRange(v any) error {
	var f float64
	switch v := v.(type) {
	case int64:
		f = float64(v)
	case float64:
		f = v
	default:
		return nil
	}
	num := func(b float64) string { return strconv.FormatFloat(b, 'f', -1, 64) }
	switch {
	case p.Min != nil && p.Max != nil && (f < *p.Min || f > *p.Max):
		return fmt.Errorf("must be between %s and %s", num(*p.Min), num(*p.Max))
	case p.Min != nil && f < *p.Min:
		return fmt.Errorf("must be at least %s", num(*p.Min))
	case p.Max != nil && f > *p.Max:
		return fmt.Errorf("must be at most %s", num(*p.Max))
	}
	return nil
}

func toText(raw any) (string, error) {
	s, ok := raw.(string)
	if !ok {
		return "", errors.New("must be a string")
	}
	return s, nil
}

func toInt(raw any) (int64, error) {
	bad := errors.New("must be an integer")
	var n int64
	switch v := raw.(type) {
	case int:
		n = int64(v)
	case int64:
		n = v
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > maxExactInt {
			return 0, bad
		}
		n = int64(v)
	case json.Number:
		i, err := strconv.ParseInt(v.String(), 10, 64)
		if err != nil {
			// "1e3" or "10.0" are still whole numbers; let the float path decide.
			f, ferr := v.Float64()
			if ferr != nil {
				return 0, bad
			}
			return toInt(f)
		}
		n = i
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, bad
		}
		n = i
	default:
		return 0, bad
	}
	if n > maxExactInt || n < -maxExactInt {
		return 0, fmt.Errorf("must be within ±%d", int64(maxExactInt))
	}
	return n, nil
}

func toNumber(raw any) (float64, error) {
	bad := errors.New("must be a number")
	var f float64
	switch v := raw.(type) {
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case float64:
		f = v
	case json.Number:
		x, err := v.Float64()
		if err != nil {
			return 0, bad
		}
		f = x
	case string:
		// Decimal only, as a person writes a number: ParseFloat also reads Go's
		// "1_000.5", hex "0x1p4" and "Infinity", which an int parameter (ParseInt,
		// base 10) refuses.
		v = strings.TrimSpace(v)
		if strings.Trim(v, "0123456789+-.eE") != "" {
			return 0, bad
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, bad
		}
		f = x
	default:
		return 0, bad
	}
	// NaN and Inf parse but cannot be stored as JSON or compared with bounds.
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, bad
	}
	return f, nil
}

func toDate(raw any) (string, error) {
	switch v := raw.(type) {
	case time.Time:
		return v.Format(dateLayout), nil
	case string:
		t, err := time.Parse(dateLayout, strings.TrimSpace(v))
		if err == nil {
			return t.Format(dateLayout), nil
		}
	}
	return "", errors.New("must be a date (YYYY-MM-DD)")
}

// datetimeLayouts are the accepted inputs: RFC 3339, and the zone-less forms that
// <input type="datetime-local"> and people type, which are taken as UTC.
var datetimeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04",
	dateLayout,
}

func toDatetime(raw any) (string, error) {
	switch v := raw.(type) {
	case time.Time:
		return v.UTC().Format(datetimeLayout), nil
	case string:
		s := strings.TrimSpace(v)
		for _, layout := range datetimeLayouts {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC().Format(datetimeLayout), nil
			}
		}
	}
	return "", errors.New("must be a date and time (RFC 3339, e.g. 2006-01-02T15:04:05Z)")
}

func toBool(raw any) (bool, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1", "on", "yes":
			return true, nil
		case "false", "0", "off", "no":
			return false, nil
		}
	}
	return false, errors.New("must be true or false")
}
