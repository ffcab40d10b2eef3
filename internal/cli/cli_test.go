package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs a command line in process as main does, and returns its stdout, its
// stderr and the exit status main would exit with.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut strings.Builder
	err := Run(t.Context(), "test", args, &out, &errOut)
	code = Exit(err, &errOut)
	return out.String(), errOut.String(), code
}

// `sheetq reports check DIR` is CI for report authors: it lists each file, prints the
// broken ones with file and line, and exits non-zero when any is broken.
func TestReportsCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.sql", "-- title: Good\n-- source: shop\n-- param: n int\nSELECT :n;\n")
	out, errOut, code := runCLI(t, "reports", "check", dir)
	if code != 0 || !strings.Contains(out, "ok  good  Good (source shop, 1 param, 0 column lines)") {
		t.Fatalf("valid folder: exit %d, output:\n%s%s", code, out, errOut)
	}

	write("bad.sql", "-- title: Bad\n-- source: shop\nSELECT :missing;\n")
	stdout, stderr, code := runCLI(t, "reports", "check", dir)
	if code != 1 {
		t.Fatalf("broken folder: exit %d, want 1", code)
	}
	if want := filepath.Join(dir, "bad.sql") + ":3:"; !strings.Contains(stdout, want) {
		t.Fatalf("output does not name %s:\n%s", want, stdout)
	}
	if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines != 0 || stderr == "" {
		t.Fatalf("want one line on stderr, got %q", stderr)
	}

	if out, errOut, code := runCLI(t, "reports", "frobnicate"); code == 0 {
		t.Fatalf("unknown subcommand succeeded:\n%s%s", out, errOut)
	}
}

// serveRefuses runs serve with a fresh data directory and args, and checks that it exits
// 2 with one line on stderr containing want, before it creates the data directory.
func serveRefuses(t *testing.T, want string, args ...string) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	_, stderr, code := runCLI(t, append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, args...)...)
	if code != 2 {
		t.Fatalf("%v: exit %d, want 2", args, code)
	}
	if msg := strings.TrimSpace(stderr); strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
		t.Fatalf("%v: want one line containing %q, got %q", args, want, msg)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("%v created the data directory (%v)", args, err)
	}
}

// serve refuses a --worker-nice outside 0..19 before it touches the data directory: exit
// 2 and one line on stderr that names the flag.
func TestServeRefusesBadWorkerNice(t *testing.T) {
	for _, v := range []string{"-1", "20"} {
		serveRefuses(t, "--worker-nice", "--worker-nice", v)
	}
}

// serve refuses a --cpuprofile it cannot create with one line naming the flag, before it
// opens the data directory.
func TestServeRefusesUnwritableCPUProfile(t *testing.T) {
	serveRefuses(t, "--cpuprofile", "--cpuprofile", filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
}

// The values the app checks (app.BadValueError) exit 2 like the flags checked on the
// command line, before anything is created; the same mistake in the config file exits 1
// and names its key.
func TestServeRefusesBadValuesTheAppChecks(t *testing.T) {
	for _, tt := range []struct{ want, flag, value string }{
		{"--base-url", "--base-url", "ftp://sheetq.example.com"},
		{"--files-download", "--files-download", "nope"},
		{"--store", "--store", "redis://localhost/db"},
		{"--files", "--files", "http://bucket"},
		{"--node", "--node", strings.Repeat("n", 65)},
		{"exposes sheetq beyond this machine", "--addr", "0.0.0.0:0"},
	} {
		serveRefuses(t, tt.want, tt.flag, tt.value)
	}
	t.Setenv("SHEETQ_STORE", "redis://localhost/db")
	serveRefuses(t, "--store")

	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "sheetq.toml"), []byte("[store]\nurl = \"redis://localhost/db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHEETQ_STORE", "")
	_, stderr, code := runCLI(t, "serve", "--data", data, "--addr", "127.0.0.1:0")
	if msg := strings.TrimSpace(stderr); code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "config "+filepath.Join(data, "sheetq.toml")+": [store] url:") {
		t.Fatalf("bad [store] url: exit %d, stderr %q; want exit 1 and one line naming the file and key", code, msg)
	}
}

