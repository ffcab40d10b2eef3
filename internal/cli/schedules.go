package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"sheetq/internal/client"
)

const schedulesUsage = `Usage:
  sheetq schedules list [--utc] [--json]
  sheetq schedules show ID [--utc] [--json]
  sheetq schedules create --report R [-p name=value]... --cron EXPR [--tz ZONE] [--format xlsx|csv [--bom]]
                          [--email ADDR]... [--webhook URL]... [--folder PATH]... [--paused] [--json]
  sheetq schedules preview (the flags of create) [--utc]
  sheetq schedules pause ID [--json]
  sheetq schedules resume ID [--utc] [--json]
  sheetq schedules delete ID [--json]

Keep a running sheetq server's scheduled exports. A date parameter may be relative to
each run: today, today(-7), week_start, month_start(-1). Times are shown in the local
time zone (the TZ variable), named, or in UTC with --utc; --tz is the zone the cron
expression is read in. Examples:
  sheetq schedules preview --report orders -p from='month_start(-1)' -p to='month_start(0)' \
      --cron '0 6 1 * *' --tz Europe/Berlin
  sheetq schedules create --report orders -p from='month_start(-1)' -p to='month_start(0)' \
      --cron '0 6 1 * *' --tz Europe/Berlin --email ann@example.com
  sheetq schedules pause 01JF...

Exit status: 0 done, 1 refused by the server (unknown id), 2 bad command line or a
schedule the server refuses (a wrong cron expression, zone, parameter or target), 4
server or network error.
`

const schedulesSubs = "list, show, create, preview, pause, resume or delete"

// schedulesCmd runs `sheetq schedules list|show|create|preview|pause|resume|delete`.
func schedulesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, schedulesUsage)
		return usageError{errors.New("schedules needs a subcommand: " + schedulesSubs)}
	}
	switch sub := args[0]; sub {
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, schedulesUsage)
		return nil
	case "list":
		return schedulesList(ctx, args[1:], stdout, stderr)
	case "show":
		return schedulesShow(ctx, args[1:], stdout, stderr)
	case "create", "preview":
		return schedulesCreate(ctx, sub, args[1:], stdout, stderr)
	case "pause", "resume":
		return schedulesPause(ctx, sub, args[1:], stdout, stderr)
	case "delete":
		return schedulesDelete(ctx, args[1:], stdout, stderr)
	default:
		return usageError{fmt.Errorf("unknown schedules subcommand %q (want %s)", sub, schedulesSubs)}
	}
}

// newSchedulesFlags is the flag set of `sheetq schedules SUB`, with --json and the
// client's flags.
func newSchedulesFlags(sub, help string, stderr io.Writer) (*flag.FlagSet, *jobsFlags) {
	fs := flag.NewFlagSet("schedules "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := &jobsFlags{}
	sf.register(fs)
	fs.BoolVar(&sf.asJSON, "json", false, "print the server's JSON")
	fs.Usage = func() {
		fmt.Fprint(stderr, help+"\nFlags (each also read from SHEETQ_<NAME>):\n")
		printFlags(stderr, fs)
	}
	return fs, sf
}

const schedulesListHelp = "Usage: sheetq schedules list [--utc] [--json]\n\nList the schedules with their next run, in the local time zone (--utc: in UTC). Example:\n  sheetq schedules list\n"

// schedulesList runs `sheetq schedules list`: a table of schedules.
func schedulesList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newSchedulesFlags("list", schedulesListHelp, stderr)
	var zone zoneFlag
	zone.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{errors.New("schedules list takes no arguments")}
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	list, b, err := c.ListSchedules(ctx)
	if err != nil {
		return classify(err)
	}
	if sf.asJSON {
		return writeIndented(stdout, b)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no schedules")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tREPORT\tCRON\tZONE\tNEXT RUN\tDELIVER\tOWNER")
	for _, sc := range list {
		next := "-"
		if sc.NextRunAt != nil {
			next = zone.format(sc.NextRunAt, toMinute)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.ID, stateText(sc.Paused), sc.Report, sc.Cron, sc.TimeZone,
			next, targetsText(sc.Deliver), cmp.Or(sc.Owner, "-"))
	}
	return tw.Flush()
}

const schedulesShowHelp = "Usage: sheetq schedules show ID [--utc] [--json]\n\nShow one schedule and its next runs, in the local time zone (--utc: in UTC). Example:\n  sheetq schedules show 01JF...\n"

