package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// Serve settings come from flags, then SHEETQ_* variables, then the config file's
// [serve] table, then the defaults; the file may not set where it or the data live,
// nor tokens, and an unknown key is an error.
func TestFlagsBeatEnvironmentBeatFile(t *testing.T) {
	newFS := func() (*flag.FlagSet, *int, *string, *string) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		workers := fs.Int("workers", 2, "")
		retention := fs.String("retention", "168h", "")
		proxies := fs.String("trusted-proxies", "", "")
		fs.String("data", "", "")
		fs.String("token", "", "")
		return fs, workers, retention, proxies
	}
	file := map[string]any{"workers": int64(3), "retention": "48h", "trusted_proxies": []any{"10.0.0.0/8", "192.168.0.0/16"}}

	t.Setenv("SHEETQ_WORKERS", "4")
	fs, workers, retention, proxies := newFS()
	if err := parseWithEnv(fs, []string{"--workers", "5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := applyFileFlags(fs, file, "sheetq.toml"); err != nil {
		t.Fatal(err)
	}
	if *workers != 5 || *retention != "48h" || *proxies != "10.0.0.0/8,192.168.0.0/16" {
		t.Fatalf("flag over env over file: workers %d, retention %s, proxies %s", *workers, *retention, *proxies)
	}

	fs, workers, _, _ = newFS()
	if err := parseWithEnv(fs, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := applyFileFlags(fs, file, "sheetq.toml"); err != nil || *workers != 4 {
		t.Fatalf("env over file: workers %d, %v", *workers, err)
	}

	t.Setenv("SHEETQ_WORKERS", "many")
	fs, _, _, _ = newFS()
	if err := parseWithEnv(fs, nil); err == nil || !strings.Contains(err.Error(), "SHEETQ_WORKERS") {
		t.Fatalf("a bad SHEETQ_WORKERS: %v, want an error naming it", err)
	} else if _, ok := err.(usageError); !ok {
		t.Fatalf("a bad SHEETQ_WORKERS: %T, want a usage error", err)
	}

	for key, want := range map[string]string{
		"wrokers": "unknown key serve.wrokers",
		"data":    "cannot be set in the config file",
		"token":   "[[tokens]]",
		"workers": "serve.workers",
	} {
		fs, _, _, _ = newFS()
		var v any = "x"
		if key == "workers" {
			v = "many"
		}
		_, err := applyFileFlags(fs, map[string]any{key: v}, "sheetq.toml")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sheetq.toml") {
			t.Errorf("[serve] %s = %v: %v, want an error with %q", key, v, err, want)
		}
	}
}

// Client commands take their flags before, between or after the positional arguments,
// and "--" ends the flags.
func TestParseArgsInterleaved(t *testing.T) {
	t.Setenv("SHEETQ_SERVER", "")
	for _, tt := range []struct {
		args []string
		pos  string
		wait bool
	}{
		{[]string{"demo", "--wait"}, "demo", true},
		{[]string{"--wait", "demo"}, "demo", true},
		{[]string{"a", "--wait", "b"}, "a b", true},
		{[]string{"--", "--wait"}, "--wait", false},
	} {
		fs := flag.NewFlagSet("export", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		wait := fs.Bool("wait", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || strings.Join(pos, " ") != tt.pos || *wait != tt.wait {
			t.Errorf("parseArgs(%q) = %q, wait %v, %v; want %q, wait %v", tt.args, pos, *wait, err, tt.pos, tt.wait)
		}
	}
}