// runWithConfig runs a command with --data in a new folder whose sheetq.toml (the
// default config file) holds body; it returns that file's path, stderr and the exit code.
func runWithConfig(t *testing.T, body string, args ...string) (config, stderr string, code int) {
	t.Helper()
	data := t.TempDir()
	config = filepath.Join(data, "sheetq.toml")
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, append([]string{args[0], "--data", data}, args[1:]...)...)
	return config, stderr, code
}

// A [serve] value of the config file that serve checks after reading it (a number out of
// range, a bad --check-db mode) is the file's error: exit 1, one line naming the file and
// the key, as docs/cli.md says; the same value as a flag stays a usage error (exit 2).
func TestServeNamesTheConfigFileForItsBadServeValues(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{"[serve]\nworkers = 0\n", "[serve] workers must be from 1 to 256"},
		{"[serve]\nworkers = \"abc\"\n", `serve.workers = "abc": want a whole number from 1 to 256`},
		{"[serve]\nworker_nice = 25\n", "[serve] worker_nice must be from 0 to 19"},
		{"[serve]\nshutdown_grace = \"-1s\"\n", "[serve] shutdown_grace cannot be negative"},
		{"[serve]\ncheck_db = \"sometimes\"\n", "[serve] check_db: "},
		{"[serve]\nheartbeat = \"5s\"\nstale_after = \"9s\"\n", "[serve] stale_after (9s) must be at least twice the heartbeat interval (5s)"},
		{"[serve]\nheartbeat = \"1m\"\n", "[serve] stale_after (30s) must be at least twice the heartbeat interval (1m0s)"},
	} {
		config, stderr, code := runWithConfig(t, tt.body, "serve", "--addr", "127.0.0.1:0")
		if msg := strings.TrimSpace(stderr); code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "config "+config+": "+tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 and one line with %q", tt.body, code, msg, tt.want)
		}
	}
	serveRefuses(t, "--workers must be from 1 to 256", "--workers", "0")
	serveRefuses(t, "--check-db: ", "--check-db", "sometimes")
}

// The config file's other tables are read later, by the app (tokens, sources, webhooks,
// SMTP, deliveries); what is wrong in them names the file too, then the key.
func TestServeNamesTheConfigFileForItsTables(t *testing.T) {
	t.Setenv("SHEETQ_TEST_UNSET_SECRET", "")
	for _, tt := range []struct{ body, want string }{
		{"[[tokens]]\nname = \"ci\"\ntoken = \"env:SHEETQ_TEST_UNSET_SECRET\"\n", `[[tokens]] "ci": token: environment variable SHEETQ_TEST_UNSET_SECRET is not set`},
		{"[[tokens]]\nname = \"ci\"\ntoken = \"short\"\n", `token "ci" is too short`},
		{"[sources.shop]\ndriver = \"postgres\"\ndsn = \"env:SHEETQ_TEST_UNSET_SECRET\"\n", `source "shop": dsn: environment variable`},
		{"[webhooks]\nsecret = \"env:SHEETQ_TEST_UNSET_SECRET\"\n", "webhooks: secret: environment variable"},
		{"[smtp]\nhost = \"localhost\"\npassword = \"env:SHEETQ_TEST_UNSET_SECRET\"\n", "smtp: password: environment variable"},
		{"[smtp]\nhost = \"localhost\"\nport = 99999\n", "smtp: port 99999"},
		{"[deliveries]\nfolders = [\"relative\"]\n", "deliveries: folders[0]"},
		{"[deliveries]\nattach_limit = -5\n", "[deliveries] attach_limit must be"},
		{"[files]\naccess_key = \"AKIA\"\n", "[files] access_key is the key of a bucket, but no bucket is named"},
	} {
		config, stderr, code := runWithConfig(t, tt.body, "serve", "--addr", "127.0.0.1:0")
		// Some are read after the reports are loaded, whose log line comes first.
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if msg := lines[len(lines)-1]; code != 1 || !strings.HasPrefix(msg, "sheetq: config "+config+": ") || !strings.Contains(msg, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 and a last line naming the file and %q", tt.body, code, stderr, tt.want)
		}
	}
}

