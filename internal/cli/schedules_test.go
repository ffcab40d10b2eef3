package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// schedules preview prints five runs with their parameters; create prints the id; list,
// show, pause, resume and delete act on it; a wrong cron expression is one line and
// exit 2, an unknown id exit 1; --json prints the server's JSON.
func TestSchedulesAgainstTheApp(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := startApp(t)

	stdout, stderr, code := runCLI(t, "schedules", "list", "--server", srv)
	if code != 0 || stdout != "no schedules\n" || stderr != "" {
		t.Fatalf("empty list: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	flags := []string{"--report", "demo", "-p", "rows=7", "--cron", "30 6 * * 1", "--tz", "Europe/Berlin", "--server", srv}
	stdout, stderr, code = runCLI(t, append([]string{"schedules", "preview"}, flags...)...)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 5 {
		t.Fatalf("preview: exit %d\n%s%s", code, stdout, stderr)
	}
	run := regexp.MustCompile(`^Mon \d{4}-\d\d-\d\d 06:30 CES?T +rows=7$`)
	for _, l := range lines {
		if !run.MatchString(l) {
			t.Errorf("preview line %q, want it to match %s", l, run)
		}
	}

	bad := []string{"schedules", "create", "--report", "demo", "--cron", "61 * * * *", "--server", srv}
	stdout, stderr, code = runCLI(t, bad...)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "cron") {
		t.Fatalf("wrong cron: exit %d, stdout %q, stderr %q; want 2", code, stdout, stderr)
	}
	oneErrLine(t, "wrong cron", stderr)
	_, stderr, code = runCLI(t, "schedules", "create", "--cron", "0 6 * * *", "--server", srv)
	if code != 2 || !strings.Contains(stderr, "--report") {
		t.Fatalf("no --report: exit %d, stderr %q", code, stderr)
	}
	oneErrLine(t, "no --report", stderr)
	_, stderr, code = runCLI(t, "schedules", "create", "--report", "demo", "--cron", "0 6 * * *", "--email", "not an address", "--server", srv)
	if code != 2 {
		t.Fatalf("bad email: exit %d, stderr %q", code, stderr)
	}
	oneErrLine(t, "bad email", stderr)
	// Three wrong values: all named, on one line.
	_, stderr, code = runCLI(t, "schedules", "create", "--report", "demo", "--cron", "61 * * * *", "--tz", "Mars/Base",
		"--email", "not-an-address", "--server", srv)
	if code != 2 || !strings.Contains(stderr, "cron: ") || !strings.Contains(stderr, "Mars/Base") ||
		!strings.Contains(stderr, "deliver[0]: ") {
		t.Fatalf("three wrong values: exit %d, stderr %q", code, stderr)
	}
	oneErrLine(t, "three wrong values", stderr)

	stdout, stderr, code = runCLI(t, append([]string{"schedules", "create", "--email", "ann@example.com,bob@example.com"}, flags...)...)
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" || strings.Contains(id, "\n") {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	stdout, _, code = runCLI(t, "schedules", "list", "--server", srv)
	lines = strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || !regexp.MustCompile(`^ID +STATE +REPORT +CRON +ZONE +NEXT RUN +DELIVER +OWNER$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+id+` +active +demo +30 6 \* \* 1 +Europe/Berlin +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +email ann@example.com,bob@example.com +-$`).MatchString(lines[1]) {
		t.Fatalf("list: exit %d\n%s", code, stdout)
	}

	stdout, _, code = runCLI(t, "schedules", "show", id, "--server", srv)
	if code != 0 || !strings.Contains(stdout, "cron:") || !strings.Contains(stdout, "30 6 * * 1") ||
		!strings.Contains(stdout, "next runs:") || strings.Count(stdout, "rows=7") != 6 {
		t.Fatalf("show: exit %d\n%s", code, stdout)
	}

	stdout, _, code = runCLI(t, "schedules", "pause", id, "--server", srv)
	if code != 0 || stdout != "schedule "+id+" paused\n" {
		t.Fatalf("pause: exit %d, %q", code, stdout)
	}
	// -p rows=7 is kept as the number 7, as the API and the pages keep it.
	stdout, _, code = runCLI(t, "schedules", "show", id, "--json", "--server", srv)
	var created struct {
		Params map[string]any `json:"params"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &created) != nil || created.Params["rows"] != 7.0 {
		t.Fatalf("show --json: params %#v (exit %d)", created.Params, code)
	}

	stdout, _, code = runCLI(t, "schedules", "show", id, "--json", "--server", srv)
	var sc struct {
		Paused   bool  `json:"paused"`
		NextRuns []any `json:"next_runs"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &sc) != nil || !sc.Paused || len(sc.NextRuns) != 0 {
		t.Fatalf("show --json after pause: exit %d\n%s", code, stdout)
	}
	stdout, _, code = runCLI(t, "schedules", "resume", id, "--server", srv)
	if code != 0 || !strings.HasPrefix(stdout, "schedule "+id+" resumed; next run 20") {
		t.Fatalf("resume: exit %d, %q", code, stdout)
	}

	stdout, _, code = runCLI(t, "schedules", "delete", id, "--server", srv)
	if code != 0 || !strings.HasPrefix(stdout, "schedule "+id+" deleted") {
		t.Fatalf("delete: exit %d, %q", code, stdout)
	}
	_, stderr, code = runCLI(t, "schedules", "show", id, "--server", srv)
	if code != 1 {
		t.Fatalf("show a deleted schedule: exit %d, %q; want 1", code, stderr)
	}
	oneErrLine(t, "show a deleted schedule", stderr)
	_, stderr, code = runCLI(t, "schedules", "frobnicate")
	if code != 2 {
		t.Fatalf("unknown subcommand: exit %d, %q", code, stderr)
	}
}
