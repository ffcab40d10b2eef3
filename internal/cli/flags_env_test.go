package cli

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A value from SHEETQ_<NAME> that the command refuses after parsing is blamed on the
// variable, as a value that does not parse is: a user who never typed --limit learns
// where the 0 came from. The same value on the command line is not (and beats the
// variable), and the variable of a flag that may hold a password is named without it.
func TestCLIEnvValuesRefusedAfterParsingNameTheVariable(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/exports":
			_, _ = io.WriteString(w, `{"exports":[]}`)
		case "/api/v1/reports":
			_, _ = io.WriteString(w, `{"reports":[{"id":"demo"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	data := func() string { return filepath.Join(t.TempDir(), "data") }
	serve := func() []string { return []string{"serve", "--data", data(), "--addr", "127.0.0.1:0"} }
	for _, tt := range []struct {
		env, value string
		args       []string
		want       string
	}{
		{"SHEETQ_LIMIT", "0", []string{"jobs", "list", "--server", srv.URL}, `SHEETQ_LIMIT="0": --limit must be from 1 to 1000`},
		{"SHEETQ_REPORT", "nope", []string{"jobs", "list", "--server", srv.URL}, `SHEETQ_REPORT="nope": --report nope: the server has no such report`},
		{"SHEETQ_SERVER", "http://", []string{"jobs", "show", "x"}, `SHEETQ_SERVER="http://": --server "http://": want`},
		{"SHEETQ_SERVER", "localhost:8080", []string{"schedules", "list"}, `SHEETQ_SERVER="localhost:8080": --server`},
		{"SHEETQ_FORMAT", "pdf", []string{"export", "demo", "--server", srv.URL}, `SHEETQ_FORMAT="pdf": --format "pdf": want xlsx or csv`},
		{"SHEETQ_BOM", "true", []string{"export", "demo", "--server", srv.URL}, `SHEETQ_BOM="true": --bom needs --format csv`},
		{"SHEETQ_CSV_FORMULAS", "keep", []string{"export", "demo", "--server", srv.URL}, `SHEETQ_CSV_FORMULAS="keep": --csv-formulas keep needs --format csv`},
		{"SHEETQ_CSV_FORMULAS", "off", []string{"export", "demo", "--format", "csv", "--server", srv.URL}, `SHEETQ_CSV_FORMULAS="off": --csv-formulas "off": want neutralise`},
		{"SHEETQ_O", "x.csv", []string{"export", "demo", "--server", srv.URL}, `SHEETQ_O="x.csv": -o needs --wait`},
		{"SHEETQ_O", dir, []string{"jobs", "download", "j1", "--server", srv.URL}, `SHEETQ_O="` + dir + `": -o ` + dir + `: is a folder`},
		{"SHEETQ_MIN_FREE_MB", "-1", []string{"doctor", "--data", dir}, `SHEETQ_MIN_FREE_MB="-1": --min-free-mb -1: want 0 to`},
		{"SHEETQ_FILES", "http://bucket", []string{"doctor", "--data", dir}, `SHEETQ_FILES="http://bucket": --files: file store URL`},
		{"SHEETQ_WORKERS", "0", serve(), `SHEETQ_WORKERS="0": --workers must be from 1 to 256`},
		// A value that is no value of the flag's type says what the flag wants, not
		// the flag package's "parse error" (issue 37).
		{"SHEETQ_WORKERS", "abc", serve(), `SHEETQ_WORKERS="abc": want a whole number from 1 to 256`},
		{"SHEETQ_WORKER_NICE", "low", serve(), `SHEETQ_WORKER_NICE="low": want a whole number from 0 to 19`},
		{"SHEETQ_MAX_ATTEMPTS", "3.5", serve(), `SHEETQ_MAX_ATTEMPTS="3.5": want a whole number`},
		{"SHEETQ_HEARTBEAT", "5", serve(), `SHEETQ_HEARTBEAT="5": want a duration, such as 30s, 5m or 1h30m`},
		{"SHEETQ_POLL_ONLY", "maybe", serve(), `SHEETQ_POLL_ONLY="maybe": want true or false`},
		{"SHEETQ_LIMIT", "many", []string{"jobs", "list", "--server", srv.URL}, `SHEETQ_LIMIT="many": want a whole number from 1 to 1000`},
		{"SHEETQ_RATE", "fast", []string{"loadtest", "--profile", "steady", "--duration", "1s"}, `SHEETQ_RATE="fast": want a number`},
		{"SHEETQ_HEARTBEAT", "1m", serve(), `SHEETQ_HEARTBEAT="1m": stale-after (30s) must be at least twice`},
		{"SHEETQ_LOG_LEVEL", "loud", serve(), `SHEETQ_LOG_LEVEL="loud": --log-level: `},
		{"SHEETQ_NODE", "a node", serve(), `SHEETQ_NODE="a node": --node: a node name is`},
		// A postgres:// URL may hold a password: the variable alone is named.
		{"SHEETQ_STORE", "redis://me:hunter2@localhost/db", serve(), `SHEETQ_STORE: --store: want a postgres:// or mysql://`},
		{"SHEETQ_STORE", "redis://me:hunter2@localhost/db", []string{"doctor", "--data", dir}, `SHEETQ_STORE: --store: want a postgres:// or mysql://`},
		{"SHEETQ_TO", "redis://me:hunter2@localhost/db", []string{"store", "copy", "--data", dir}, `SHEETQ_TO: --to: want a postgres:// or mysql://`},
		{"SHEETQ_PROCS", "0", []string{"loadtest", "--server", srv.URL}, `SHEETQ_PROCS="0": --procs must be at least 1`},
		{"SHEETQ_RATE", "NaN", []string{"loadtest", "--profile", "steady", "--duration", "1s"}, `SHEETQ_RATE="NaN": `},
		{"SHEETQ_SERVER", "localhost:1", []string{"loadtest"}, `SHEETQ_SERVER="localhost:1": --server`},
		{"SHEETQ_TOKEN", "a\nhunter2", []string{"loadtest", "--server", srv.URL}, `SHEETQ_TOKEN: --token has a control character`},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			_, stderr, code := runCLI(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "hunter2") {
				t.Errorf("%s=%s %q: exit %d, stderr %q; want 2 and %q", tt.env, tt.value, tt.args, code, stderr, tt.want)
			}
			oneErrLine(t, strings.Join(tt.args, " "), stderr)
		})
	}

	// The command line's value is its own, whatever the environment holds.
	for _, env := range []string{"", "5"} {
		if env != "" {
			t.Setenv("SHEETQ_LIMIT", env)
		}
		_, stderr, code := runCLI(t, "jobs", "list", "--limit", "0", "--server", srv.URL)
		if code != 2 || stderr != "sheetq: --limit must be from 1 to 1000\n" {
			t.Errorf("--limit 0 with SHEETQ_LIMIT=%q: exit %d, stderr %q; want 2 and --limit alone", env, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sheetq.db")); err == nil {
		t.Errorf("a refused command created %s", filepath.Join(dir, "sheetq.db"))
	}
}

// A flag that the command line sets after parseWithEnv filled it from the environment
// (backup parses again after each FILE) is the command line's, and a boolean one still
// takes no value.
func TestCLIEnvValueSetAgainIsTheCommandLines(t *testing.T) {
	t.Setenv("SHEETQ_LIMIT", "0")
	t.Setenv("SHEETQ_WAIT", "false")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	limit := fs.Int("limit", 50, "")
	wait := fs.Bool("wait", false, "")
	if err := parseWithEnv(fs, nil); err != nil {
		t.Fatal(err)
	}
	if got := fromEnv(fs, "limit"); *limit != 0 || got != `SHEETQ_LIMIT="0"` {
		t.Fatalf("after the environment: limit %d, fromEnv %q", *limit, got)
	}
	if err := parseWithEnv(fs, []string{"--limit", "-3", "--wait"}); err != nil {
		t.Fatal(err)
	}
	if got := fromEnv(fs, "limit"); *limit != -3 || !*wait || got != "" || fromEnv(fs, "wait") != "" {
		t.Fatalf("after the command line: limit %d, wait %v, fromEnv %q; want -3, true and none", *limit, *wait, got)
	}
}
