package cli

import (
	"regexp"
	"strings"
	"testing"
)

// Every command's --help writes its flags with two dashes, as docs/cli.md does (one-letter
// flags such as -p and -o with one).
func TestHelpShowsTwoDashes(t *testing.T) {
	singleDash := regexp.MustCompile(`(?m)^  -[A-Za-z0-9][-A-Za-z0-9]+\b`)
	twoDashes := regexp.MustCompile(`(?m)^  --[a-z][-a-z0-9]+( \S+)?\n    \t\S`)
	for _, args := range [][]string{
		{"serve"}, {"reports", "check"}, {"export"}, {"backup"}, {"doctor"}, {"store", "copy"}, {"loadtest"},
		{"jobs", "list"}, {"jobs", "show"}, {"jobs", "wait"}, {"jobs", "download"}, {"jobs", "cancel"},
		{"jobs", "retry"}, {"jobs", "delete"}, {"jobs", "events"},
	} {
		stdout, stderr, _ := runCLI(t, append(args, "--help")...)
		help := stdout + stderr
		if m := singleDash.FindString(help); m != "" {
			t.Errorf("%q --help lists %q with one dash:\n%s", args, m, help)
		}
		if !twoDashes.MatchString(help) {
			t.Errorf("%q --help lists no --flag:\n%s", args, help)
		}
	}
	stdout, stderr, _ := runCLI(t, "export", "--help")
	for _, want := range []string{"\n  --server URL\n    \tserver URL", "\n  -p name=value\n", "\n  -o FILE\n", "\n  --wait\n"} {
		if !strings.Contains(stdout+stderr, want) {
			t.Errorf("export --help lacks %q:\n%s", want, stdout+stderr)
		}
	}
	stdout, stderr, _ = runCLI(t, "jobs", "list", "--help")
	if want := "\n  --limit N\n    \tat most N exports (1-1000) (default 50)\n"; !strings.Contains(stdout+stderr, want) {
		t.Errorf("jobs list --help lacks %q:\n%s", want, stdout+stderr)
	}
}

// A bad flag value is one line on stderr, with a pointer to --help, and exit 2; not the
// error, the whole usage text and the error again.
func TestBadFlagIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "demo", "-p", "rows"}, `sheetq: invalid value "rows" for flag -p: want name=value, got "rows" (see sheetq export --help)` + "\n"},
		{[]string{"export", "demo", "-p", "=5", "--wait"}, `sheetq: invalid value "=5" for flag -p: want name=value, got "=5" (see sheetq export --help)` + "\n"},
		{[]string{"jobs", "list", "--limit", "many"}, `sheetq: invalid value "many" for flag --limit: want a whole number from 1 to 1000 (see sheetq jobs list --help)` + "\n"},
		{[]string{"serve", "--workers", "abc"}, `sheetq: invalid value "abc" for flag --workers: want a whole number from 1 to 256 (see sheetq serve --help)` + "\n"},
		{[]string{"serve", "--stale-after", "90"}, `sheetq: invalid value "90" for flag --stale-after: want a duration, such as 30s, 5m or 1h30m (see sheetq serve --help)` + "\n"},
		{[]string{"jobs", "wait", "x", "--nope"}, "sheetq: flag provided but not defined: -nope (see sheetq jobs wait --help)\n"},
		{[]string{"reports", "check", "--config"}, "sheetq: flag needs an argument: -config (see sheetq reports check --help)\n"},
	} {
		stdout, stderr, code := runCLI(t, tc.args...)
		if code != 2 || stdout != "" || stderr != tc.want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestVersionArgs: version prints the version and takes nothing else; an argument is a
// usage error (exit 2, one line), not ignored.
func TestVersionArgs(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		if stdout, stderr, code := runCLI(t, args...); code != 0 || stdout != "test\n" || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and the version", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"version", "--json"}, {"version", "serve"}, {"--version", "extra"}} {
		stdout, stderr, code := runCLI(t, args...)
		if code != 2 || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "sheetq: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, stdout, stderr)
		}
	}
}
