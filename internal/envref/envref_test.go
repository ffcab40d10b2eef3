package envref

import (
	"os"
	"path/filepath"
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

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("token", "s3cret\n")
	write("crlf", "s3cret\r\n")
	write("two", "s3cret\n\n")
	write("spaces", " s3cret ")
	write("empty", "\n")
	write("big", strings.Repeat("x", maxSecretFile+1))
	t.Setenv("SHEETQ_TEST_SECRET", "from env")
	for _, tc := range []struct{ in, want, err string }{
		{"literal", "literal", ""},
		{"env:SHEETQ_TEST_SECRET", "from env", ""},
		{"file:token", "s3cret", ""}, // relative to dir
		{"file:" + filepath.Join(dir, "token"), "s3cret", ""},
		{"file:crlf", "s3cret", ""},
		{"file:two", "s3cret\n", ""},    // one newline only
		{"file:spaces", " s3cret ", ""}, // a file's content is taken as written
		{"file:empty", "", "is empty"},
		{"file:big", "", "larger than 64 KiB"},
		{"file:missing", "", "no such file"},
		{"file:", "", `"file:" names no file`},
	} {
		got, err := Secret(tc.in, dir)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Secret(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Secret(%q): err %v, want %q", tc.in, err, tc.err)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("Secret(%q): err %v quotes the secret", tc.in, err)
		}
	}
}
