package export

import (
	"errors"
	"testing"
)

// A NUL character (U+0000) in a parameter's value is refused whatever the parameter's
// type: PostgreSQL's text and json cannot hold one, and a job that stored it could never
// finish there (issue 36). The message names the character; the parameter is named too.
func TestValidateParamsRefuseNUL(t *testing.T) {
	for _, tc := range []struct {
		typ Type
		in  string
	}{
		{TypeText, "a\x00b"},
		{TypeText, "\x00"},
		{TypeInt, "1\x00"},
		{TypeNumber, "1.5\x00"},
		{TypeDate, "2026-01-01\x00"},
		{TypeDatetime, "2026-01-01T00:00:00Z\x00"},
		{TypeBool, "true\x00"},
	} {
		decl := []Param{{Name: "p", Type: tc.typ, Default: nil}}
		_, err := validateParams(decl, map[string]any{"p": tc.in})
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != "p" || pe.Message != "contains a NUL character" {
			t.Errorf("%s %q: err = %v, want param \"p\": contains a NUL character", tc.typ, tc.in, err)
		}
	}
	// A default is converted like a sent value, so a report cannot declare one either.
	decl := []Param{{Name: "p", Type: TypeText, Default: "x\x00"}}
	if _, err := validateParams(decl, map[string]any{}); err == nil {
		t.Error("a default holding a NUL was taken")
	}
	// Other control characters are text like any other.
	if out, err := validateParams([]Param{{Name: "p", Type: TypeText}}, map[string]any{"p": "a\tb\x01"}); err != nil || out["p"] != "a\tb\x01" {
		t.Errorf("tab and U+0001: %v, %v", out, err)
	}
}