// The tool commands that read [store] and [files] (doctor, backup, store) name the
// config file and key for a bad value there, as serve does, and --store for the flag's.
func TestToolsNameTheConfigFileForStoreAndFiles(t *testing.T) {
	t.Setenv("SHEETQ_TEST_UNSET_SECRET", "")
	for _, tt := range []struct{ body, want string }{
		{"[store]\nurl = \"redis://localhost/db\"\n", "[store] url: "},
		{"[files]\nurl = \"s3://bucket\"\naccess_key = \"env:SHEETQ_TEST_UNSET_SECRET\"\n", "[files] access_key: environment variable"},
		{"[files]\nurl = \"s3://b\"\n", "[files] url: "},
		{"[files]\nsecret_key = \"env:SHEETQ_TEST_UNSET_SECRET\"\n", "[files] secret_key is the key of a bucket, but no bucket is named"},
	} {
		config, stderr, code := runWithConfig(t, tt.body, "doctor")
		if msg := strings.TrimSpace(stderr); code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "config "+config+": "+tt.want) {
			t.Errorf("doctor with %q: exit %d, stderr %q; want exit 1 and one line with the file and %q", tt.body, code, msg, tt.want)
		}
	}
	_, stderr, code := runCLI(t, "doctor", "--data", t.TempDir(), "--store", "redis://localhost/db")
	if code != 2 || !strings.Contains(stderr, "--store: ") {
		t.Errorf("doctor --store redis://: exit %d, %q", code, stderr)
	}
}

// TestServeRefusesStaleUnderTwoHeartbeats: the engine's staleness rule (jobs.Config.
// Validate) refuses the flags before anything is created, as one line.
func TestServeRefusesStaleUnderTwoHeartbeats(t *testing.T) {
	serveRefuses(t, "stale-after (9s) must be at least twice", "--heartbeat", "5s", "--stale-after", "9s")
}

// `sheetq reports check` refuses a report whose queue the config file does not define,
// when it has a config file to read; with a folder and no --config it checks the name's
// form only.
func TestReportsCheckQueues(t *testing.T) {
	root := t.TempDir()
	reports := filepath.Join(root, "reports")
	if err := os.MkdirAll(reports, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"big.sql":  "-- source: shop\n-- queue: heavy\nSELECT 1;\n",
		"lost.sql": "-- source: shop\n-- queue: nowhere\nSELECT 1;\n",
	} {
		if err := os.WriteFile(filepath.Join(reports, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(root, "sheetq.toml")
	if err := os.WriteFile(config, []byte("[queues.heavy]\nworkers = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"reports", "check", "--config", config, reports},
		{"reports", "check", "--data", root}, // the data directory's own sheetq.toml
	} {
		out, _, code := runCLI(t, args...)
		if code != 1 || !strings.Contains(out, "ok    big  big (source shop") || !strings.Contains(out, filepath.Join(reports, "lost.sql")+":2:") ||
			!strings.Contains(out, "nowhere") {
			t.Fatalf("%v: exit %d, want 1 with lost.sql:2 refused and big ok:\n%s", args, code, out)
		}
	}
	if out, errOut, code := runCLI(t, "reports", "check", reports); code != 0 {
		t.Fatalf("without a config file: exit %d, want 0:\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "reports", "check", "--config", filepath.Join(root, "missing.toml"), reports); code == 0 ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("a missing --config file: exit %d, stderr %q; want non-zero and one line", code, errOut)
	}
}
