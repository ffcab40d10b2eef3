package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

// absent marks a test case whose parameter is not sent at all.
type absent struct{}

func TestValidateParamTypes(t *testing.T) {
	req := func(typ Type) Param { return Param{Name: "p", Type: typ} }
	opt := func(typ Type, def any) Param { return Param{Name: "p", Type: typ, Default: def} }
	bounded := Param{Name: "p", Type: TypeInt, Min: ptr(0.0), Max: ptr(10.0)}
	atLeast := Param{Name: "p", Type: TypeNumber, Min: ptr(0.5)}
	atMost := Param{Name: "p", Type: TypeNumber, Max: ptr(2.5)}
	tests := []struct {
		name    string
		param   Param
		in      any
		want    any
		wantErr string // the ParamError's message; empty means no error
	}{
		{"text", req(TypeText), "hello", "hello", ""},
		{"text empty is a value", opt(TypeText, "x"), "", "", ""},
		{"text default", opt(TypeText, "x"), absent{}, "x", ""},
		{"text number", req(TypeText), 5.0, nil, "must be a string"},
		{"text missing", req(TypeText), absent{}, nil, "is required"},
		{"text null", req(TypeText), nil, nil, "is required"},

		{"int float64", req(TypeInt), 42.0, int64(42), ""},
		{"int json.Number", req(TypeInt), json.Number("42"), int64(42), ""},
		{"int json.Number exponent", req(TypeInt), json.Number("1e3"), int64(1000), ""},
		{"int string", req(TypeInt), " 100 ", int64(100), ""},
		{"int Go int", req(TypeInt), 7, int64(7), ""},
		{"int negative", req(TypeInt), "-3", int64(-3), ""},
		{"int fraction", req(TypeInt), 1.5, nil, "must be an integer"},
		{"int fraction json.Number", req(TypeInt), json.Number("1.5"), nil, "must be an integer"},
		{"int fraction string", req(TypeInt), "1.5", nil, "must be an integer"},
		{"int word", req(TypeInt), "many", nil, "must be an integer"},
		{"int bool", req(TypeInt), true, nil, "must be an integer"},
		{"int beyond float precision", req(TypeInt), "9007199254740993", nil, "must be within ±9007199254740992"},
		{"int huge float", req(TypeInt), 1e300, nil, "must be an integer"},
		{"int empty string is absent", opt(TypeInt, int64(5)), "", int64(5), ""},
		{"int empty string required", req(TypeInt), "  ", nil, "is required"},
		{"int in range", bounded, "10", int64(10), ""},
		{"int below range", bounded, -1.0, nil, "must be between 0 and 10"},
		{"int above range", bounded, 11.0, nil, "must be between 0 and 10"},

		{"number float64", req(TypeNumber), 2.5, 2.5, ""},
		{"number int", req(TypeNumber), 3, 3.0, ""},
		{"number json.Number", req(TypeNumber), json.Number("0.25"), 0.25, ""},
		{"number string", req(TypeNumber), "1e2", 100.0, ""},
		{"number word", req(TypeNumber), "lots", nil, "must be a number"},
		{"number NaN string", req(TypeNumber), "NaN", nil, "must be a number"},
		{"number string signed", req(TypeNumber), " -.5 ", -0.5, ""},
		{"number underscores", req(TypeNumber), "1_000.5", nil, "must be a number"},
		{"number hex", req(TypeNumber), "0x1p4", nil, "must be a number"},
		{"number Infinity string", req(TypeNumber), "Infinity", nil, "must be a number"},
		{"number Inf", req(TypeNumber), math.Inf(1), nil, "must be a number"},
		{"number bool", req(TypeNumber), false, nil, "must be a number"},
		{"number default", opt(TypeNumber, 0.0), absent{}, 0.0, ""},
		{"number at least", atLeast, 0.4, nil, "must be at least 0.5"},
		{"number at most", atMost, 2.6, nil, "must be at most 2.5"},
		{"number at most ok", atMost, 2.5, 2.5, ""},

		{"date", req(TypeDate), "2024-02-29", "2024-02-29", ""},
		{"date time.Time", req(TypeDate), time.Date(2024, 3, 1, 23, 0, 0, 0, time.UTC), "2024-03-01", ""},
		{"date not a day", req(TypeDate), "2023-02-29", nil, "must be a date (YYYY-MM-DD)"},
		{"date other layout", req(TypeDate), "01/02/2024", nil, "must be a date (YYYY-MM-DD)"},
		{"date number", req(TypeDate), 20240101.0, nil, "must be a date (YYYY-MM-DD)"},
		{"date default", opt(TypeDate, "2024-01-01"), "", "2024-01-01", ""},

		{"datetime RFC 3339 offset", req(TypeDatetime), "2024-01-02T03:04:05+02:00", "2024-01-02T01:04:05Z", ""},
		{"datetime fraction", req(TypeDatetime), "2024-01-02T03:04:05.5Z", "2024-01-02T03:04:05.5Z", ""},
		{"datetime local input", req(TypeDatetime), "2024-01-02T03:04", "2024-01-02T03:04:00Z", ""},
		{"datetime space", req(TypeDatetime), "2024-01-02 03:04:05", "2024-01-02T03:04:05Z", ""},
		{"datetime date only", req(TypeDatetime), "2024-01-02", "2024-01-02T00:00:00Z", ""},
		{"datetime time.Time", req(TypeDatetime), time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), "2024-01-02T02:04:05Z", ""},
		{"datetime bad", req(TypeDatetime), "yesterday", nil, "must be a date and time (RFC 3339, e.g. 2006-01-02T15:04:05Z)"},
		{"datetime number", req(TypeDatetime), 1.0, nil, "must be a date and time (RFC 3339, e.g. 2006-01-02T15:04:05Z)"},

		{"bool true", req(TypeBool), true, true, ""},
		{"bool false", req(TypeBool), false, false, ""},
		{"bool string true", req(TypeBool), "true", true, ""},
		{"bool string FALSE", req(TypeBool), "FALSE", false, ""},
		{"bool 1", req(TypeBool), "1", true, ""},
		{"bool 0", req(TypeBool), "0", false, ""},
		{"bool on", req(TypeBool), "on", true, ""},
		{"bool off", req(TypeBool), "off", false, ""},
		{"bool word", req(TypeBool), "maybe", nil, "must be true or false"},
		{"bool number", req(TypeBool), 1.0, nil, "must be true or false"},
		{"bool default", opt(TypeBool, false), absent{}, false, ""},
		{"default as text", opt(TypeInt, "5"), absent{}, int64(5), ""},
		{"bad default", opt(TypeDate, "soon"), absent{}, nil, "must be a date (YYYY-MM-DD)"},

		{"unsupported type", req("money"), "1", nil, `has unsupported type "money"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := map[string]any{}
			if _, ok := tt.in.(absent); !ok {
				in["p"] = tt.in
			}
			got, err := validateParams([]Param{tt.param}, in)
			if tt.wantErr != "" {
				var pe *ParamError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a *ParamError", err)
				}
				if pe.Param != "p" || pe.Message != tt.wantErr {
					t.Fatalf("err = %+v, want param p: %q", pe, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if v := got["p"]; !reflect.DeepEqual(v, tt.want) {
				t.Fatalf("got %#v, want %#v", v, tt.want)
			}
		})
	}
}

// Canonical values must survive being stored as JSON and validated again in Run.
func TestValidateParamsRoundTrip(t *testing.T) {
	decl := []Param{
		{Name: "t", Type: TypeText}, {Name: "i", Type: TypeInt}, {Name: "n", Type: TypeNumber},
		{Name: "d", Type: TypeDate}, {Name: "dt", Type: TypeDatetime}, {Name: "b", Type: TypeBool},
	}
	first, err := validateParams(decl, map[string]any{
		"t": "x", "i": "9007199254740992", "n": "0.1", "d": "2024-01-02", "dt": "2024-01-02T03:04", "b": "on",
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, useNumber := range []bool{false, true} {
		var back map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		if useNumber {
			dec.UseNumber()
		}
		if err := dec.Decode(&back); err != nil {
			t.Fatal(err)
		}
		second, err := validateParams(decl, back)
		if err != nil {
			t.Fatalf("useNumber=%v: %v", useNumber, err)
		}
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("useNumber=%v: %#v after a round trip, want %#v", useNumber, second, first)
		}
	}
}

func TestKindValidate(t *testing.T) {
	k := New(Config{})
	tests := []struct {
		name      string
		report    string
		params    map[string]any
		want      map[string]any
		wantParam string // the ParamError's parameter, if one is expected
	}{
		{"defaults", "demo", nil, map[string]any{"rows": int64(1000), "seconds": 0.0, "fail_first": int64(0)}, ""},
		{"form strings", "demo", map[string]any{"rows": "10", "seconds": "1.5", "fail_first": ""},
			map[string]any{"rows": int64(10), "seconds": 1.5, "fail_first": int64(0)}, ""},
		{"json numbers", "demo", map[string]any{"rows": 10.0, "fail_first": 2.0},
			map[string]any{"rows": int64(10), "seconds": 0.0, "fail_first": int64(2)}, ""},
		{"rows max", "demo", map[string]any{"rows": 10_000_000.0},
			map[string]any{"rows": int64(10_000_000), "seconds": 0.0, "fail_first": int64(0)}, ""},
		{"too many rows", "demo", map[string]any{"rows": 10_000_001.0}, nil, "rows"},
		{"negative rows", "demo", map[string]any{"rows": "-1"}, nil, "rows"},
		{"too slow", "demo", map[string]any{"seconds": 86_401.0}, nil, "seconds"},
		{"negative fail_first", "demo", map[string]any{"fail_first": -1.0}, nil, "fail_first"},
		{"unknown param", "demo", map[string]any{"rows": 1.0, "colour": "red", "bogus": 1.0}, nil, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := k.Validate(tt.report, tt.params)
			if tt.wantParam != "" {
				var pe *ParamError
				if !errors.As(err, &pe) || pe.Param != tt.wantParam {
					t.Fatalf("err = %v, want a ParamError for %q", err, tt.wantParam)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Report != tt.report || !reflect.DeepEqual(got.Params, tt.want) {
				t.Fatalf("got %+v, want report %s params %v", got, tt.report, tt.want)
			}
		})
	}
}

func TestKindValidateUnknownReport(t *testing.T) {
	_, err := New(Config{}).Validate("nope", nil)
	if !errors.Is(err, ErrUnknownReport) {
		t.Fatalf("err = %v, want ErrUnknownReport", err)
	}
	if got, want := err.Error(), `unknown report "nope"`; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestParamErrorMessage(t *testing.T) {
	err := error(&ParamError{Param: "rows", Message: "must be an integer"})
	if got, want := err.Error(), `param "rows": must be an integer`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestBuiltinReport: the built-in demo report and its params' JSON, as GET
// /api/v1/reports lists them.
func TestBuiltinReport(t *testing.T) {
	got := Builtin()
	if len(got) != 1 || got[0].ID != "demo" || got[0].Title != "Demo rows" {
		t.Fatalf("built-in reports = %+v, want the demo report", got)
	}
	raw, err := json.Marshal(got[0].Params)
	if err != nil {
		t.Fatal(err)
	}
	want := `[` +
		`{"name":"rows","type":"int","label":"Rows","default":1000,"min":0,"max":10000000},` +
		`{"name":"seconds","type":"number","label":"Spread over seconds","default":0,"min":0,"max":86400},` +
		`{"name":"fail_first","type":"int","label":"Fail first attempts","default":0,"min":0}]`
	if string(raw) != want {
		t.Fatalf("JSON\n got %s\nwant %s", raw, want)
	}
}

// after= refuses a value that does not follow the other parameter's, for each orderable
// type, and names the other parameter by its label and value; a missing value (no
// default) is left to the required check.
func TestValidateParamsAfter(t *testing.T) {
	pair := func(typ Type) []Param {
		return []Param{{Name: "from", Type: typ, Label: "From"}, {Name: "to", Type: typ, After: "from"}}
	}
	tests := []struct {
		name     string
		decl     []Param
		from, to any
		err      string
	}{
		{"date later", pair(TypeDate), "2025-03-01", "2025-03-02", ""},
		{"date equal", pair(TypeDate), "2025-03-01", "2025-03-01", "must be after From (2025-03-01)"},
		{"date earlier", pair(TypeDate), "2025-03-31", "2025-03-01", "must be after From (2025-03-31)"},
		{"datetime later by a second", pair(TypeDatetime), "2025-03-01T10:00:00Z", "2025-03-01 10:00:01", ""},
		{"datetime earlier across zones", pair(TypeDatetime), "2025-03-01T10:00:00Z", "2025-03-01T11:00:00+02:00",
			"must be after From (2025-03-01T10:00:00Z)"},
		{"int", pair(TypeInt), 10, 11, ""},
		{"int equal", pair(TypeInt), 10, "10", "must be after From (10)"},
		{"number", pair(TypeNumber), 1.5, 1.25, "must be after From (1.5)"},
		{"no label: the name", []Param{{Name: "lo", Type: TypeInt}, {Name: "hi", Type: TypeInt, After: "lo"}}, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := map[string]any{tt.decl[0].Name: tt.from, tt.decl[1].Name: tt.to}
			if tt.from == nil {
				in = map[string]any{"lo": 5, "hi": 5}
				tt.err = "must be after lo (5)"
			}
			_, err := validateParams(tt.decl, in)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != tt.decl[1].Name || pe.Message != tt.err {
				t.Fatalf("err = %v, want param %q: %s", err, tt.decl[1].Name, tt.err)
			}
		})
	}
	// A required "from" left out is its own error, not the rule's.
	_, err := validateParams(pair(TypeDate), map[string]any{"to": "2025-03-01"})
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "from" || pe.Message != "is required" {
		t.Fatalf("err = %v, want from is required", err)
	}
}

// TestBindAttrs: a from=person.<attr> parameter takes the runner's attribute, a request
// that gives one is refused, and a runner without the attribute cannot run the report.
func TestBindAttrs(t *testing.T) {
	rep := Report{ID: "sales", Params: []Param{{Name: "region", Type: TypeText, From: "region"}, {Name: "year", Type: TypeInt}}}
	attrs := func(m map[string]string) AttrFunc {
		return func(n string) (string, bool) { v, ok := m[n]; return v, ok }
	}
	got, err := bindAttrs(rep, map[string]any{"year": 2025}, attrs(map[string]string{"region": "North"}))
	if err != nil || got["region"] != "North" || got["year"] != 2025 {
		t.Fatalf("bound = %v, %v", got, err)
	}
	var pe *ParamError
	if _, err := bindAttrs(rep, map[string]any{"region": "South"}, attrs(map[string]string{"region": "North"})); !errors.As(err, &pe) || pe.Param != "region" {
		t.Fatalf("a request giving region: %v, want a *ParamError", err)
	}
	var ae *AttrError
	for _, attr := range []AttrFunc{nil, attrs(map[string]string{"team": "x"})} {
		if _, err := bindAttrs(rep, nil, attr); !errors.As(err, &ae) || ae.Attr != "region" || ae.Param != "region" {
			t.Fatalf("without the attribute: %v, want an *AttrError", err)
		}
	}
	plain := Report{ID: "p", Params: []Param{{Name: "year", Type: TypeInt}}}
	in := map[string]any{"year": 1}
	if got, err := bindAttrs(plain, in, nil); err != nil || len(got) != 1 {
		t.Fatalf("a report without from=: %v, %v", got, err)
	}
}