// schedulesShow runs `sheetq schedules show ID`: the schedule's fields, then its next runs.
func schedulesShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newSchedulesFlags("show", schedulesShowHelp, stderr)
	var zone zoneFlag
	zone.register(fs)
	id, c, err := oneScheduleID(fs, sf, "show", args)
	if err != nil {
		return err
	}
	sc, b, err := c.GetSchedule(ctx, id)
	if err != nil {
		return classify(err)
	}
	if sf.asJSON {
		return writeIndented(stdout, b)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", sc.ID)
	row("state", stateText(sc.Paused))
	row("report", sc.Report)
	format := sc.Format
	if sc.BOM {
		format += " (with a UTF-8 BOM)"
	}
	row("format", format)
	row("params", paramSummary(sc.Params, 1000))
	row("cron", sc.Cron)
	row("timezone", sc.TimeZone)
	row("deliver", targetsText(sc.Deliver))
	row("owner", sc.Owner)
	row("next run", zone.format(sc.NextRunAt, toMinute))
	row("last fired for", zone.format(sc.LastFiredFor, toMinute))
	row("created", zone.format(&sc.CreatedAt, toSecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(sc.NextRuns) > 0 {
		fmt.Fprintln(stdout, "next runs:")
		return printRuns(stdout, sc.NextRuns, zone)
	}
	return nil
}

const schedulesCreateHelp = `Usage: sheetq schedules create --report R [-p name=value]... --cron EXPR [--tz ZONE] [--format xlsx|csv [--bom]]
                               [--email ADDR]... [--webhook URL]... [--folder PATH]... [--file-password REF]
                               [--paused] [--json]

Create a schedule and print its id. Example:
  sheetq schedules create --report orders -p from='month_start(-1)' -p to='month_start(0)' \
      --cron '0 6 1 * *' --tz Europe/Berlin --email ann@example.com
`

const schedulesPreviewHelp = `Usage: sheetq schedules preview --report R [-p name=value]... --cron EXPR [--tz ZONE] [--utc] (and create's other flags)

Print the next five runs of a schedule, with its parameters as each run resolves them,
without creating it. The cron expression is read in --tz; the runs are shown in the
local time zone (--utc: in UTC), named. Example:
  sheetq schedules preview --report orders -p from='month_start(-1)' -p to='month_start(0)' --cron '0 6 1 * *' --tz Europe/Berlin
`

// schedulesCreate runs `sheetq schedules create` and `sheetq schedules preview`, which
// take the same flags: preview prints the next runs, create makes the schedule.
func schedulesCreate(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	help := schedulesCreateHelp
	if sub == "preview" {
		help = schedulesPreviewHelp
	}
	fs, sf := newSchedulesFlags(sub, help, stderr)
	var zone zoneFlag
	if sub == "preview" {
		zone.register(fs) // create prints the new schedule's id alone
	}
	params := map[string]string{}
	var (
		req      client.ScheduleRequest
		emails   []string
		webhooks []string
		folders  []string
		password string
	)
	fs.StringVar(&req.Report, "report", "", "the `report` id to export")
	fs.Func("p", "report parameter `name=value` (repeatable); a date may be relative: month_start(-1)", paramFlag(params))
	fs.StringVar(&req.Cron, "cron", "", "five-field cron `expression`, such as '0 6 1 * *' (06:00 on the 1st)")
	fs.StringVar(&req.TimeZone, "tz", "UTC", "IANA time `zone` the expression and relative dates are read in")
	fs.StringVar(&req.Format, "format", "", "file `format`: xlsx (default) or csv")
	fs.BoolVar(&req.BOM, "bom", false, "start a csv file with a UTF-8 byte order mark")
	fs.Func("email", "email the file to this `address` (repeatable, or comma-separated)", func(s string) error {
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				emails = append(emails, a)
			}
		}
		return nil
	})
	// Repeatable like --email (a schedule takes several targets of a kind): as string
	// flags, a second --webhook or --folder silently replaced the first.
	fs.Func("webhook", "post each file's news to this webhook `URL` (repeatable)", func(s string) error {
		if s != "" {
			webhooks = append(webhooks, s)
		}
		return nil
	})
	fs.Func("folder", "copy each file into this `folder` on the server (repeatable)", func(s string) error {
		if s != "" {
			folders = append(folders, s)
		}
		return nil
	})
	fs.StringVar(&password, "file-password", "", "encrypt the emailed and copied file with the password in `REF`: env:SHEETQ_PASSWORD_<NAME> or file:PATH (where it is, never the password)")
	fs.BoolVar(&req.Paused, "paused", false, "create the schedule paused")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 0:
		return usageError{fmt.Errorf("schedules %s takes no arguments (give the report with --report)", sub)}
	case req.Report == "":
		return usageError{fmt.Errorf("schedules %s needs --report", sub)}
	case req.Cron == "":
		return usageError{fmt.Errorf("schedules %s needs --cron, such as --cron '0 6 * * *'", sub)}
	}
	if password != "" && len(emails) == 0 && len(folders) == 0 {
		return blameEnv(fs, usageError{errors.New("--file-password encrypts the file of --email or --folder, and there is neither")}, "file-password")
	}
	req.Params = params
	if len(emails) > 0 {
		req.Deliver = append(req.Deliver, client.Target{Type: "email", To: emails, Password: password})
	}
	for _, u := range webhooks {
		req.Deliver = append(req.Deliver, client.Target{Type: "webhook", URL: u})
	}
	for _, p := range folders {
		req.Deliver = append(req.Deliver, client.Target{Type: "folder", Path: p, Password: password})
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	if sub == "preview" {
		runs, b, err := c.PreviewSchedule(ctx, req)
		if err != nil {
			return classify(err)
		}
		if sf.asJSON {
			return writeIndented(stdout, b)
		}
		return printRuns(stdout, runs, zone)
	}
	sc, b, err := c.CreateSchedule(ctx, req)
	if err != nil {
		return classify(err)
	}
	if sf.asJSON {
		return writeIndented(stdout, b)
	}
	fmt.Fprintln(stdout, sc.ID)
	return nil
}

