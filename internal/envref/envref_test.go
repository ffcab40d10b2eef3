package envref

import (
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Setenv("SHEETQ_TEST_ENVREF", "  s3cret \n")
	t.Setenv("SHEETQ_TEST_ENVREF_BLANK", " ")
	for _, tc := range []struct{ in, want, err string }{
		{"plain value", "plain value", ""},
		{"file:shop.db?mode=ro", "file:shop.db?mode=ro", ""}, // only env: is special
		{"env:SHEETQ_TEST_ENVREF", "s3cret", ""},
		{"env:SHEETQ_TEST_ENVREF_BLANK", "", "environment variable SHEETQ_TEST_ENVREF_BLANK is not set"},
		{"env:SHEETQ_TEST_ENVREF_UNSET", "", "environment variable SHEETQ_TEST_ENVREF_UNSET is not set"},
		{"env:", "", `"env:" names no environment variable`},
	} {
		got, err := Resolve(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Resolve(%q): err %v, want %q", tc.in, err, tc.err)
		}
	}
}
