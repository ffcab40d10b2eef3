package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// Exit gives each kind of error its status and one line on stderr, and prints nothing
// for --help, whose text is already out.
func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
		line string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 2, ""},
		{usageError{errors.New("bad flag")}, 2, "sheetq: bad flag\n"},
		{fmt.Errorf("serve: %w", usageError{errors.New("wrapped")}), 2, "sheetq: serve: wrapped\n"},
		{exitError{exitCanceled, errors.New("export x was canceled")}, 3, "sheetq: export x was canceled\n"},
		{exitError{exitInterrupted, errors.New("interrupted")}, 130, "sheetq: interrupted\n"},
		{errors.New("disk on fire"), 1, "sheetq: disk on fire\n"},
	} {
		var stderr strings.Builder
		if code := Exit(tt.err, &stderr); code != tt.code || stderr.String() != tt.line {
			t.Errorf("Exit(%v) = %d, %q; want %d, %q", tt.err, code, stderr.String(), tt.code, tt.line)
		}
	}
	if _, _, code := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("an unknown command: exit %d, want 2", code)
	}
	if stdout, _, code := runCLI(t, "version"); code != 0 || !strings.HasPrefix(stdout, "test") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
}
