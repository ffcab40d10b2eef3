package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sheetq/internal/apptest"
	"strings"
	"testing"
	"time"
)

// childArgsEnv carries the command line of TestCLIChild, as JSON, to the test binary
// run as a child process.
const childArgsEnv = "SHEETQ_TEST_CHILD_ARGS"

// TestCLIChild is not a test: it is the CLI in a child process that runCLIInZone
// starts with TZ set, so that time.Local is that zone from the start, as in the real
// binary. A test that set time.Local itself would race with every goroutine that
// calls time.Now.
func TestCLIChild(t *testing.T) {
	raw, ok := os.LookupEnv(childArgsEnv)
	if !ok {
		t.Skip("runs only as runCLIInZone's child")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, "bad", childArgsEnv, err)
		os.Exit(99)
	}
	os.Exit(Exit(Run(t.Context(), "test", args, os.Stdout, os.Stderr), os.Stderr))
}

// childCLI is the command that runs the CLI with args in the time zone tz (TZ=tz).
func childCLI(t *testing.T, tz string, args ...string) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCLIChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TZ="+tz, childArgsEnv+"="+string(raw))
	return cmd
}

// runCLIInZone is runCLI in a child process whose local time zone is tz.
func runCLIInZone(t *testing.T, tz string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := childCLI(t, tz, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run the CLI in %s: %v", tz, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// timesServer answers as a server whose export j1 was created at 05:00:00 UTC on 1
// January 2027 (winter) and finished at 04:00:30 UTC on 1 July (summer), and whose
// schedule s1 runs next at 05:00 UTC on 1 January, was last fired for 04:00 UTC on 1
// July, and was created at 05:00:07 UTC on 1 January; its event stream sends one event
// of 05:00:09 UTC on 1 January and stays open.
func timesServer(t *testing.T) string {
	job := `{"id":"j1","status":"SUCCEEDED","report":"demo","params":{"rows":5},"attempt":1,"max_attempts":3,
		"progress":{"rows":5},"created_at":"2027-01-01T05:00:00Z","started_at":"2027-07-01T04:00:00Z",
		"finished_at":"2027-07-01T04:00:30Z"}`
	sched := `{"id":"s1","report":"demo","params":{},"format":"xlsx","cron":"0 6 * * *","timezone":"Europe/Berlin",
		"deliver":[],"paused":false,"next_run_at":"2027-01-01T05:00:00Z","last_fired_for":"2027-07-01T04:00:00Z",
		"created_at":"2027-01-01T05:00:07Z","updated_at":"2027-01-01T05:00:07Z",
		"next_runs":[{"at":"2027-01-01T05:00:00Z","params":{}},{"at":"2027-07-01T04:00:00Z","params":{}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/exports":
			fmt.Fprint(w, `{"exports":[`+job+`]}`)
		case "GET /api/v1/exports/j1":
			fmt.Fprint(w, job)
		case "GET /api/v1/schedules":
			fmt.Fprint(w, `{"schedules":[`+sched+`]}`)
		case "GET /api/v1/schedules/s1", "POST /api/v1/schedules/s1/resume":
			fmt.Fprint(w, sched)
		case "POST /api/v1/schedules/preview":
			fmt.Fprint(w, `{"next_runs":[{"at":"2027-01-01T05:00:00Z","params":{}},{"at":"2027-07-01T04:00:00Z","params":{}}]}`)
		case "GET /api/v1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: 5\nevent: succeeded\ndata: {\"job\":%s,\"event\":{\"id\":5,\"type\":\"succeeded\",\"status\":\"SUCCEEDED\",\"at\":\"2027-01-01T05:00:09Z\"}}\n\n",
				strings.ReplaceAll(job, "\n", ""))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Every time the CLI prints is in the local time zone (TZ) with the zone's short name,
// winter and summer, or in UTC named UTC with --utc; --json keeps the server's RFC 3339
// (issue 37: schedules list printed a Berlin schedule's 06:00 as an unnamed 05:00:00).
func TestCLIShowsTimesInTheLocalZoneWithItsName(t *testing.T) {
	srv := timesServer(t)
	type want struct{ berlin, newYork, utc []string }
	for _, tt := range []struct {
		args []string
		want want
	}{
		{[]string{"jobs", "list"}, want{
			[]string{"2027-01-01 06:00:00 CET"}, []string{"2027-01-01 00:00:00 EST"}, []string{"2027-01-01 05:00:00 UTC"}}},
		{[]string{"jobs", "show", "j1"}, want{
			[]string{"created:   2027-01-01 06:00:00 CET", "started:   2027-07-01 06:00:00 CEST", "finished:  2027-07-01 06:00:30 CEST"},
			[]string{"created:   2027-01-01 00:00:00 EST", "started:   2027-07-01 00:00:00 EDT", "finished:  2027-07-01 00:00:30 EDT"},
			[]string{"created:   2027-01-01 05:00:00 UTC", "started:   2027-07-01 04:00:00 UTC", "finished:  2027-07-01 04:00:30 UTC"}}},
		{[]string{"schedules", "list"}, want{
			[]string{"Europe/Berlin  2027-01-01 06:00 CET  "}, []string{"Europe/Berlin  2027-01-01 00:00 EST  "}, []string{"Europe/Berlin  2027-01-01 05:00 UTC  "}}},
		{[]string{"schedules", "show", "s1"}, want{
			[]string{"next run:        2027-01-01 06:00 CET\n", "last fired for:  2027-07-01 06:00 CEST\n", "created:         2027-01-01 06:00:07 CET\n",
				"Fri 2027-01-01 06:00 CET", "Thu 2027-07-01 06:00 CEST"},
			[]string{"next run:        2027-01-01 00:00 EST\n", "last fired for:  2027-07-01 00:00 EDT\n", "created:         2027-01-01 00:00:07 EST\n",
				"Fri 2027-01-01 00:00 EST", "Thu 2027-07-01 00:00 EDT"},
			[]string{"next run:        2027-01-01 05:00 UTC\n", "last fired for:  2027-07-01 04:00 UTC\n", "created:         2027-01-01 05:00:07 UTC\n",
				"Fri 2027-01-01 05:00 UTC", "Thu 2027-07-01 04:00 UTC"}}},
		{[]string{"schedules", "preview", "--report", "demo", "--cron", "0 6 * * *", "--tz", "Europe/Berlin"}, want{
			[]string{"Fri 2027-01-01 06:00 CET ", "Thu 2027-07-01 06:00 CEST "},
			[]string{"Fri 2027-01-01 00:00 EST ", "Thu 2027-07-01 00:00 EDT "},
			[]string{"Fri 2027-01-01 05:00 UTC ", "Thu 2027-07-01 04:00 UTC "}}},
		{[]string{"schedules", "resume", "s1"}, want{
			[]string{"schedule s1 resumed; next run 2027-01-01 06:00 CET\n"},
			[]string{"schedule s1 resumed; next run 2027-01-01 00:00 EST\n"},
			[]string{"schedule s1 resumed; next run 2027-01-01 05:00 UTC\n"}}},
	} {
		for _, run := range []struct {
			tz   string
			utc  bool
			want []string
		}{
			{"Europe/Berlin", false, tt.want.berlin},
			{"America/New_York", false, tt.want.newYork},
			{"Europe/Berlin", true, tt.want.utc},
			{"America/New_York", true, tt.want.utc},
		} {
			args := append(append([]string{}, tt.args...), "--server", srv)
			if run.utc {
				args = append(args, "--utc")
			}
			stdout, stderr, code := runCLIInZone(t, run.tz, args...)
			if code != 0 {
				t.Errorf("TZ=%s %q: exit %d, stderr %q", run.tz, args, code, stderr)
				continue
			}
			for _, w := range run.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("TZ=%s %q: no %q in:\n%s", run.tz, args, w, stdout)
				}
			}
		}
	}
	// --json is the server's, RFC 3339 in UTC, in any zone.
	for _, args := range [][]string{{"jobs", "show", "j1"}, {"schedules", "show", "s1"}} {
		stdout, _, code := runCLIInZone(t, "America/New_York", append(args, "--json", "--server", srv)...)
		if code != 0 || !strings.Contains(stdout, `"2027-01-01T05:00:0`) {
			t.Errorf("%q --json: exit %d\n%s", args, code, stdout)
		}
	}
}

// jobs events prints each event's time in the local zone, named, or in UTC with --utc.
func TestJobsEventsShowsTimesInTheLocalZone(t *testing.T) {
	srv := timesServer(t)
	for _, tt := range []struct {
		tz   string
		utc  bool
		want string
	}{
		{"Europe/Berlin", false, "2027-01-01 06:00:09 CET  succeeded"},
		{"America/New_York", false, "2027-01-01 00:00:09 EST  succeeded"},
		{"America/New_York", true, "2027-01-01 05:00:09 UTC  succeeded"},
	} {
		args := []string{"jobs", "events", "--server", srv}
		if tt.utc {
			args = append(args, "--utc")
		}
		var out, errOut apptest.SyncBuffer
		cmd := childCLI(t, tt.tz, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "jobs events printed its event", func() bool {
			return strings.Contains(out.String(), "succeeded")
		})
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("TZ=%s %q: no %q in:\n%s%s", tt.tz, args, tt.want, out.String(), errOut.String())
		}
	}
}
