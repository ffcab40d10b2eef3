package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
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
	// The runs are shown in the local zone (here Berlin's, which the cron is read in).
	stdout, stderr, code = runCLIInZone(t, "Europe/Berlin", append([]string{"schedules", "preview"}, flags...)...)
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
		!regexp.MustCompile(`^`+id+` +active +demo +30 6 \* \* 1 +Europe/Berlin +\d{4}-\d\d-\d\d \d\d:\d\d [A-Z]+ +email ann@example.com,bob@example.com +-$`).MatchString(lines[1]) {
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

// schedules create and preview send every --email, --webhook and --folder as a target:
// each flag is repeatable, and a second one never replaces the first.
func TestSchedulesSendEveryTarget(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/schedules/preview" {
			fmt.Fprint(w, `{"next_runs":[]}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"s1"}`)
	}))
	t.Cleanup(srv.Close)
	base := []string{"--report", "demo", "--cron", "0 6 * * *", "--server", srv.URL}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--webhook", "https://a.example/hook", "--webhook", "https://b.example/hook"},
			`[{"type":"webhook","url":"https://a.example/hook"},{"type":"webhook","url":"https://b.example/hook"}]`},
		{[]string{"--folder", "/srv/a", "--folder", "/srv/b"},
			`[{"type":"folder","path":"/srv/a"},{"type":"folder","path":"/srv/b"}]`},
		{[]string{"--email", "ann@example.com", "--email", "bob@example.com", "--webhook", "https://a.example/hook", "--folder", "/srv/a"},
			`[{"type":"email","to":["ann@example.com","bob@example.com"]},{"type":"webhook","url":"https://a.example/hook"},{"type":"folder","path":"/srv/a"}]`},
		{[]string{"--email", "ann@example.com", "--webhook", "https://a.example/hook", "--folder", "/srv/a", "--file-password", "env:SHEETQ_PASSWORD_PAYROLL"},
			`[{"type":"email","to":["ann@example.com"],"password":"env:SHEETQ_PASSWORD_PAYROLL"},{"type":"webhook","url":"https://a.example/hook"},{"type":"folder","path":"/srv/a","password":"env:SHEETQ_PASSWORD_PAYROLL"}]`},
	} {
		for _, sub := range []string{"create", "preview"} {
			stdout, stderr, code := runCLI(t, append(append([]string{"schedules", sub}, base...), tc.args...)...)
			mu.Lock()
			var sent struct {
				Deliver json.RawMessage `json:"deliver"`
			}
			err := json.Unmarshal([]byte(bodies[len(bodies)-1]), &sent)
			mu.Unlock()
			if code != 0 || err != nil || string(sent.Deliver) != tc.want {
				t.Errorf("%s %q: exit %d (stdout %q, stderr %q), sent deliver %s (%v); want %s",
					sub, tc.args, code, stdout, stderr, sent.Deliver, err, tc.want)
			}
		}
	}
}
