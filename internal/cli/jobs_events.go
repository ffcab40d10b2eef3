package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"sheetq/internal/apiv1"
	"sheetq/internal/client"
)

const jobsEventsHelp = `Usage: sheetq jobs events [ID] [--utc] [--json]

Follow the server's event stream (GET /api/v1/events), every export's or only ID's,
printing one line per event as it comes: time (local, or UTC with --utc), event,
export, and what changed.
Reconnects with Last-Event-ID when the stream drops. Ctrl-C ends it (exit 130).
Example:
  sheetq jobs events
  sheetq jobs events 3xq4abcd... --json

Exit status: 130 ended by Ctrl-C, 1 refused (unknown export), 4 server or network error.
`

// jobsEvents runs `sheetq jobs events [ID]`: client.Events, printed as it comes, until
// Ctrl-C.
func jobsEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, jf := newJobsFlags("events", jobsEventsHelp, stderr)
	var zone zoneFlag
	zone.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usageError{errors.New("jobs events takes at most one export ID")}
	}
	job := ""
	if len(pos) == 1 {
		if err := checkID("events", pos[0]); err != nil {
			return err
		}
		job = pos[0]
	}
	c, err := jf.client()
	if err != nil {
		return err
	}
	if job != "" {
		// An unknown id would otherwise be a silent stream (exit 1, as jobs show).
		if _, _, err := c.GetJob(ctx, job); err != nil {
			return classify(err)
		}
	}
	show := func(e client.Event) bool {
		if e.Type == "" && len(e.Data) == 0 {
			return true // the stream's opening cursor: an id only, for Last-Event-ID
		}
		if jf.asJSON {
			line, _ := json.Marshal(struct {
				ID   string          `json:"id,omitempty"`
				Type string          `json:"type"`
				Data json.RawMessage `json:"data,omitempty"`
			}{e.ID, e.Type, rawJSON(e.Data)})
			fmt.Fprintf(stdout, "%s\n", line)
			return true
		}
		for _, line := range eventLines(e, time.Now(), zone) {
			fmt.Fprintln(stdout, line)
		}
		return true
	}
	lastID := ""
	failures := 0
	for {
		seen := false
		lastID, err = c.Events(ctx, job, lastID, func(e client.Event) bool {
			seen = true
			return show(e)
		})
		if ctx.Err() != nil {
			return exitError{exitInterrupted, errors.New("interrupted")}
		}
		if client.Refused(err) {
			return classify(err)
		}
		if seen {
			failures = 0
		} else if failures++; failures >= 5 {
			if err == nil {
				err = errors.New("the event stream keeps ending")
			}
			return exitError{exitServer, err}
		}
		select {
		case <-ctx.Done():
			return exitError{exitInterrupted, errors.New("interrupted")}
		case <-time.After(time.Duration(failures) * 500 * time.Millisecond):
		}
	}
}

// rawJSON is b when it is JSON, else b as a JSON string.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

// eventLines is one event as lines of "TIME  EVENT  EXPORT  WHAT": one line, or one
// per job for a snapshot; the time as zone shows it.
func eventLines(e client.Event, now time.Time, zone zoneFlag) []string {
	// Each field on one line whatever the server sent (an export's error in its
	// source's words, an event's data of several lines): one event is one line.
	line := func(at time.Time, typ, id, what string) string {
		return fmt.Sprintf("%s  %-14s  %-26s  %s", zone.format(&at, toSecond), client.OneLine(typ), client.OneLine(id), client.OneLine(what))
	}
	jobWhat := func(j apiv1.Job) string {
		s := fmt.Sprintf("%s, attempt %d/%d, %s rows", j.Status, j.Attempt, j.MaxAttempts, rowsText(j))
		if j.Error != nil {
			s += ", " + j.Error.Code + ": " + j.Error.Message
		}
		if j.File != nil {
			s += ", " + sizeText(j)
		}
		return s
	}
	switch e.Type {
	case "progress":
		var p apiv1.ProgressEvent
		if json.Unmarshal(e.Data, &p) == nil {
			j := apiv1.Job{Progress: apiv1.Progress{Rows: p.Rows, TotalRows: p.TotalRows}}
			what := rowsText(j) + " rows"
			if p.TotalRows != nil && *p.TotalRows > 0 {
				what += fmt.Sprintf(", %d%%", p.Rows*100 / *p.TotalRows)
			}
			return []string{line(now, e.Type, p.ID, what)}
		}
	case "deleted":
		var d apiv1.Deleted
		if json.Unmarshal(e.Data, &d) == nil {
			return []string{line(now, e.Type, d.ID, "deleted with its file and events")}
		}
	case "snapshot":
		var s apiv1.Snapshot
		if json.Unmarshal(e.Data, &s) == nil {
			lines := make([]string, 0, len(s.Jobs))
			for _, j := range s.Jobs {
				lines = append(lines, line(now, e.Type, j.ID, jobWhat(j)))
			}
			return lines
		}
	default:
		var m apiv1.StateEvent
		if json.Unmarshal(e.Data, &m) == nil && (m.Job != nil || m.Event.Type != "") {
			at := m.Event.At
			if at.IsZero() {
				at = now
			}
			if m.Job == nil {
				return []string{line(at, e.Type, "-", m.Event.Status+" (the export has been deleted since)")}
			}
			return []string{line(at, e.Type, m.Job.ID, jobWhat(*m.Job))}
		}
	}
	return []string{line(now, e.Type, "-", string(e.Data))}
}