const schedulesPauseHelp = "Usage: sheetq schedules pause|resume ID [--utc] [--json]\n\nPause a schedule (it does not fire until resumed), or resume it (from its next time after now, printed\nin the local time zone; --utc: in UTC). Example:\n  sheetq schedules pause 01JF...\n"

// schedulesPause runs `sheetq schedules pause ID` and `sheetq schedules resume ID`.
func schedulesPause(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs, sf := newSchedulesFlags(sub, schedulesPauseHelp, stderr)
	var zone zoneFlag
	zone.register(fs)
	id, c, err := oneScheduleID(fs, sf, sub, args)
	if err != nil {
		return err
	}
	sc, b, err := c.SetSchedulePaused(ctx, id, sub == "pause")
	if err != nil {
		return classify(err)
	}
	if sf.asJSON {
		return writeIndented(stdout, b)
	}
	if sc.Paused {
		fmt.Fprintf(stdout, "schedule %s paused\n", sc.ID)
	} else {
		fmt.Fprintf(stdout, "schedule %s resumed; next run %s\n", sc.ID, cmp.Or(zone.format(sc.NextRunAt, toMinute), "-"))
	}
	return nil
}

const schedulesDeleteHelp = "Usage: sheetq schedules delete ID [--json]\n\nDelete a schedule; the exports it made stay. Example:\n  sheetq schedules delete 01JF...\n"

// schedulesDelete runs `sheetq schedules delete ID`.
func schedulesDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newSchedulesFlags("delete", schedulesDeleteHelp, stderr)
	id, c, err := oneScheduleID(fs, sf, "delete", args)
	if err != nil {
		return err
	}
	if err := c.DeleteSchedule(ctx, id); err != nil {
		return classify(err)
	}
	if sf.asJSON {
		return writeIndented(stdout, fmt.Appendf(nil, `{"id":%q,"deleted":true}`, id))
	}
	fmt.Fprintf(stdout, "schedule %s deleted; the exports it made stay\n", id)
	return nil
}

// oneScheduleID parses the flags and the one schedule id of `sheetq schedules SUB ID`.
func oneScheduleID(fs *flag.FlagSet, sf *jobsFlags, sub string, args []string) (string, *client.Client, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return "", nil, err
	}
	if len(pos) != 1 {
		return "", nil, usageError{fmt.Errorf("schedules %s takes one schedule ID", sub)}
	}
	c, err := sf.client()
	if err != nil {
		return "", nil, err
	}
	return pos[0], c, nil
}

// printRuns prints the runs, one a line, as zone shows them with the day of the week
// ("Tue 2026-12-01 06:00 CET"), then the parameters as that run resolves them.
func printRuns(w io.Writer, runs []client.ScheduledRun, zone zoneFlag) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\n", zone.format(&r.At, "Mon "+toMinute), paramSummary(r.Params, 1000))
	}
	return tw.Flush()
}

// stateText is "paused" or "active".
func stateText(paused bool) string {
	if paused {
		return "paused"
	}
	return "active"
}

// targetsText sums up where a schedule's files go: "email ann@example.com,
// webhook https://..., folder /srv/x", or "-".
func targetsText(ts []client.Target) string {
	var parts []string
	for _, t := range ts {
		switch t.Type {
		case "email":
			parts = append(parts, "email "+strings.Join(t.To, ",")+encryptedText(t))
		case "webhook":
			parts = append(parts, "webhook "+t.URL)
		case "folder":
			parts = append(parts, "folder "+t.Path+encryptedText(t))
		default:
			parts = append(parts, t.Type)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// encryptedText is " (encrypted)" for a target whose file is encrypted with a password.
func encryptedText(t client.Target) string {
	if t.Password != "" {
		return " (encrypted)"
	}
	return ""
}
