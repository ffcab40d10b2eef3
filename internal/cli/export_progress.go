package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"sheetq/internal/client"
)

// progress shows a job's progress: a bar redrawn in place on a terminal, plain lines
// (state changes, and rows at most every 2 s) otherwise.
type progress struct {
	w         io.Writer
	tty       bool
	drawn     bool
	status    string
	attempt   int
	lastLine  time.Time
	lastRows  int64
	rateStart time.Time
	rateRows  int64
}

func newProgress(w io.Writer, tty bool) *progress { return &progress{w: w, tty: tty, lastRows: -1} }

func (p *progress) update(j client.Job) {
	now := time.Now()
	changed := j.Status != p.status || j.Attempt != p.attempt
	p.status, p.attempt = j.Status, j.Attempt
	if j.Status == "PROCESSING" && (p.rateStart.IsZero() || j.Progress.Rows < p.rateRows) {
		p.rateStart, p.rateRows = now, j.Progress.Rows
	}
	if !p.tty {
		if changed {
			line := fmt.Sprintf("export %s: %s", j.ID, j.Status)
			if j.Attempt > 0 {
				line += fmt.Sprintf(" (attempt %d of %d)", j.Attempt, j.MaxAttempts)
			}
			if j.Error != nil && !j.Finished() {
				// The error is its source's words, line breaks and all: one line each.
				line += " after " + client.OneLine(j.Error.Code+": "+j.Error.Message)
			}
			fmt.Fprintln(p.w, line)
		} else if j.Status == "PROCESSING" && j.Progress.Rows != p.lastRows && now.Sub(p.lastLine) >= 2*time.Second {
			fmt.Fprintf(p.w, "export %s: %s rows%s\n", j.ID, j.Rows(), p.percentETA(j, now))
			p.lastLine, p.lastRows = now, j.Progress.Rows
		}
		return
	}
	line := fmt.Sprintf("%s %-10s", shortID(j.ID), j.Status)
	if j.Progress.TotalRows != nil && *j.Progress.TotalRows > 0 {
		frac := min(float64(j.Progress.Rows)/float64(*j.Progress.TotalRows), 1)
		const width = 30
		filled := int(frac * width)
		line += " [" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
	}
	line += " " + j.Rows() + " rows" + p.percentETA(j, now)
	// \r, then the line, then ESC[K (erase to the end of the line): a shorter line, such
	// as the finished one that has no ETA, must not keep the tail of a longer one.
	fmt.Fprint(p.w, "\r"+line+"\x1b[K")
	p.drawn = true
}

// percentETA is ", 42%, ETA 1m3s" when the total is known.
func (p *progress) percentETA(j client.Job, now time.Time) string {
	if j.Progress.TotalRows == nil || *j.Progress.TotalRows <= 0 {
		return ""
	}
	total := *j.Progress.TotalRows
	s := fmt.Sprintf(", %d%%", j.Progress.Rows*100/total)
	if el := now.Sub(p.rateStart); j.Status == "PROCESSING" && el > time.Second && j.Progress.Rows > p.rateRows {
		rate := float64(j.Progress.Rows-p.rateRows) / el.Seconds()
		eta := time.Duration(float64(total-j.Progress.Rows) / rate * float64(time.Second))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

func (p *progress) done() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
